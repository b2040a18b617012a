"""torch_npu.distributed.run: torchrun for npu jobs (``python -m torch_npu.distributed.run ...`` or
``torch_npu_run``), taking torchrun's arguments plus torch_npu's --enable_tiered_parallel_tcpstore.

On Ascend clusters that flag puts a proxy between each node's workers and the rendezvous TCPStore to
spread its load over thousands of ranks; a software NPU job's store is small, so the flag is accepted
(and checked) and the job runs on torchrun's own c10d rendezvous."""

from torch.distributed import run as _torch_run
from torch.distributed.argparse_util import env
from torch.distributed.elastic.multiprocessing.errors import record

__all__ = ["parse_args"]

_BOOLS = {"true": True, "false": False, "1": True, "0": False}


def parse_args(args):
    """torchrun's argument parser with --enable_tiered_parallel_tcpstore (env
    PET_ENABLE_TIERED_PARALLEL_TCPSTORE; "true" / "false")."""
    parser = _torch_run.get_args_parser()
    parser.add_argument(
        "--enable_tiered_parallel_tcpstore", "--enable-tiered-parallel-tcpstore", action=env, type=str,
        default="false",
        help="Put a per-node proxy between workers and the rendezvous store (Ascend clusters); accepted and "
             "checked here, where the job's store needs no proxy.")
    parsed = parser.parse_args(args)
    value = str(parsed.enable_tiered_parallel_tcpstore).strip().lower()
    if value not in _BOOLS:
        parser.error(f"--enable_tiered_parallel_tcpstore takes true or false, got {parsed.enable_tiered_parallel_tcpstore!r}")
    parsed.enable_tiered_parallel_tcpstore = _BOOLS[value]
    return parsed


@record
def _main(args=None):
    _torch_run.run(parse_args(args))


if __name__ == "__main__":
    _main()
