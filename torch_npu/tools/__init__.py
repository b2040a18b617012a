"""torch_npu.tools: command-line tools (python -m torch_npu.tools.<name>)."""
