"""RoIAlign (Mask R-CNN) as torch_npu's affinity module: average of bilinear samples per output bin, written
with gathers so it runs on the device and differentiates through autograd."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.modules.utils import _pair

__all__ = ["ROIAlign", "roi_align"]


def _axis(start, length, pooled, samples, size):
    """Sample coordinates along one axis: (pooled * samples,) positions, their two neighbours, weights, mask."""
    step = length / pooled
    grid = torch.arange(pooled * samples, device=start.device, dtype=start.dtype)
    pos = start + step * (torch.div(grid, samples, rounding_mode="floor") + (grid % samples + 0.5) / samples)
    valid = (pos >= -1.0) & (pos <= size)
    pos = pos.clamp(min=0)
    low = pos.floor().clamp(max=size - 1)
    at_edge = low >= size - 1
    pos = torch.where(at_edge, low, pos)
    high = torch.where(at_edge, low, low + 1)
    frac = pos - low
    return low.long(), high.long(), 1 - frac, frac, valid


def _one_roi(feature, box, output_size, spatial_scale, sampling_ratio, aligned):
    """feature (C, H, W), box (4,) xyxy in input coordinates -> (C, ph, pw)."""
    c, h, w = feature.shape
    ph, pw = output_size
    offset = 0.5 if aligned else 0.0
    x1, y1, x2, y2 = (box * spatial_scale - offset).unbind()
    roi_w, roi_h = x2 - x1, y2 - y1
    if not aligned:  # the legacy form forces a roi of at least one pixel
        roi_w, roi_h = roi_w.clamp(min=1.0), roi_h.clamp(min=1.0)
    gh = sampling_ratio if sampling_ratio > 0 else max(1, math.ceil(float(roi_h) / ph))
    gw = sampling_ratio if sampling_ratio > 0 else max(1, math.ceil(float(roi_w) / pw))
    ylo, yhi, wy_lo, wy_hi, vy = _axis(y1, roi_h, ph, gh, h)
    xlo, xhi, wx_lo, wx_hi, vx = _axis(x1, roi_w, pw, gw, w)
    rows = lambda idx: feature.index_select(1, idx)  # noqa: E731  (C, Y, W)
    top, bottom = rows(ylo), rows(yhi)
    val = (wy_lo[:, None] * (top.index_select(2, xlo) * wx_lo + top.index_select(2, xhi) * wx_hi) +
           wy_hi[:, None] * (bottom.index_select(2, xlo) * wx_lo + bottom.index_select(2, xhi) * wx_hi))
    val = val * (vy[:, None] & vx[None, :]).to(val.dtype)  # (C, ph * gh, pw * gw)
    return val.view(c, ph, gh, pw, gw).mean(dim=(2, 4))


def roi_align(input, rois, output_size, spatial_scale=1.0, sampling_ratio=0, aligned=True):
    """input (N, C, H, W); rois (K, 5): batch index, x1, y1, x2, y2 -> (K, C, ph, pw)."""
    if input.dim() != 4:
        raise ValueError(f"input must be (N, C, H, W), got {tuple(input.shape)}")
    if rois.dim() != 2 or rois.size(1) != 5:
        raise ValueError(f"rois must be (K, 5) [batch index, x1, y1, x2, y2], got {tuple(rois.shape)}")
    output_size = _pair(output_size)
    rois = rois.to(input.dtype)
    batch = rois[:, 0].long().tolist()
    outs = [_one_roi(input[b], rois[k, 1:], output_size, spatial_scale, sampling_ratio, aligned)
            for k, b in enumerate(batch)]
    if not outs:
        return input.new_zeros((0, input.shape[1], *output_size))
    return torch.stack(outs)


class ROIAlign(nn.Module):
    """ROIAlign(output_size, spatial_scale, sampling_ratio, aligned=True) (detectron2's module and defaults).

    aligned=True shifts the boxes by half a pixel so that sampling matches the pixel model (detectron2's
    ROIAlignV2); aligned=False is the legacy Detectron form. sampling_ratio <= 0 takes ceil(roi / bin)
    samples per bin side.
    """

    def __init__(self, output_size, spatial_scale, sampling_ratio, aligned=True):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input_tensor, rois):
        return roi_align(input_tensor.float(), rois, self.output_size, self.spatial_scale, self.sampling_ratio,
                         self.aligned)

    def extra_repr(self):
        return (f"output_size={self.output_size}, spatial_scale={self.spatial_scale}, "
                f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned}")
