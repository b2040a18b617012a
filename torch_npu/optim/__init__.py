"""torch_npu.optim: fused optimizers that update combined parameter/gradient buffers with single ops."""

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase
from torch_npu.optim.npu_fused_adadelta import NpuFusedAdadelta
from torch_npu.optim.npu_fused_adam import NpuFusedAdam
from torch_npu.optim.npu_fused_adamw import NpuFusedAdamW
from torch_npu.optim.npu_fused_adamp import NpuFusedAdamP
from torch_npu.optim.npu_fused_bert_adam import NpuFusedBertAdam
from torch_npu.optim.npu_fused_lamb import NpuFusedLamb
from torch_npu.optim.npu_fused_rmsprop import NpuFusedRMSprop
from torch_npu.optim.npu_fused_rmsprop_tf import NpuFusedRMSpropTF
from torch_npu.optim.npu_fused_sgd import NpuFusedSGD

__all__ = ["NpuFusedOptimizerBase", "NpuFusedSGD", "NpuFusedAdam", "NpuFusedAdamW", "NpuFusedAdamP", "NpuFusedBertAdam",
           "NpuFusedLamb", "NpuFusedAdadelta", "NpuFusedRMSprop", "NpuFusedRMSpropTF"]
