"""Detection and indexing custom ops (npu_indexing, npu_masked_fill_range, npu_sign_bits_pack,
npu_anchor_response_flags, npu_yolo_boxes_encode, npu_grid_assign_positive, npu_nms_with_mask,
npu_roi_alignbk, npu_silu_) against plain CPU / NumPy references written from their definitions."""

import numpy as np
import pytest
import torch

import torch_npu

NPU = "npu"


def test_indexing_strided_slice_and_masks():
    x = torch.arange(2 * 5 * 6, dtype=torch.float32).reshape(2, 5, 6)
    out = torch_npu.npu_indexing(x.to(NPU), [0, 1, 0], [2, 5, 6], [1, 2, 3])
    torch.testing.assert_close(out.cpu(), x[0:2, 1:5:2, 0:6:3])
    # begin_mask / end_mask ignore the bound of their dimension; shrink_axis_mask drops it.
    out = torch_npu.npu_indexing(x.to(NPU), [1, 3, 2], [0, 0, -1], [1, 1, 1], begin_mask=0b010, end_mask=0b010,
                                 shrink_axis_mask=0b001)
    torch.testing.assert_close(out.cpu(), x[1, :, 2:-1])
    with pytest.raises(ValueError, match="strides must be positive"):
        torch_npu.npu_indexing(x.to(NPU), [0], [2], [-1])


def masked_fill_range_ref(x, start, end, value, axis):
    out = x.clone()
    dim = x.dim()
    for i in range(start.shape[0]):
        for j in range(start.shape[1]):
            for k in range(int(start[i, j]), int(end[i, j])):
                idx = [slice(None)] * dim
                idx[axis] = k
                if dim >= 2 and axis == dim - 1:
                    idx[0] = j
                out[tuple(idx)] = value[i]
    return out


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((4, 9), 0), ((4, 9), 1), ((3, 5, 8), 1), ((3, 5, 8), 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_masked_fill_range(shape, axis, dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 50, shape, generator=g).to(dtype)
    batch = 3 if axis == len(shape) - 1 and len(shape) >= 2 else 2
    start = torch.randint(0, shape[axis], (2, batch), generator=g, dtype=torch.int32)
    end = (start + torch.randint(0, 4, (2, batch), generator=g, dtype=torch.int32)).clamp(max=shape[axis])
    value = torch.tensor([-1, -2], dtype=dtype)
    out = torch_npu.npu_masked_fill_range(x.to(NPU), start.to(NPU), end.to(NPU), value.to(NPU), axis)
    torch.testing.assert_close(out.cpu(), masked_fill_range_ref(x, start, end, value, axis))


@pytest.mark.parametrize("n,size", [(17, 1), (8, 1), (33, 1), (16, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sign_bits_pack(n, size, dtype):
    x = np.random.default_rng(n).uniform(-10, 10, n).astype(dtype)
    x[0] = 0  # zero counts as positive
    packed = np.packbits(x >= 0, bitorder="little").reshape(size, -1)
    out = torch_npu.npu_sign_bits_pack(torch.from_numpy(x).to(NPU), size)
    assert out.dtype == torch.uint8
    np.testing.assert_array_equal(out.cpu().numpy(), packed)
    with pytest.raises(ValueError, match="cannot be split"):
        torch_npu.npu_sign_bits_pack(torch.from_numpy(x).to(NPU), packed.size + 1)


def test_anchor_response_flags():
    g = torch.Generator().manual_seed(1)
    boxes = torch.rand(50, 4, generator=g) * 120 - 10  # some centres fall outside the feature map
    h, w, stride, anchors = 10, 12, (8, 8), 3
    cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
    gx, gy = torch.floor(cx / stride[0]).long(), torch.floor(cy / stride[1]).long()
    grid = torch.zeros(h * w, dtype=torch.uint8)
    for x_, y_ in zip(gx.tolist(), gy.tolist()):
        if 0 <= x_ < w and 0 <= y_ < h:
            grid[y_ * w + x_] = 1
    expected = grid.repeat_interleave(anchors)
    out = torch_npu.npu_anchor_response_flags(boxes.to(NPU), [h, w], list(stride), anchors)
    assert out.dtype == torch.uint8
    torch.testing.assert_close(out.cpu(), expected)


def test_yolo_boxes_encode():
    g = torch.Generator().manual_seed(2)
    a, b = torch.rand(6, 4, generator=g), torch.rand(6, 4, generator=g)
    stride = torch.tensor([8, 16, 32, 8, 16, 32], dtype=torch.int32)
    out = torch_npu.npu_yolo_boxes_encode(a.to(NPU), b.to(NPU), stride.to(NPU))
    ref = []
    for i in range(6):
        acx, acy, aw, ah = (a[i, 0] + a[i, 2]) / 2, (a[i, 1] + a[i, 3]) / 2, a[i, 2] - a[i, 0], a[i, 3] - a[i, 1]
        gcx, gcy, gw, gh = (b[i, 0] + b[i, 2]) / 2, (b[i, 1] + b[i, 3]) / 2, b[i, 2] - b[i, 0], b[i, 3] - b[i, 1]
        s = float(stride[i])
        ref.append([(gcx - acx) / s + 0.5, (gcy - acy) / s + 0.5, np.log(max(float(gw / aw), 1e-6)),
                    np.log(max(float(gh / ah), 1e-6))])
    torch.testing.assert_close(out.cpu(), torch.tensor(ref, dtype=torch.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("assign_all", [True, False])
def test_grid_assign_positive(assign_all):
    g = torch.Generator().manual_seed(3)
    boxes, gts = 10, 3
    overlaps = torch.rand(gts, boxes, generator=g)
    max_overlaps, argmax = overlaps.max(0)
    gt_max, gt_argmax = overlaps.max(1)
    flags = torch.tensor([1, 1, 0, 1, 1, 1, 0, 1, 1, 1], dtype=torch.uint8)
    assigned = torch.full((boxes,), -1.0)
    expected = assigned.clone()  # mmdetection's GridAssigner, step by step
    pos = (max_overlaps > 0.5) & flags.bool()
    expected[pos] = argmax[pos].float() + 1
    for i in range(gts):
        if gt_max[i] > 0.2:
            if assign_all:
                sel = (overlaps[i] == gt_max[i]) & flags.bool()
                expected[sel] = i + 1
            elif flags[gt_argmax[i]]:
                expected[gt_argmax[i]] = i + 1
    args = [assigned, overlaps, flags, max_overlaps, argmax.int(), gt_max, gt_argmax.int()]
    out = torch_npu.npu_grid_assign_positive(*[t.to(NPU) for t in args], gts, 0.5, 0.2, assign_all)
    torch.testing.assert_close(out.cpu(), expected)


def test_nms_with_mask():
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0, 0.6], [1.0, 1.0, 11.0, 11.0, 0.9], [20.0, 20.0, 30.0, 30.0, 0.7],
                          [0.5, 0.5, 10.0, 10.5, 0.3]])
    out, idx, mask = torch_npu.npu_nms_with_mask(boxes.to(NPU), 0.5)
    # sorted by score: 1 (kept), 2 (kept), 0 (overlaps 1: IoU 0.68, suppressed), 3 (overlaps 1, suppressed)
    torch.testing.assert_close(idx.cpu(), torch.tensor([1, 2, 0, 3], dtype=torch.int32))
    torch.testing.assert_close(mask.cpu(), torch.tensor([1, 1, 0, 0], dtype=torch.uint8))
    torch.testing.assert_close(out.cpu(), boxes[[1, 2, 0, 3]])
    with pytest.raises(ValueError, match=r"\(N, 5\)"):
        torch_npu.npu_nms_with_mask(boxes[:, :4].to(NPU), 0.5)


def test_roi_alignbk_is_the_adjoint_of_roi_align():
    # roi_align is linear in the features, so its backward is its adjoint: <align(f), g> = <f, alignbk(g)>.
    g = torch.Generator().manual_seed(4)
    rois = torch.tensor([[0, 1.0, 1.0, 20.0, 24.0], [1, -2.0, 0.0, 30.0, 14.0]]).to(NPU)
    grad_out = torch.rand(2, 3, 3, 4, generator=g).to(NPU)
    bk = torch_npu.npu_roi_alignbk(grad_out, rois, [2, 3, 8, 8], 4, 3, 0.25, 2, 1)
    assert bk.shape == (2, 3, 8, 8) and bk.abs().sum() > 0
    for _ in range(3):
        feats = torch.rand(2, 3, 8, 8, generator=g).to(NPU)
        out = torch_npu.npu_roi_align(feats, rois, 0.25, 3, 4, 2, 1)
        torch.testing.assert_close((out * grad_out).sum().cpu(), (feats * bk).sum().cpu(), rtol=1e-5, atol=1e-5)
    # Unit gradient on one bin spreads weights summing to 1 (the average of the bilinear samples).
    unit = torch.zeros(2, 3, 3, 4).to(NPU)
    unit[0, 1, 1, 2] = 1
    bk = torch_npu.npu_roi_alignbk(unit, rois, [2, 3, 8, 8], 4, 3, 0.25, 2, 1).cpu()
    torch.testing.assert_close(bk.sum(), torch.tensor(1.0))
    assert bk[1].abs().sum() == 0 and bk[0, 0].abs().sum() == 0


def test_silu_inplace():
    x = torch.randn(4, 5)
    y = x.to(NPU)
    res = torch_npu.npu_silu_(y)
    assert res.data_ptr() == y.data_ptr()
    torch.testing.assert_close(y.cpu(), torch.nn.functional.silu(x))


def test_batch_nms():
    # Image 0: class 0 keeps boxes 0 and 2 (box 1 overlaps box 0), class 1 keeps box 1; image 1: nothing
    # above the score threshold.
    boxes = torch.tensor([[[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]],
                          [[0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0], [4.0, 4.0, 5.0, 5.0]]]).unsqueeze(2)
    scores = torch.tensor([[[0.9, 0.1], [0.8, 0.7], [0.6, 0.05]], [[0.1, 0.1], [0.2, 0.0], [0.0, 0.1]]])
    nb, ns, nc, num = torch_npu.npu_batch_nms(boxes.to(NPU), scores.to(NPU), 0.3, 0.5, 4, 5)
    assert nb.shape == (2, 5, 4) and ns.shape == (2, 5) and nc.shape == (2, 5) and num.dtype == torch.int32
    torch.testing.assert_close(num.cpu(), torch.tensor([3, 0], dtype=torch.int32))
    torch.testing.assert_close(ns.cpu()[0], torch.tensor([0.9, 0.7, 0.6, 0.0, 0.0]))
    torch.testing.assert_close(nc.cpu()[0], torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0]))
    torch.testing.assert_close(nb.cpu()[0, :3], boxes[0, [0, 1, 2], 0])
    assert nb.cpu()[1].abs().sum() == 0
    with pytest.raises(ValueError, match="num_boxes, q, 4"):
        torch_npu.npu_batch_nms(boxes[:, :, 0].to(NPU), scores.to(NPU), 0.3, 0.5, 4, 5)


def diou_ref(b1, b2, trans, eps=1e-9):
    """DIoU of box i of b1 against box i of b2, boxes as (4, N) columns, written out as the definition."""
    if trans:
        b1 = torch.stack([b1[0] - b1[2] / 2, b1[1] - b1[3] / 2, b1[0] + b1[2] / 2, b1[1] + b1[3] / 2])
        b2 = torch.stack([b2[0] - b2[2] / 2, b2[1] - b2[3] / 2, b2[0] + b2[2] / 2, b2[1] + b2[3] / 2])
    inter = (torch.min(b1[2], b2[2]) - torch.max(b1[0], b2[0])).clamp(0) * \
        (torch.min(b1[3], b2[3]) - torch.max(b1[1], b2[1])).clamp(0)
    union = (b1[2] - b1[0]) * (b1[3] - b1[1] + eps) + (b2[2] - b2[0]) * (b2[3] - b2[1] + eps) - inter + eps
    c2 = (torch.max(b1[2], b2[2]) - torch.min(b1[0], b2[0])) ** 2 + \
        (torch.max(b1[3], b2[3]) - torch.min(b1[1], b2[1])) ** 2 + eps
    rho2 = ((b2[0] + b2[2] - b1[0] - b1[2]) ** 2 + (b2[1] + b2[3] - b1[1] - b1[3]) ** 2) / 4
    return (inter / union - rho2 / c2).unsqueeze(0)


def ciou_ref(b1, b2, trans, eps=1e-9):
    """CIoU: DIoU minus v * alpha (aspect-ratio term; alpha is a constant for the gradient)."""
    if trans:
        b1 = torch.stack([b1[0] - b1[2] / 2, b1[1] - b1[3] / 2, b1[0] + b1[2] / 2, b1[1] + b1[3] / 2])
        b2 = torch.stack([b2[0] - b2[2] / 2, b2[1] - b2[3] / 2, b2[0] + b2[2] / 2, b2[1] + b2[3] / 2])
    w1, h1 = b1[2] - b1[0], b1[3] - b1[1] + eps
    w2, h2 = b2[2] - b2[0], b2[3] - b2[1] + eps
    inter = (torch.min(b1[2], b2[2]) - torch.max(b1[0], b2[0])).clamp(0) * \
        (torch.min(b1[3], b2[3]) - torch.max(b1[1], b2[1])).clamp(0)
    iou = inter / (w1 * h1 + w2 * h2 - inter + eps)
    v = (4 / np.pi ** 2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)) ** 2
    with torch.no_grad():
        alpha = v / ((1 + eps) - iou + v)
    return diou_ref(b1, b2, False, eps) - (v * alpha).unsqueeze(0)


@pytest.mark.parametrize("trans", [True, False])
def test_diou_forward_backward(trans):
    g = torch.Generator().manual_seed(5)
    lo, hi = torch.rand(2, 12, generator=g) * 0.5, 0.5 + torch.rand(2, 12, generator=g) * 0.5
    b1 = torch.cat([lo, hi]) if not trans else torch.rand(4, 12, generator=g) + 0.1
    b2 = torch.cat([lo + 0.1, hi + 0.05]) if not trans else torch.rand(4, 12, generator=g) + 0.1
    c1, c2 = b1.clone().requires_grad_(), b2.clone().requires_grad_()
    expected = diou_ref(c1, c2, trans)
    expected.backward(torch.ones_like(expected))
    n1, n2 = b1.to(NPU).requires_grad_(), b2.to(NPU).requires_grad_()
    out = torch_npu.npu_diou(n1, n2, trans, False, 0)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(out.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(n1.grad.cpu(), c1.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(n2.grad.cpu(), c2.grad, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"\(4, N\)"):
        torch_npu.npu_diou(b1.t().to(NPU), b2.t().to(NPU))


@pytest.mark.parametrize("trans", [True, False])
def test_ciou_forward_backward(trans):
    g = torch.Generator().manual_seed(6)
    if trans:
        b1, b2 = torch.rand(4, 9, generator=g) + 0.1, torch.rand(4, 9, generator=g) + 0.1
    else:
        lo1, lo2 = torch.rand(2, 9, generator=g), torch.rand(2, 9, generator=g)
        b1 = torch.cat([lo1, lo1 + 0.2 + torch.rand(2, 9, generator=g)])
        b2 = torch.cat([lo2, lo2 + 0.2 + torch.rand(2, 9, generator=g)])
    c1, c2 = b1.clone().requires_grad_(), b2.clone().requires_grad_()
    expected = ciou_ref(c1, c2, trans)
    expected.backward(torch.ones_like(expected))
    n1, n2 = b1.to(NPU).requires_grad_(), b2.to(NPU).requires_grad_()
    out = torch_npu.npu_ciou(n1, n2, trans, False, 0, True)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(out.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(n1.grad.cpu(), c1.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(n2.grad.cpu(), c2.grad, rtol=1e-4, atol=1e-5)
    cross = torch_npu.npu_ciou(b1.to(NPU), b2[:, :4].to(NPU), trans)  # is_cross defaults to True
    assert cross.shape == (9, 4)
    torch.testing.assert_close(cross.cpu()[:4].diagonal(), expected.detach()[0, :4], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_sign_bits_unpack_inverts_pack(dtype):
    packed = np.random.default_rng(7).integers(0, 256, 6, dtype=np.uint8)
    expected = np.unpackbits(packed, bitorder="little").astype(np.float32) * 2 - 1
    out = torch_npu.npu_sign_bits_unpack(torch.from_numpy(packed).to(NPU), 2, dtype)
    assert out.dtype == dtype and out.shape == (2, 24)
    np.testing.assert_array_equal(out.float().cpu().numpy(), expected.reshape(2, 24))
    x = torch.from_numpy(expected).to(NPU)
    np.testing.assert_array_equal(torch_npu.npu_sign_bits_pack(x, 1).cpu().numpy()[0], packed)


@pytest.mark.parametrize("p,dim,maxnorm", [(2.0, 0, 1.0), (1.0, 1, 0.5), (3.0, -1, 2.0)])
def test_renorm_backward_matches_autograd(p, dim, maxnorm):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(4, 5, 3, generator=g)
    grad = torch.randn(4, 5, 3, generator=g)
    xc = x.clone().requires_grad_()
    torch.renorm(xc, p, dim, maxnorm).backward(grad)
    out = torch_npu.npu_renorm_backward(grad.to(NPU), x.to(NPU), p, dim, maxnorm)
    torch.testing.assert_close(out.cpu(), xc.grad, rtol=1e-5, atol=1e-6)
