"""The CUDA build of the kernels: on CUDA tensors it would launch nvcc-built kernels (absent here)."""
import torch.nn.functional as F

STEPS = []


def fused_bias_gelu_cuda(x, bias):
    if x.device.type != "cpu":
        raise RuntimeError(f"mylib.cuda_kernels needs its CUDA build for {x.device} tensors")
    return F.gelu(x + bias)


def record_step(loss):
    STEPS.append(loss)
