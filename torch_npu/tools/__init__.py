"""torch_npu.tools: command-line tools, run as python -m torch_npu.tools.<name> (op report, accuracy
compare, dump parsing, CPU-vs-npu comparison, the script converter transplt)."""
