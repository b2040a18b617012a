"""The npu build of the kernels."""
import torch.nn.functional as F

STEPS = []


def fused_bias_gelu(x, bias):
    return F.gelu(x + bias)


def record_step(loss):
    STEPS.append(loss)
