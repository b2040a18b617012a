"""What the script converter knows about CUDA APIs: which have an npu counterpart (looked up in the installed
torch.npu), which need the user's hand, and which ATen ops a Python call reaches (for the op verdicts)."""

from __future__ import annotations

import functools

# apex -> torch_npu (seed 003: `from apex import amp` becomes `from torch_npu.contrib import amp`).
APEX_MODULES = {"apex.amp": "torch_npu.contrib.amp"}
APEX_OPTIMIZERS = {  # apex's FusedAdam defaults to adam_w_mode=True, i.e. AdamW
    "apex.optimizers.FusedSGD": "torch_npu.optim.NpuFusedSGD",
    "apex.optimizers.FusedAdam": "torch_npu.optim.NpuFusedAdamW",
    "apex.optimizers.FusedLAMB": "torch_npu.optim.NpuFusedLamb",
}

# Prefix of a qualified name -> what the user has to do (nothing is rewritten).
MANUAL = {
    "torch.nn.DataParallel": "DataParallel is not supported on npu: use DistributedDataParallel (convert with "
                             "`distributed -m ENTRY -t MODEL`)",
    "torch.nn.parallel.DataParallel": "DataParallel is not supported on npu: use DistributedDataParallel (convert "
                                      "with `distributed -m ENTRY -t MODEL`)",
    "torch.backends.cudnn": "cuDNN flags have no effect on npu (harmless; remove them to keep the script honest)",
    "torch.backends.cuda": "CUDA backend flags (TF32, SDPA kernels) have no effect on npu",
    "torch.utils.cpp_extension.CUDAExtension": "CUDA extension: port its kernels to npu ops "
                                               "(docs/op_development.md) and build with CppExtension",
    "torch.utils.cpp_extension.load": "JIT-built extension: CUDA sources (.cu) need npu kernels "
                                      "(docs/op_development.md)",
    "torch.cuda.nvtx": "NVTX ranges have no npu counterpart: use torch.profiler.record_function",
    "torch.cuda.CUDAGraph": "CUDA graphs have no npu counterpart: use torch.compile",
    "torch.cuda.graph": "CUDA graphs have no npu counterpart: use torch.compile",
    "torch.cuda.make_graphed_callables": "CUDA graphs have no npu counterpart: use torch.compile",
    "torch.cuda.get_device_capability": "CUDA compute capability has no npu meaning: branch on "
                                        "torch.npu.is_bf16_supported() or drop the check",
    "torch.cuda.comm": "torch.cuda.comm has no npu counterpart: use torch.distributed collectives",
    "torch.cuda.jiterator": "jiterator kernels have no npu counterpart: write the op with torch ops",
    "apex.parallel": "apex.parallel: use torch.nn.parallel.DistributedDataParallel and nn.SyncBatchNorm",
    "apex.normalization": "apex.normalization: use torch.nn.LayerNorm / torch_npu.npu_rms_norm",
    "apex.contrib": "apex.contrib has no npu counterpart",
    "cupy": "CuPy runs CUDA kernels only: rewrite with torch ops on npu",
    "pycuda": "PyCUDA runs CUDA kernels only: rewrite with torch ops on npu",
    "triton": "Triton kernels target GPUs: rewrite with torch ops (or torch.compile) on npu",
}

# Environment variables and strings that only CUDA reads.
MANUAL_STRINGS = {
    "CUDA_VISIBLE_DEVICES": "CUDA_VISIBLE_DEVICES does not select npus: the software NPU has NPU_SIM_DEVICES "
                            "devices; pick one with torch.npu.set_device or the -s flag (DEVICE_ID)",
    "CUDA_LAUNCH_BLOCKING": "CUDA_LAUNCH_BLOCKING has no effect: use ASCEND_LAUNCH_BLOCKING=1",
}


@functools.lru_cache(maxsize=None)
def npu_counterpart(qualified: str) -> str | None:
    """torch.cuda.X[.Y] -> torch.npu.X[.Y] when the installed torch.npu has it, else None."""
    if not qualified.startswith("torch.cuda."):
        return None
    import torch

    obj = torch.npu
    for part in qualified[len("torch.cuda."):].split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return "torch.npu." + qualified[len("torch.cuda."):]


def manual_note(qualified: str) -> str | None:
    for prefix, note in MANUAL.items():
        if qualified == prefix or qualified.startswith(prefix + "."):
            return note
    return None


# Python APIs whose ATen ops have other names (the rest map by name: torch.index_add -> aten::index_add).
_CONV = ["convolution", "convolution_backward"]
_CE = ["_log_softmax", "nll_loss_forward", "nll_loss_backward", "_log_softmax_backward_data"]
MODULE_OPS = {
    **{f"torch.nn.Conv{d}d": _CONV for d in (1, 2, 3)},
    **{f"torch.nn.ConvTranspose{d}d": _CONV for d in (1, 2, 3)},
    "torch.nn.Linear": ["addmm", "mm"],
    **{f"torch.nn.BatchNorm{d}d": ["native_batch_norm", "native_batch_norm_backward"] for d in (1, 2, 3)},
    "torch.nn.SyncBatchNorm": ["native_batch_norm", "native_batch_norm_backward"],
    "torch.nn.LayerNorm": ["native_layer_norm", "native_layer_norm_backward"],
    "torch.nn.GroupNorm": ["native_group_norm", "native_group_norm_backward"],
    "torch.nn.ReLU": ["relu", "threshold_backward"],
    "torch.nn.ReLU6": ["hardtanh", "hardtanh_backward"],
    "torch.nn.GELU": ["gelu", "gelu_backward"],
    "torch.nn.SiLU": ["silu", "silu_backward"],
    "torch.nn.Sigmoid": ["sigmoid", "sigmoid_backward"],
    "torch.nn.Tanh": ["tanh", "tanh_backward"],
    "torch.nn.LeakyReLU": ["leaky_relu", "leaky_relu_backward"],
    "torch.nn.ELU": ["elu", "elu_backward"],
    "torch.nn.Hardswish": ["hardswish", "hardswish_backward"],
    "torch.nn.Hardsigmoid": ["hardsigmoid", "hardsigmoid_backward"],
    "torch.nn.Mish": ["mish", "mish_backward"],
    "torch.nn.Softplus": ["softplus", "softplus_backward"],
    "torch.nn.Softmax": ["_softmax", "_softmax_backward_data"],
    "torch.nn.LogSoftmax": ["_log_softmax", "_log_softmax_backward_data"],
    **{f"torch.nn.MaxPool{d}d": [f"max_pool{max(d, 2)}d_with_indices",
                                 f"max_pool{max(d, 2)}d_with_indices_backward"] for d in (1, 2, 3)},
    "torch.nn.AvgPool2d": ["avg_pool2d", "avg_pool2d_backward"],
    "torch.nn.AvgPool3d": ["avg_pool3d", "avg_pool3d_backward"],
    "torch.nn.AdaptiveAvgPool2d": ["_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward"],
    "torch.nn.AdaptiveMaxPool2d": ["adaptive_max_pool2d", "adaptive_max_pool2d_backward"],
    "torch.nn.Dropout": ["native_dropout", "native_dropout_backward"],
    "torch.nn.Embedding": ["embedding", "embedding_dense_backward"],
    "torch.nn.EmbeddingBag": ["_embedding_bag"],
    "torch.nn.CrossEntropyLoss": _CE,
    "torch.nn.NLLLoss": ["nll_loss_forward", "nll_loss_backward"],
    "torch.nn.MSELoss": ["mse_loss", "mse_loss_backward"],
    "torch.nn.SmoothL1Loss": ["smooth_l1_loss", "smooth_l1_loss_backward"],
    "torch.nn.HuberLoss": ["huber_loss", "huber_loss_backward"],
    "torch.nn.BCELoss": ["binary_cross_entropy", "binary_cross_entropy_backward"],
    "torch.nn.BCEWithLogitsLoss": ["binary_cross_entropy_with_logits"],
    "torch.nn.Upsample": ["upsample_nearest2d", "upsample_nearest2d_backward"],
    "torch.nn.UpsamplingBilinear2d": ["upsample_bilinear2d", "upsample_bilinear2d_backward"],
    "torch.nn.PixelShuffle": ["pixel_shuffle"],
    "torch.nn.ReflectionPad2d": ["reflection_pad2d", "reflection_pad2d_backward"],
    "torch.nn.ReplicationPad2d": ["replication_pad2d", "replication_pad2d_backward"],
}
_F = "torch.nn.functional."
FUNCTION_OPS = {
    **{f"{_F}conv{d}d": _CONV for d in (1, 2, 3)},
    **{f"{_F}conv_transpose{d}d": _CONV for d in (1, 2, 3)},
    f"{_F}linear": ["addmm", "mm"],
    f"{_F}batch_norm": ["native_batch_norm", "native_batch_norm_backward"],
    f"{_F}layer_norm": ["native_layer_norm", "native_layer_norm_backward"],
    f"{_F}group_norm": ["native_group_norm", "native_group_norm_backward"],
    f"{_F}softmax": ["_softmax", "_softmax_backward_data"],
    f"{_F}log_softmax": ["_log_softmax", "_log_softmax_backward_data"],
    f"{_F}cross_entropy": _CE,
    f"{_F}nll_loss": ["nll_loss_forward", "nll_loss_backward"],
    f"{_F}dropout": ["native_dropout", "native_dropout_backward"],
    f"{_F}max_pool2d": ["max_pool2d_with_indices", "max_pool2d_with_indices_backward"],
    f"{_F}adaptive_avg_pool2d": ["_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward"],
    f"{_F}interpolate": ["upsample_nearest2d", "upsample_bilinear2d"],
    f"{_F}grid_sample": ["grid_sampler_2d", "grid_sampler_2d_backward"],
    f"{_F}one_hot": ["one_hot"],
    f"{_F}pad": ["constant_pad_nd"],
    "torch.matmul": ["mm", "bmm"],
    "torch.einsum": ["bmm"],
}
# Namespaces whose functions are ATen ops of a derived name (torch.linalg.norm -> aten::linalg_norm).
NAMESPACE_PREFIX = {"torch.": "", _F: "", "torch.special.": "special_", "torch.linalg.": "linalg_",
                    "torch.fft.": "fft_"}

# Method names too common on Python objects to be read as tensor methods.
NOT_TENSOR_METHODS = frozenset({
    "add", "append", "clear", "copy", "count", "extend", "format", "get", "index", "insert", "items", "join",
    "keys", "pop", "remove", "replace", "reverse", "sort", "split", "strip", "update", "values", "write", "read",
    "close", "open", "item", "step", "zero_grad", "state_dict", "load_state_dict", "train", "eval", "forward",
    "backward", "parameters", "to", "cuda", "npu", "cpu", "size", "numel", "dim", "tolist", "numpy",
    "startswith", "endswith", "lower", "upper", "encode", "decode", "find", "set", "register_buffer",
})


def aten_ops_for(qualified: str) -> list[str]:
    """ATen ops a call of `qualified` (torch.nn.Conv2d, torch.nn.functional.grid_sample, torch.index_add)
    reaches, best effort; [] for anything else."""
    if qualified in MODULE_OPS:
        return MODULE_OPS[qualified]
    if qualified in FUNCTION_OPS:
        return FUNCTION_OPS[qualified]
    for prefix, aten_prefix in sorted(NAMESPACE_PREFIX.items(), key=lambda kv: -len(kv[0])):
        if qualified.startswith(prefix):
            rest = qualified[len(prefix):]
            if rest and "." not in rest and not rest[0].isupper():
                return [aten_prefix + rest]
            return []
    return []
