"""Cross entropy against label-smoothed one-hot targets (torch_npu's LabelSmoothingCrossEntropy)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["LabelSmoothingCrossEntropy"]


class LabelSmoothingCrossEntropy(nn.Module):
    """Mean over the batch of -sum(q * log_softmax(pred)), q the one-hot target with 1 - smooth_factor on the
    true class and smooth_factor / (num_classes - 1) on every other one (Szegedy et al., Inception v3).

    Args:
        num_classes: number of classes (pred's second dim).
        smooth_factor: the probability mass moved off the true class, in [0, 1]; 0.1 is usual.

    Unlike nn.CrossEntropyLoss(label_smoothing=s) (which spreads s over all classes, the true one included),
    the mass goes to the other classes only, as torch_npu computes it. The loss is float32.
    """

    def __init__(self, num_classes=1000, smooth_factor=0.):
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}")
        if not 0.0 <= smooth_factor <= 1.0:
            raise ValueError(f"smooth_factor must be in [0, 1], got {smooth_factor}")
        self.num_classes = num_classes
        self.on_value = 1.0 - smooth_factor
        self.off_value = smooth_factor / (num_classes - 1)

    def forward(self, pred, target):
        if pred.dim() != 2 or pred.size(1) != self.num_classes:
            raise ValueError(f"pred must be (N, {self.num_classes}), got {tuple(pred.shape)}")
        log_prob = torch.log_softmax(pred.float(), dim=1)
        smoothed = torch.full_like(log_prob, self.off_value)
        smoothed.scatter_(1, target.long().unsqueeze(1), self.on_value)
        return -(smoothed * log_prob).sum(1).mean()
