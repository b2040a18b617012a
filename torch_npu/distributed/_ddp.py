"""DistributedDataParallel on hccl: the bf16 gradient-compression hooks, which DDP otherwise accepts
only for NCCL / XCCL (it checks the hook's name), are allowed for groups that run hccl."""

import functools

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

_BF16_HOOKS = ("bf16_compress_hook", "bf16_compress_wrapper_hook")


def _uses_hccl(ddp) -> bool:
    try:
        return "hccl" in str(dist.get_backend(ddp.process_group))
    except (RuntimeError, ValueError, AttributeError):
        return False


def install() -> None:
    original = getattr(DistributedDataParallel, "_check_comm_hook", None)
    if original is None or getattr(original, "_hccl", False):
        return

    @functools.wraps(original)
    def _check_comm_hook(self, hook):
        if getattr(hook, "__name__", "") in _BF16_HOOKS and _uses_hccl(self):
            # The remaining checks look at the signature only: run them on a renamed view of the hook.
            @functools.wraps(hook)
            def renamed(*args, **kwargs):
                return hook(*args, **kwargs)

            renamed.__name__ = "hccl_" + hook.__name__
            return original(self, renamed)
        return original(self, hook)

    _check_comm_hook._hccl = True
    DistributedDataParallel._check_comm_hook = _check_comm_hook
