"""torch_npu.distributed.tensor: DTensor sharding rules for torch_npu's custom ops, so that
torch_npu.npu_rms_norm, npu_rotary_mul, npu_fast_gelu, npu_dtype_cast and npu_transpose take DTensors
(tensor / sequence parallel models) and keep their placements. Importing torch_npu registers them."""

from torch_npu.distributed.tensor import _npu_op_strategies  # noqa: F401  (registers the rules)
from torch_npu.distributed.tensor import experimental  # noqa: F401

__all__ = []
