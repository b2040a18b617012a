"""torch_npu benchmark suite: run.py (runner) drives small_ops, kernels, copies, training and allocator.

The modules import each other as top-level modules because run.py is started as a script
(`.venv/bin/python bench/run.py`): run from the repository root with -m, the source torch_npu/
would shadow the installed package.
"""
