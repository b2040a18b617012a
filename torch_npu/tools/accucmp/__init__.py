"""msaccucmp: compares an NPU dump with a benchmark dump (torch.utils.dumper HDF5 files), tensor by
tensor, and names the op most likely to have caused the difference (docs/accuracy.md).

    python -m torch_npu.tools.accucmp compare -m npu.h5 -g golden.h5 -o report_dir
"""

from torch_npu.tools.accucmp.compare import CompareResult, OpResult, Row, compare_files

__all__ = ["compare_files", "CompareResult", "OpResult", "Row"]
