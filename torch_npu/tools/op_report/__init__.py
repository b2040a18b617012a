"""Op-support report: which ATen / npu ops a script calls, how often, with which shapes and dtypes, and how
each runs on npu: a named device op, another npu kernel, the generic executor (a CPU kernel queued on the
npu stream: a real NPU's op library would not run it) or the copying CPU fallback. Blockers come first.

    python -m torch_npu.tools.op_report [-o DIR] -- train.py --epochs 1

or from Python:

    from torch_npu.tools.op_report import OpReport
    with OpReport() as report:
        model(x)
    report.write("op_report")        # op_report.md, op_report.html, op_report.csv
"""

from ._collector import OpReport, OpUse
from ._render import write_reports

__all__ = ["OpReport", "OpUse", "write_reports"]
