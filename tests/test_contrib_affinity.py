"""The affinity library (torch_npu.contrib.function / .module): each function and module on npu equals a plain
PyTorch reference computed on CPU, gradients included."""

import math

import pytest
import torch
import torch.nn.functional as F

from torch_npu.contrib.function import (fast_rcnn_inference_single_image, matmul_transpose, npu_ciou, npu_diou,
                                        npu_giou, npu_iou, npu_ptiou, pairwise_iou, roll)
from torch_npu.contrib.module import (ChannelShuffle, DropoutWithByteMask, Focus, LabelSmoothingCrossEntropy, Mish,
                                      NpuDropPath, PreLoader, Prefetcher, ROIAlign, SiLU, Swish)


def _boxes(n, seed, xywh=False):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 50
    wh = torch.rand(n, 2, generator=g) * 30 + 1
    return torch.cat((xy + wh / 2, wh), 1) if xywh else torch.cat((xy, xy + wh), 1)


def _iou_ref(a, b):
    """One pair of xyxy boxes: (intersection, union, enclosing area, centre distance^2, diagonal^2)."""
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    ex0, ey0, ex1, ey1 = min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])
    rho2 = ((a[0] + a[2]) / 2 - (b[0] + b[2]) / 2) ** 2 + ((a[1] + a[3]) / 2 - (b[1] + b[3]) / 2) ** 2
    return inter, union, (ex1 - ex0) * (ey1 - ey0), rho2, (ex1 - ex0) ** 2 + (ey1 - ey0) ** 2


def _xyxy(b):
    return [b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2]


def test_npu_iou_and_pairwise_iou():
    a, b = _boxes(6, 0), _boxes(4, 1)
    b[0] = a[0]  # one exact match
    ref_iou = torch.tensor([[(_iou_ref(x, y)[0] + 0.001) / (_iou_ref(x, y)[1] + 0.001) for y in b.tolist()]
                            for x in a.tolist()])
    ref_pt = torch.tensor([[_iou_ref(x, y)[0] / (_iou_ref(x, y)[1] + 0.001) for y in b.tolist()] for x in a.tolist()])
    ref_pair = torch.tensor([[_iou_ref(x, y)[0] / _iou_ref(x, y)[1] for y in b.tolist()] for x in a.tolist()])
    torch.testing.assert_close(npu_iou(a.npu(), b.npu(), mode="iou").cpu(), ref_iou)
    torch.testing.assert_close(npu_ptiou(a.npu(), b.npu()).cpu(), ref_pt)
    torch.testing.assert_close(npu_iou(a.npu() / 100, b.npu() / 100, is_normalized=True).cpu(), ref_pt)
    torch.testing.assert_close(pairwise_iou(a.npu(), b.npu()).cpu(), ref_pair)
    assert pairwise_iou(a, b)[0, 0] == pytest.approx(1.0)
    empty = torch.tensor([[5.0, 5.0, 5.0, 5.0]])
    assert pairwise_iou(empty.npu(), empty.npu()).item() == 0.0
    with pytest.raises(ValueError, match="mode must be"):
        npu_iou(a, b, mode="giou")
    with pytest.raises(ValueError, match=r"boxes2 must have shape \(N, 4\)"):
        npu_iou(a, b[:3].t())


def test_npu_giou_matches_reference_and_differentiates():
    a, b = _boxes(5, 2, xywh=True), _boxes(5, 3, xywh=True)
    ref = []
    for x, y in zip(a.tolist(), b.tolist()):
        inter, union, enclose, _, _ = _iou_ref(_xyxy(x), _xyxy(y))
        ref.append(inter / union - (enclose - union) / enclose)
    an = a.npu().requires_grad_()
    out = npu_giou(an, b.npu())
    assert out.shape == (5, 1)
    torch.testing.assert_close(out.cpu().flatten(), torch.tensor(ref))
    torch.testing.assert_close(npu_giou(a.t().npu(), b.t().npu(), is_permuted=False).cpu(), out.detach().cpu().t())
    out.sum().backward()
    ac = a.clone().requires_grad_()
    npu_giou(ac, b).sum().backward()
    torch.testing.assert_close(an.grad.cpu(), ac.grad)


@pytest.mark.parametrize("fn", ["diou", "ciou"])
def test_npu_diou_ciou(fn):
    a, b = _boxes(6, 4, xywh=True), _boxes(6, 5, xywh=True)
    ref = []
    for x, y in zip(a.tolist(), b.tolist()):
        inter, union, _, rho2, c2 = _iou_ref(_xyxy(x), _xyxy(y))
        iou = inter / union
        value = iou - rho2 / c2
        if fn == "ciou":
            v = 4 / math.pi ** 2 * (math.atan(y[2] / y[3]) - math.atan(x[2] / x[3])) ** 2
            value -= v / (1 - iou + v) * v
        ref.append(value)
    f = npu_diou if fn == "diou" else npu_ciou
    an = a.t().contiguous().npu().requires_grad_()
    out = f(an, b.t().contiguous().npu())
    assert out.shape == (1, 6)
    torch.testing.assert_close(out.cpu().flatten(), torch.tensor(ref), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    ac = a.t().contiguous().requires_grad_()
    f(ac, b.t().contiguous()).sum().backward()
    torch.testing.assert_close(an.grad.cpu(), ac.grad, rtol=1e-4, atol=1e-6)
    cross = f(a.t().npu(), b[:3].t().npu(), is_cross=True)
    assert cross.shape == (3, 6)
    torch.testing.assert_close(cross.cpu()[1, 1], torch.tensor(ref[1]), rtol=1e-5, atol=1e-6)


def _nms_ref(boxes, scores, thresh):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    keep = []
    for i in order:
        if all(_iou_ref(boxes[i], boxes[k])[0] / _iou_ref(boxes[i], boxes[k])[1] <= thresh for k in keep):
            keep.append(i)
    return keep


def test_fast_rcnn_inference_single_image():
    g = torch.Generator().manual_seed(0)
    r, k = 12, 3
    base = _boxes(r, 6)
    boxes = torch.cat([base + torch.randn(r, 4, generator=g) for _ in range(k)], 1)
    boxes[0, :4] = torch.tensor([-5.0, -5.0, 200.0, 200.0])  # clipped to the image
    scores = torch.softmax(torch.randn(r, k + 1, generator=g), 1)
    scores[3] = float("nan")  # dropped
    out_boxes, out_scores, classes, rows = fast_rcnn_inference_single_image(
        boxes.npu(), scores.npu(), (64, 48), 0.05, 0.5, 100)
    # Reference: per class, clip, threshold, greedy NMS; then all detections by decreasing score.
    dets = []
    for c in range(k):
        cand = [(i, [min(max(boxes[i, 4 * c + j].item(), 0), (48, 64, 48, 64)[j]) for j in range(4)],
                 scores[i, c].item()) for i in range(r) if i != 3 and scores[i, c] > 0.05]
        keep = _nms_ref([b for _, b, _ in cand], [s for _, _, s in cand], 0.5)
        dets += [(cand[j][2], c, cand[j][0], cand[j][1]) for j in keep]
    dets.sort(key=lambda d: -d[0])
    assert classes.cpu().tolist() == [d[1] for d in dets] and rows.cpu().tolist() == [d[2] for d in dets]
    torch.testing.assert_close(out_scores.cpu(), torch.tensor([d[0] for d in dets]))
    torch.testing.assert_close(out_boxes.cpu(), torch.tensor([d[3] for d in dets]))
    top2 = fast_rcnn_inference_single_image(boxes.npu(), scores.npu(), (64, 48), 0.05, 0.5, 2)
    assert top2[0].shape == (2, 4)


def test_roll_and_matmul_transpose():
    x = torch.randn(2, 5, 6, 3)
    xn = x.npu().requires_grad_()
    y = roll(xn, shifts=(-2, 3), dims=(1, 2))
    torch.testing.assert_close(y.cpu(), torch.roll(x, shifts=(-2, 3), dims=(1, 2)))
    w = torch.randn_like(x)
    (y * w.npu()).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), torch.roll(w, shifts=(2, -3), dims=(1, 2)))
    with pytest.raises(ValueError, match="dims=\\(1, 2\\)"):
        roll(xn, shifts=(1, 1), dims=(0, 1))

    q, k = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8)
    qn, kn = q.npu().requires_grad_(), k.npu().requires_grad_()
    out = matmul_transpose(qn, kn)
    qc, kc = q.clone().requires_grad_(), k.clone().requires_grad_()
    ref = qc @ kc.transpose(-2, -1)
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
    out.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(qn.grad.cpu(), qc.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kn.grad.cpu(), kc.grad, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="last dims must match"):
        matmul_transpose(q, torch.randn(2, 3, 5, 7))


@pytest.mark.parametrize("split", [True, False])
def test_channel_shuffle_equals_view_transpose(split):
    x1, x2 = torch.randn(2, 4, 3, 3), torch.randn(2, 4, 3, 3)
    m = ChannelShuffle(8, groups=2, split_shuffle=split).npu()
    a, b = x1.npu().requires_grad_(), x2.npu().requires_grad_()
    out = m(a, b)
    ac, bc = x1.clone().requires_grad_(), x2.clone().requires_grad_()
    ref = torch.cat((ac, bc), 1).view(2, 2, 4, 3, 3).transpose(1, 2).reshape(2, 8, 3, 3)
    refs = ref.chunk(2, 1) if split else (ref,)
    outs = out if split else (out,)
    w = [torch.randn_like(r) for r in refs]
    for o, r in zip(outs, refs):
        torch.testing.assert_close(o.cpu(), r.detach())
    sum((o * wi.npu()).sum() for o, wi in zip(outs, w)).backward()
    sum((r * wi).sum() for r, wi in zip(refs, w)).backward()
    torch.testing.assert_close(a.grad.cpu(), ac.grad)
    torch.testing.assert_close(b.grad.cpu(), bc.grad)
    with pytest.raises(ValueError, match="groups=2"):
        ChannelShuffle(8, groups=4)


def test_label_smoothing_cross_entropy():
    pred, target = torch.randn(6, 5), torch.randint(0, 5, (6,))
    m = LabelSmoothingCrossEntropy(num_classes=5, smooth_factor=0.1)
    pn = pred.npu().requires_grad_()
    loss = m(pn, target.npu())
    q = torch.full((6, 5), 0.1 / 4)
    q[torch.arange(6), target] = 0.9
    pc = pred.clone().requires_grad_()
    ref = -(q * torch.log_softmax(pc, 1)).sum(1).mean()
    torch.testing.assert_close(loss.cpu(), ref.detach())
    loss.backward()
    ref.backward()
    torch.testing.assert_close(pn.grad.cpu(), pc.grad)
    plain = LabelSmoothingCrossEntropy(5)(pred.npu(), target.npu())
    torch.testing.assert_close(plain.cpu(), F.cross_entropy(pred, target))


def _roi_align_ref(feat, roi, out_hw, scale, ratio, aligned):
    """Scalar loops over one ROI (torchvision's roi_align semantics)."""
    c, h, w = feat.shape
    ph, pw = out_hw
    off = 0.5 if aligned else 0.0
    x1, y1, x2, y2 = [v * scale - off for v in roi]
    rw, rh = x2 - x1, y2 - y1
    if not aligned:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    gh = ratio if ratio > 0 else math.ceil(rh / ph)
    gw = ratio if ratio > 0 else math.ceil(rw / pw)
    out = torch.zeros(c, ph, pw, dtype=torch.float64)
    for i in range(ph):
        for j in range(pw):
            acc = torch.zeros(c, dtype=torch.float64)
            for iy in range(gh):
                y = y1 + i * rh / ph + (iy + 0.5) * rh / ph / gh
                for ix in range(gw):
                    x = x1 + j * rw / pw + (ix + 0.5) * rw / pw / gw
                    if y < -1.0 or y > h or x < -1.0 or x > w:
                        continue
                    y, x = max(y, 0.0), max(x, 0.0)
                    yl, xl = int(y), int(x)
                    yh, xh = min(yl + 1, h - 1), min(xl + 1, w - 1)
                    if yl >= h - 1:
                        yl = yh = h - 1
                        y = float(yl)
                    if xl >= w - 1:
                        xl = xh = w - 1
                        x = float(xl)
                    ly, lx = y - yl, x - xl
                    acc += ((1 - ly) * (1 - lx) * feat[:, yl, xl] + (1 - ly) * lx * feat[:, yl, xh] +
                            ly * (1 - lx) * feat[:, yh, xl] + ly * lx * feat[:, yh, xh]).double()
            out[:, i, j] = acc / (gh * gw)
    return out.float()


@pytest.mark.parametrize("aligned,ratio", [(True, 2), (False, 0)])
def test_roi_align(aligned, ratio):
    feat = torch.randn(2, 3, 10, 12)
    rois = torch.tensor([[0, 1.0, 2.0, 9.0, 8.0], [1, 0.0, 0.0, 23.0, 19.0], [1, 4.5, 3.2, 6.1, 5.0]])
    m = ROIAlign((3, 2), spatial_scale=0.5, sampling_ratio=ratio, aligned=aligned)
    fn = feat.npu().requires_grad_()
    out = m(fn, rois.npu())
    ref = torch.stack([_roi_align_ref(feat[int(r[0])], r[1:].tolist(), (3, 2), 0.5, ratio, aligned) for r in rois])
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert fn.grad.shape == feat.shape and fn.grad.abs().sum() > 0
    with pytest.raises(ValueError, match=r"rois must be \(K, 5\)"):
        m(fn, rois[:, 1:].npu())


def test_activations_focus_and_dropouts():
    x = torch.randn(3, 4)
    torch.testing.assert_close(Mish()(x.npu()).cpu(), x * torch.tanh(F.softplus(x)))
    torch.testing.assert_close(SiLU()(x.npu()).cpu(), x * torch.sigmoid(x))
    assert Swish is SiLU

    torch.manual_seed(0)
    focus = Focus(3, 8, k=3)
    img = torch.randn(2, 3, 8, 6)
    ref = focus.conv(torch.cat([img[..., ::2, ::2], img[..., 1::2, ::2], img[..., ::2, 1::2], img[..., 1::2, 1::2]], 1))
    torch.testing.assert_close(focus.npu()(img.npu()).cpu(), ref.detach(), rtol=1e-4, atol=1e-5)

    drop = DropoutWithByteMask(p=0.25)
    xn = torch.ones(4000, device="npu", requires_grad=True)
    y = drop(xn)
    kept = y.detach().cpu() != 0
    assert torch.all(y.detach().cpu()[kept] == 1 / 0.75) and 0.2 < 1 - kept.float().mean().item() < 0.3
    y.sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), kept.float() / 0.75)
    assert torch.equal(drop.eval()(xn), xn)

    dp = NpuDropPath(0.5)
    z = torch.ones(400, 2, 3, device="npu")
    torch.npu.manual_seed(3)
    out = dp(z)
    torch.npu.manual_seed(3)
    mask = (0.5 + torch.rand(400, 1, 1, device="npu")).floor_()
    torch.testing.assert_close(out.cpu(), (z / 0.5 * mask).cpu())
    assert torch.equal(dp.eval()(z), z)


def test_drop_path_ensemble_draws_masks_ahead():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), NpuDropPath(0.3)).npu().train()
    handle = NpuDropPath.enable_droppath_ensemble(model)
    try:
        x = torch.ones(64, 3, device="npu")
        model(x)  # draws inline, records the demand
        model(x)  # the pre-forward hook drew this mask on the side stream
        assert not NpuDropPath._queues[((64, 3), torch.float32, x.device, 0.7)]
        rows = model[1](torch.ones(64, 3, device="npu")).cpu()
        assert set(rows[:, 0].tolist()) <= {0.0, torch.tensor(1 / 0.7).item()}
    finally:
        handle.remove()


def test_prefetcher_delivers_batches_on_npu():
    data = [(torch.full((2, 3), float(i)), torch.tensor([i, i])) for i in range(4)]
    pre = Prefetcher(data)
    seen = []
    x, y = pre.next()
    while x is not None:
        assert x.device.type == "npu" and y.device.type == "npu"
        seen.append(int(x[0, 0].item()))
        x, y = pre.next()
    assert seen == [0, 1, 2, 3]
    assert [int(b[1][0]) for b in PreLoader(data, stream=torch.npu.Stream())] == [0, 1, 2, 3]


def test_bilstm_equals_a_bidirectional_lstm_on_cpu():
    import torch_npu.contrib
    from torch_npu.contrib.module.bidirectional_lstm import BiLSTM

    torch.manual_seed(0)
    with pytest.warns(FutureWarning, match="nn.LSTM"):
        bi = BiLSTM(6, 5)
    assert torch_npu.contrib.BiLSTM is BiLSTM
    ref = torch.nn.LSTM(6, 5, bidirectional=True)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(ref, name).copy_(getattr(bi.fw_rnn, name))
            getattr(ref, name + "_reverse").copy_(getattr(bi.bw_rnn, name))
    x = torch.randn(7, 3, 6)
    expected, _ = ref(x)
    x_npu = x.npu().requires_grad_()
    out = bi.npu()(x_npu)
    assert out.shape == (7, 3, 10)
    torch.testing.assert_close(out.detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-5)
    out.sum().backward()
    x_cpu = x.clone().requires_grad_()
    ref(x_cpu)[0].sum().backward()
    torch.testing.assert_close(x_npu.grad.cpu(), x_cpu.grad, rtol=1e-4, atol=1e-5)
