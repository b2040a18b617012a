"""LinearWeightQuant: a linear layer with int8 (or int4) weights dequantised on the fly by
torch_npu.npu_weight_quant_batchmatmul (W8A16 / W4A16 inference), optionally requantising its output
to int8."""

import torch
from torch import Tensor
from torch.nn import Module, Parameter

import torch_npu

__all__ = ["LinearWeightQuant"]


class LinearWeightQuant(Module):
    """y = x @ ((weight + antiquant_offset) * antiquant_scale).T + bias, with weight (out_features,
    in_features) int8 as a checkpoint stores it. Parameters are created empty (load them with
    load_state_dict or assign them); antiquant_scale / antiquant_offset are (out_features,) per channel,
    or (out_features, groups) with antiquant_group_size. With quant_scale (and quant_offset) the output
    is requantised to int8. inner_precise and weight_dtype are passed through to the op."""

    def __init__(self, in_features, out_features, bias: bool = True, device=None, dtype=None,
                 antiquant_offset: bool = False, quant_scale: bool = False, quant_offset: bool = False,
                 antiquant_group_size: int = 0, inner_precise: int = 0, weight_dtype=None) -> None:
        super().__init__()
        self.weight = Parameter(torch.empty((out_features, in_features), device=device), False)
        self.antiquant_scale = Parameter(torch.empty(out_features, device=device), False)
        self.antiquant_offset = Parameter(torch.empty(out_features, device=device), False) if antiquant_offset \
            else None
        self.quant_scale = Parameter(torch.empty(out_features, device=device), False) if quant_scale else None
        self.quant_offset = Parameter(torch.empty(out_features, device=device), False) if quant_offset else None
        self.bias = Parameter(torch.empty(out_features, device=device), False) if bias else None
        self.antiquant_group_size = antiquant_group_size
        self.inner_precise = inner_precise
        self.weight_dtype = weight_dtype

    def forward(self, x: Tensor) -> Tensor:
        antiquant_scale, antiquant_offset = self.antiquant_scale, self.antiquant_offset
        if antiquant_scale.dim() == 2:  # (out_features, groups) -> the op's (groups, N)
            antiquant_scale = antiquant_scale.transpose(-1, -2)
        if antiquant_offset is not None and antiquant_offset.dim() == 2:
            antiquant_offset = antiquant_offset.transpose(-1, -2)
        return torch_npu.npu_weight_quant_batchmatmul(x, self.weight.transpose(-1, -2), antiquant_scale,
                                                      antiquant_offset, self.quant_scale, self.quant_offset,
                                                      self.bias, self.antiquant_group_size, self.inner_precise,
                                                      weight_dtype=self.weight_dtype)
