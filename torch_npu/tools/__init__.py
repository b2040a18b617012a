"""torch_npu.tools: command-line tools (accuracy compare, dump parsing, CPU-vs-npu comparison)."""
