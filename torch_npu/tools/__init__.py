"""torch_npu.tools: command-line tools (the script converter: python -m torch_npu.tools.transplt)."""
