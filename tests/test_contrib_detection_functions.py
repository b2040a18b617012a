"""torch_npu.contrib's detection helpers at upstream's paths: box coders, responsible-anchor flags,
multi-class NMS, condition index_put and the fused attention-probability helper, each against a CPU
formula written here."""

import math

import pytest
import torch

import torch_npu
import torch_npu.contrib as contrib
from torch_npu.contrib.function import bbox_coder, nms

import custom_op_refs as ref

NPU = "npu"


def boxes(n, seed):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 50
    wh = torch.rand(n, 2, generator=g) * 20 + 1
    return torch.cat([xy, xy + wh], 1)


def test_encode_xyxy2xywh_and_decode_round_trip():
    anchors, gt = boxes(12, 0), boxes(12, 1)
    means, stds = [0.1, 0.0, -0.1, 0.05], [0.5, 0.5, 1.0, 1.0]
    deltas = contrib.npu_bbox_coder_encode_xyxy2xywh(anchors.to(NPU), gt.to(NPU), means, stds)
    # torch_npu's box ops measure widths as x2 - x1 + 1.
    torch.testing.assert_close(deltas.cpu(), ref.bbox_encode(anchors, gt, means, stds), rtol=1e-4, atol=1e-4)
    # Normalised coordinates are scaled back first: the same deltas.
    scaled = bbox_coder.npu_bbox_coder_encode_xyxy2xywh((anchors / 100).to(NPU), (gt / 100).to(NPU), means, stds,
                                                        is_normalized=True, normalized_scale=100.0)
    torch.testing.assert_close(scaled.cpu(), deltas.cpu(), rtol=1e-4, atol=1e-4)
    decoded = contrib.npu_bbox_coder_decode_xywh2xyxy(anchors.to(NPU), deltas, means, stds, max_shape=(1000, 1000))
    torch.testing.assert_close(decoded.cpu(), gt, rtol=1e-3, atol=1e-3)
    # A small max_shape clips the decoded boxes.
    clipped = contrib.npu_bbox_coder_decode_xywh2xyxy(anchors.to(NPU), deltas, means, stds, max_shape=(30, 20))
    assert clipped[:, 0::2].max().item() <= 20 and clipped[:, 1::2].max().item() <= 30
    with pytest.raises(ValueError, match="same number of boxes"):
        contrib.npu_bbox_coder_encode_xyxy2xywh(anchors.to(NPU), gt[:5].to(NPU))


def test_encode_yolo_matches_the_op_and_checks_stride():
    anchors, gt = boxes(6, 2), boxes(6, 3)
    stride = torch.tensor([8, 8, 16, 16, 32, 32], dtype=torch.int64)
    out = contrib.npu_bbox_coder_encode_yolo(anchors.to(NPU), gt.to(NPU), stride.to(NPU))
    direct = torch_npu.npu_yolo_boxes_encode(anchors.to(NPU), gt.to(NPU), stride.int().to(NPU))
    torch.testing.assert_close(out.cpu(), direct.cpu())
    # The centre deltas are the offsets in units of `stride`, shifted by half a cell.
    gx = (gt[:, 0] + gt[:, 2]) / 2
    ax = (anchors[:, 0] + anchors[:, 2]) / 2
    expected_x = (gx - ax) / stride + 0.5
    torch.testing.assert_close(out[:, 0].cpu(), expected_x, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="stride must be"):
        contrib.npu_bbox_coder_encode_yolo(anchors.to(NPU), gt.to(NPU), stride[:2].to(NPU))


def test_single_level_responsible_flags():
    gt = torch.tensor([[2.0, 2.0, 10.0, 10.0], [30.0, 14.0, 34.0, 18.0]])
    flags = contrib.npu_single_level_responsible_flags((4, 5), gt.to(NPU), (8, 8), 3)
    expected = torch.zeros(4, 5, 3, dtype=torch.uint8)
    for x1, y1, x2, y2 in gt.tolist():  # the cell holding each box centre
        expected[int((y1 + y2) / 2 // 8), int((x1 + x2) / 2 // 8)] = 1
    assert torch.equal(flags.cpu(), expected.reshape(-1))


def greedy_nms(bxs, scores, thr):
    """Indices kept by greedy NMS, best score first."""
    order, keep = scores.argsort(descending=True).tolist(), []
    for i in order:
        ok = True
        for j in keep:
            ix = (torch.min(bxs[i, 2:], bxs[j, 2:]) - torch.max(bxs[i, :2], bxs[j, :2])).clamp(min=0).prod()
            union = (bxs[i, 2:] - bxs[i, :2]).prod() + (bxs[j, 2:] - bxs[j, :2]).prod() - ix
            ok &= bool(ix / union <= thr)
        if ok:
            keep.append(i)
    return keep


def test_multiclass_nms_against_greedy_nms_per_class():
    n, classes = 20, 3
    bxs = boxes(n, 4).round()
    g = torch.Generator().manual_seed(5)
    scores = torch.rand(n, classes + 1, generator=g)
    dets, labels = contrib.npu_multiclass_nms(bxs.to(NPU), scores.to(NPU), score_thr=0.3, nms_thr=0.5, max_num=40)
    assert dets.shape == (40, 5) and labels.shape == (40,)
    expected = []
    for c in range(classes):
        s = scores[:, c].half().float()
        live = (s > 0.3).nonzero().flatten()
        for k in greedy_nms(bxs[live], s[live], 0.5):
            expected.append((s[live][k].item(), c))
    expected.sort(key=lambda t: -t[0])
    got = [(dets[i, 4].item(), int(labels[i].item())) for i in range(len(expected))]
    assert [c for _, c in got] == [c for _, c in expected]
    torch.testing.assert_close(torch.tensor([s for s, _ in got]), torch.tensor([s for s, _ in expected]),
                               rtol=1e-3, atol=1e-3)
    assert dets[len(expected):].abs().sum().item() == 0  # slots past the kept boxes are zero
    # The batched form on a batch of that image twice.
    bd, bl = nms.npu_batched_multiclass_nms(bxs.expand(2, n, 4).to(NPU), scores.expand(2, n, classes + 1).to(NPU),
                                            0.3, 0.5, 40)
    assert torch.equal(bd[0].cpu(), dets.cpu()) and torch.equal(bd[1].cpu(), dets.cpu())
    assert torch.equal(bl[1].cpu(), labels.cpu())


def test_fast_condition_index_put():
    x = torch.randn(5, 6)
    cond = x > 0.3
    out = contrib.npu_fast_condition_index_put(x.to(NPU), cond.to(NPU), -2.5)
    ref = x.clone()
    ref[cond] = -2.5
    torch.testing.assert_close(out.cpu(), ref)
    with pytest.raises(TypeError, match="bool tensor"):
        contrib.npu_fast_condition_index_put(x.to(NPU), cond.int().to(NPU), 0)


def test_fuse_add_softmax_dropout():
    g = torch.Generator().manual_seed(6)
    scores, mask = torch.randn(2, 4, 8, 8, generator=g), torch.randn(2, 1, 8, 8, generator=g)
    drop = torch.nn.Dropout(0.3)
    ref = torch.softmax(mask + scores / math.sqrt(16), dim=-1)
    probs = contrib.fuse_add_softmax_dropout(False, drop, mask.to(NPU), scores.to(NPU), 16)
    torch.testing.assert_close(probs.cpu(), ref, rtol=1e-5, atol=1e-6)
    dropped = contrib.fuse_add_softmax_dropout(True, drop, mask.to(NPU), scores.to(NPU), 16).cpu()
    kept = dropped != 0
    torch.testing.assert_close(dropped[kept], ref[kept] / 0.7, rtol=1e-5, atol=1e-6)
    assert 0.5 < kept.float().mean().item() < 0.9


def test_contrib_reexports_functions_and_modules():
    assert contrib.roll is contrib.function.roll and contrib.ChannelShuffle is contrib.module.ChannelShuffle
    assert {"npu_multiclass_nms", "Focus", "ROIAlign", "matmul_transpose"} <= set(contrib.__all__)
