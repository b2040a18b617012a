"""DTensor sharding rules for torch_npu's custom ops: elementwise ops keep any sharding,
normalisations may be sharded on every dimension but the normalised ones, rotary embedding on every
dimension its cos / sin tables broadcast over or share, and npu_transpose follows permute."""

import torch
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor._ops._view_ops import register_op_strategy_map
from torch.distributed.tensor.experimental import register_sharding

_npu = torch.ops.npu


def _elementwise(x, *tensors):
    """Same-shape elementwise ops: any dim sharded alike in every tensor, or all replicated."""
    n = 1 + sum(1 for t in tensors if hasattr(t, "shape"))
    acceptable = [([Replicate()], [Replicate()] * n)]
    acceptable += [([Shard(dim)], [Shard(dim)] * n) for dim in range(x.ndim)]
    return acceptable


register_sharding(_npu.npu_fast_gelu.default)(lambda x: _elementwise(x))
register_sharding(_npu.npu_fast_gelu_backward.default)(lambda grad, x: _elementwise(grad, x))
register_sharding(_npu.npu_dtype_cast.default)(lambda x, dtype, input_dtype=None: _elementwise(x))
register_op_strategy_map(_npu.npu_transpose.default, torch.permute)


@register_sharding(_npu.npu_rms_norm.default)
def _rms_norm(x, gamma, epsilon=1e-6):
    # Outputs: y (x's shape) and rstd (x's shape with the normalised dims kept as 1).
    acceptable = [([Replicate(), Replicate()], [Replicate(), Replicate()])]
    for dim in range(x.ndim - gamma.ndim):
        acceptable.append(([Shard(dim), Shard(dim)], [Shard(dim), Replicate()]))
    return acceptable


@register_sharding(_npu.npu_rms_norm_backward.default)
def _rms_norm_backward(dy, x, gamma, rstd):
    # Outputs: dx (sharded like x) and dgamma, a sum over every non-normalised dim: partial per shard.
    acceptable = [([Replicate(), Replicate()], [Replicate(), Replicate(), Replicate(), Replicate()])]
    for dim in range(x.ndim - gamma.ndim):
        acceptable.append(([Shard(dim), Partial()], [Shard(dim), Shard(dim), Replicate(), Shard(dim)]))
    return acceptable


def _rotary_rules(x, r1, outputs):
    acceptable = [([Replicate()] * outputs, [Replicate(), Replicate(), Replicate()])]
    for dim in range(x.ndim - 1):  # the rotated (last) dim pairs halves: never split
        table = Replicate() if r1.shape[dim] == 1 and x.shape[dim] != 1 else Shard(dim)
        acceptable.append(([Shard(dim)] * outputs, [Shard(dim), table, table]))
    return acceptable


@register_sharding(_npu.npu_rotary_mul.default)
def _rotary_mul(x, r1, r2, rotary_mode="half"):
    return _rotary_rules(x, r1, 1)
