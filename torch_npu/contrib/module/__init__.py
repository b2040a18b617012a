"""torch_npu.contrib.module: device-friendly modules for layers common in public models (seed 003's affinity
library), each equal to its plain-PyTorch original."""

from torch_npu.contrib.module.activations import Mish, SiLU, Swish
from torch_npu.contrib.module.bidirectional_lstm import BiLSTM  # noqa: F401  (deprecated, not in __all__)
from torch_npu.contrib.module.channel_shuffle import ChannelShuffle
from torch_npu.contrib.module.crossentropy import LabelSmoothingCrossEntropy
from torch_npu.contrib.module.drop_path import NpuDropPath
from torch_npu.contrib.module.dropout import DropoutWithByteMask
from torch_npu.contrib.module.ensemble_dropout import NpuCachedDropout, NpuFairseqDropout
from torch_npu.contrib.module.focus import Focus
from torch_npu.contrib.module.linear_a8w8_quant import LinearA8W8Quant
from torch_npu.contrib.module.linear_quant import LinearQuant
from torch_npu.contrib.module.linear_weight_quant import LinearWeightQuant
from torch_npu.contrib.module.prefetcher import PreLoader, Prefetcher
from torch_npu.contrib.module.roi_align import ROIAlign

__all__ = [
    "ChannelShuffle",
    "Prefetcher",
    "PreLoader",
    "LabelSmoothingCrossEntropy",
    "ROIAlign",
    "Mish",
    "SiLU",
    "Swish",
    "Focus",
    "DropoutWithByteMask",
    "NpuDropPath",
    "NpuCachedDropout",
    "NpuFairseqDropout",
    "LinearA8W8Quant",
    "LinearQuant",
    "LinearWeightQuant",
]
