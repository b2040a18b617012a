"""LinearQuant: an int8 x int8 linear layer for quantized inference on torch_npu.npu_quant_matmul (int32
accumulation, dequantised by per-channel scales and optional per-token scales)."""

import torch
from torch import Tensor
from torch.nn import Module, Parameter

import torch_npu

__all__ = ["LinearQuant"]


class LinearQuant(Module):
    """out = (x @ weight.T + bias) * scale [+ offset] for int8 x (..., in_features) and int8 weight
    (out_features, in_features) (or both int32 carrying int4). Parameters are created empty: assign or
    load them. A float32 scale without pertoken_scale is packed with npu_trans_quant_param (FP19, as the
    device takes it) unless the output is bfloat16 or int32; output_dtype None means int8."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool = True, offset: bool = False,
                 pertoken_scale: bool = False, device=None, dtype=None, output_dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.empty((out_features, in_features), device=device), False)
        self.scale = Parameter(torch.empty(out_features, device=device), False)
        self.output_dtype = output_dtype
        self.offset = Parameter(torch.empty(out_features, dtype=torch.float32, device=device), False) if offset \
            else None
        self.pertoken_scale = Parameter(torch.empty(out_features, dtype=torch.float32, device=device), False) \
            if pertoken_scale else None
        self.bias = Parameter(torch.empty(out_features, dtype=torch.int32, device=device), False) if bias else None

    def forward(self, linear_quant_input: Tensor) -> Tensor:
        same = linear_quant_input.dtype == self.weight.dtype
        if not (same and linear_quant_input.dtype in (torch.int8, torch.int32)):
            raise ValueError("LinearQuant: the input and weight must both be torch.int8 (or both torch.int32 "
                             f"carrying int4), got {linear_quant_input.dtype} and {self.weight.dtype}")
        scale = self.scale
        if self.pertoken_scale is None and scale.dtype == torch.float32 and \
                self.output_dtype not in (torch.bfloat16, torch.int32):
            scale = torch_npu.npu_trans_quant_param(scale, self.offset)
        return torch_npu.npu_quant_matmul(linear_quant_input, self.weight.transpose(-2, -1), scale,
                                          offset=self.offset, pertoken_scale=self.pertoken_scale, bias=self.bias,
                                          output_dtype=self.output_dtype)
