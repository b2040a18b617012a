"""Rotated boxes on their device ops: npu_rotated_box_encode / _decode (corner boxes [B, 5, N] with angles in
degrees) and npu_rotated_iou / npu_rotated_overlaps (boxes [B, N, 5], xywht or xyxyt), against CPU references
written from the documented geometry (the IoU reference builds the intersection polygon from contained corners
and edge crossings, independently of the device op's clipping); Meta shapes, device ops and errors."""

import pytest
import torch

import torch_npu
from op_refs import misc_ops as ref

TOL = {torch.float32: (1e-4, 1e-4), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)}


def check(actual, expected, dtype=torch.float32, atol=None):
    rtol, default_atol = TOL[dtype]
    torch.testing.assert_close(actual.detach().cpu().double(), expected.detach().cpu().double(), rtol=rtol,
                               atol=default_atol if atol is None else atol)


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def assert_launches(name, fn):
    before = device_op_count(name)
    fn()
    torch.npu.synchronize()
    assert device_op_count(name) == before + 1, name


def corner_boxes(b, n, g):
    """[B, 5, N] corner boxes: x0 < x1, y0 < y1 (a few thinner than 1 to exercise the floor), angles in degrees."""
    x0, y0 = torch.rand(b, n, generator=g) * 50, torch.rand(b, n, generator=g) * 50
    w, h = torch.rand(b, n, generator=g) * 40 + 0.5, torch.rand(b, n, generator=g) * 40 + 0.5
    angle = torch.rand(b, n, generator=g) * 170 - 85
    return torch.stack([x0, y0, x0 + w, y0 + h, angle], 1)


def xywht_boxes(b, n, g, low=20, high=60):
    """[B, N, 5] boxes (cx, cy, w, h, degrees) as torch_npu's tests draw them: integer sides, angles in [-180, 180)."""
    centre = torch.rand(b, n, 2, generator=g) * (high - low) + low
    sides = torch.randint(1, 20, (b, n, 2), generator=g).float()
    angle = torch.randint(-180, 180, (b, n, 1), generator=g).float()
    return torch.cat([centre, sides, angle], -1)


# --- encode / decode ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rotated_box_encode_decode(dtype):
    g = torch.Generator().manual_seed(0)
    anchors, gts = corner_boxes(2, 7, g).to(dtype), corner_boxes(2, 7, g).to(dtype)
    for weight in (torch.ones(5), torch.tensor([10.0, 10.0, 5.0, 5.0, 1.0])):
        deltas = torch_npu.npu_rotated_box_encode(anchors.npu(), gts.npu(), weight.to(dtype).npu())
        assert deltas.shape == anchors.shape and deltas.dtype == dtype
        check(deltas, ref.rotated_box_encode(anchors, gts, weight.to(dtype)), dtype)
        boxes = torch_npu.npu_rotated_box_decode(anchors.npu(), deltas, weight.to(dtype).npu())
        check(boxes, ref.rotated_box_decode(anchors, deltas.cpu(), weight.to(dtype)), dtype, atol=2e-2)


def test_rotated_box_decode_inverts_encode():
    # For boxes at least 1 wide whose angles stay in (-90, 90), decoding the encoding gives the boxes back.
    g = torch.Generator().manual_seed(1)
    anchors, gts = corner_boxes(1, 20, g), corner_boxes(1, 20, g)
    gts[:, 2:4] = torch.maximum(gts[:, 2:4], gts[:, 0:2] + 1)
    weight = torch.tensor([2.0, 2.0, 1.0, 1.0, 0.5]).npu()
    deltas = torch_npu.npu_rotated_box_encode(anchors.npu(), gts.npu(), weight)
    check(torch_npu.npu_rotated_box_decode(anchors.npu(), deltas, weight), gts, atol=1e-3)


def test_rotated_box_meta_device_ops_and_errors():
    m = torch.empty(2, 5, 9, device="meta")
    assert torch.ops.npu.npu_rotated_box_encode(m, m, torch.empty(5, device="meta")).shape == (2, 5, 9)
    assert torch.ops.npu.npu_rotated_box_decode(m, m, torch.empty(5, device="meta")).shape == (2, 5, 9)
    boxes, w = corner_boxes(1, 3, torch.Generator().manual_seed(2)).npu(), torch.ones(5).npu()
    assert_launches("aclnnRotatedBoxEncode", lambda: torch_npu.npu_rotated_box_encode(boxes, boxes, w))
    assert_launches("aclnnRotatedBoxDecode", lambda: torch_npu.npu_rotated_box_decode(boxes, boxes, w))
    with pytest.raises(ValueError, match=r"\[B, 5, N\]"):
        torch_npu.npu_rotated_box_encode(boxes.transpose(1, 2), boxes.transpose(1, 2), w)
    with pytest.raises(ValueError, match="5 values"):
        torch_npu.npu_rotated_box_decode(boxes, boxes, torch.ones(4).npu())
    with pytest.raises(TypeError, match="self's dtype"):
        torch_npu.npu_rotated_box_encode(boxes, boxes.half(), w)


# --- IoU / overlaps ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("trans", [False, True])
def test_rotated_overlaps(dtype, trans):
    g = torch.Generator().manual_seed(3)
    boxes, query = xywht_boxes(2, 5, g, 30, 45).to(dtype), xywht_boxes(2, 4, g, 30, 45).to(dtype)
    if trans:  # the same rectangles as (x1, y1, x2, y2, angle)
        boxes = torch.cat([boxes[..., :2] - boxes[..., 2:4] / 2, boxes[..., :2] + boxes[..., 2:4] / 2,
                           boxes[..., 4:]], -1)
        query = torch.cat([query[..., :2] - query[..., 2:4] / 2, query[..., :2] + query[..., 2:4] / 2,
                           query[..., 4:]], -1)
    out = torch_npu.npu_rotated_overlaps(boxes.npu(), query.npu(), trans)
    expect = ref.rotated_overlaps(boxes, query, trans)
    assert out.shape == (2, 5, 4) and out.dtype == dtype
    assert torch.count_nonzero(expect) > 0  # the draw overlaps somewhere
    check(out, expect, dtype, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rotated_iou_modes(dtype):
    g = torch.Generator().manual_seed(4)
    boxes, query = xywht_boxes(3, 4, g, 25, 40).to(dtype), xywht_boxes(3, 6, g, 25, 40).to(dtype)
    for mode in (0, 1):
        out = torch_npu.npu_rotated_iou(boxes.npu(), query.npu(), False, mode, True, 0.0, 0.0)
        expect = ref.rotated_iou(boxes, query, mode=mode)
        assert out.shape == (3, 4, 6) and out.dtype == dtype
        assert torch.count_nonzero(expect) > 0
        check(out, expect, dtype, atol=1e-3)
    # One to one: box n with query box n.
    same = query[:, :4]
    out = torch_npu.npu_rotated_iou(boxes.npu(), same.npu(), is_cross=False)
    assert out.shape == (3, 4)
    check(out, ref.rotated_iou(boxes, same, is_cross=False), dtype, atol=1e-3)


def test_rotated_iou_identical_nested_and_degenerate_boxes():
    box = torch.tensor([[[10.0, 10.0, 4.0, 2.0, 30.0]]])
    inner = torch.tensor([[[10.0, 10.0, 2.0, 1.0, 30.0]]])
    flat = torch.tensor([[[10.0, 10.0, 0.0, 2.0, 30.0]]])
    query = torch.cat([box, inner, flat], 1)
    iou = torch_npu.npu_rotated_iou(box.npu(), query.npu()).cpu()
    iof = torch_npu.npu_rotated_iou(inner.npu(), query.npu(), mode=1).cpu()
    check(iou, torch.tensor([[[1.0, 0.25, 0.0]]]), atol=1e-6)
    check(iof, torch.tensor([[[1.0, 1.0, 0.0]]]), atol=1e-6)


def test_rotated_iou_meta_device_ops_and_errors():
    a, q = torch.empty(2, 3, 5, device="meta"), torch.empty(2, 4, 5, device="meta")
    assert torch.ops.npu.npu_rotated_iou(a, q).shape == (2, 3, 4)
    assert torch.ops.npu.npu_rotated_iou(a, a, is_cross=False).shape == (2, 3)
    assert torch.ops.npu.npu_rotated_overlaps(a, q).shape == (2, 3, 4)
    boxes = xywht_boxes(1, 3, torch.Generator().manual_seed(5)).npu()
    assert_launches("aclnnRotatedIou", lambda: torch_npu.npu_rotated_iou(boxes, boxes))
    assert_launches("aclnnRotatedOverlaps", lambda: torch_npu.npu_rotated_overlaps(boxes, boxes))
    with pytest.raises(ValueError, match="mode must be 0"):
        torch_npu.npu_rotated_iou(boxes, boxes, mode=2)
    with pytest.raises(ValueError, match="one to one"):
        torch_npu.npu_rotated_iou(boxes, boxes[:, :2], is_cross=False)
    with pytest.raises(ValueError, match="one batch size"):
        torch_npu.npu_rotated_overlaps(boxes, torch.cat([boxes, boxes]))
    with pytest.raises(ValueError, match=r"\[B, N, 5\]"):
        torch_npu.npu_rotated_overlaps(boxes.transpose(1, 2), boxes)
