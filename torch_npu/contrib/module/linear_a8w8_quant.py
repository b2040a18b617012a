"""LinearA8W8Quant: the earlier name of LinearQuant (deprecated, as upstream)."""

import warnings

from torch_npu.contrib.module.linear_quant import LinearQuant

__all__ = ["LinearA8W8Quant"]


class LinearA8W8Quant(LinearQuant):
    """LinearQuant under its earlier name; warns once constructed."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool = True, offset: bool = False,
                 pertoken_scale: bool = False, device=None, dtype=None, output_dtype=None) -> None:
        warnings.warn("torch_npu.contrib.module.LinearA8W8Quant is deprecated: use "
                      "torch_npu.contrib.module.LinearQuant", FutureWarning, stacklevel=2)
        super().__init__(in_features, out_features, bias=bias, offset=offset, pertoken_scale=pertoken_scale,
                         device=device, dtype=dtype, output_dtype=output_dtype)
