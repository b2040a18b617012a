"""Vision long tail: npu_ps_roi_pooling (and its backward), npu_nms_rotated, npu_random_choice_with_mask,
npu_sub_sample, npu_normalize_batch, npu_masked_softmax_with_rel_pos_bias and npu_deformable_conv2d /
npu_deformable_conv2dbk, against CPU references written from their definitions (custom_op_refs). The two random
samplers are checked by their properties (counts, membership, mask consistency, seed reproducibility)."""

import pytest
import torch

import torch_npu

from op_refs import train_vision as ref

NPU = "npu"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def gen(seed):
    return torch.Generator().manual_seed(seed)


# ---- npu_ps_roi_pooling ----------------------------------------------------------------------------------------


def random_rois(batch, per_batch, extent, seed, invalid_first=True):
    """(batch, 5, per_batch) rois [batch_id, x1, y1, x2, y2]; the first one names a batch entry that does not exist."""
    g = gen(seed)
    rois = torch.zeros(batch, 5, per_batch)
    rois[:, 0] = torch.randint(0, batch, (batch, per_batch), generator=g).float()
    corners = torch.rand(batch, 4, per_batch, generator=g) * extent
    rois[:, 1], rois[:, 3] = torch.minimum(corners[:, 0], corners[:, 2]), torch.maximum(corners[:, 0], corners[:, 2])
    rois[:, 2], rois[:, 4] = torch.minimum(corners[:, 1], corners[:, 3]), torch.maximum(corners[:, 1], corners[:, 3])
    if invalid_first:
        rois[0, 0, 0] = batch + 3
    return rois


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("group,output_dim,scale", [(3, 2, 0.3), (2, 4, 1.0), (1, 3, 0.5)])
def test_ps_roi_pooling(dtype, group, output_dim, scale):
    x = torch.randn(2, output_dim * group * group, 9, 11, generator=gen(0)).to(dtype)
    rois = random_rois(2, 4, 30, 1).to(dtype)
    out = torch_npu.npu_ps_roi_pooling(x.to(NPU), rois.to(NPU), scale, group, output_dim)
    expected = ref.ps_roi_pooling(x, rois, scale, group, output_dim)
    assert out.dtype == dtype and out.shape == (8, output_dim, group, group)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5 if dtype == torch.float32 else None,
                               atol=1e-5 if dtype == torch.float32 else None)


def test_ps_roi_pooling_gradient_backward_op_and_device_ops():
    x = torch.randn(2, 2 * 3 * 3, 8, 10, generator=gen(2), requires_grad=True)
    rois = random_rois(2, 5, 25, 3)
    weights = torch.randn(10, 2, 3, 3, generator=gen(4))
    (ref.ps_roi_pooling(x, rois, 0.4, 3, 2) * weights).sum().backward()
    x_npu = x.detach().to(NPU).requires_grad_()
    before = [device_op_count(n) for n in ("aclnnPSROIPoolingV2", "aclnnPSROIPoolingGradV2D")]
    out = torch_npu.npu_ps_roi_pooling(x_npu, rois.to(NPU), 0.4, 3, 2)
    (out * weights.to(NPU)).sum().backward()
    torch.npu.synchronize()
    assert [device_op_count(n) for n in ("aclnnPSROIPoolingV2", "aclnnPSROIPoolingGradV2D")] == [b + 1 for b in before]
    torch.testing.assert_close(x_npu.grad.cpu(), x.grad, rtol=1e-5, atol=1e-6)
    direct = torch_npu.npu_ps_roi_pooling_backward(weights.to(NPU), rois.to(NPU), 0.4, 3, 2, [8, 10])
    torch.testing.assert_close(direct.cpu(), x.grad, rtol=1e-5, atol=1e-6)


def test_ps_roi_pooling_torch_npu_example_meta_and_errors():
    # torch_npu's documented example: every roi falls outside the 1 x 1 map (or names no batch entry): all zeros.
    roi = torch.tensor([[[1], [2], [3], [4], [5]], [[6], [7], [8], [9], [10]]], dtype=torch.float16)
    x = torch.arange(1, 17, dtype=torch.float16).reshape(2, 8, 1, 1)
    out = torch_npu.npu_ps_roi_pooling(x.to(NPU), roi.to(NPU), 0.5, 2, 2)
    torch.testing.assert_close(out.cpu(), ref.ps_roi_pooling(x, roi, 0.5, 2, 2))
    meta = torch.ops.npu.npu_ps_roi_pooling(torch.empty(2, 18, 5, 5, device="meta"),
                                            torch.empty(2, 5, 7, device="meta"), 0.5, 3, 2)
    assert meta.shape == (14, 2, 3, 3)
    back = torch.ops.npu.npu_ps_roi_pooling_backward(torch.empty(14, 2, 3, 3, device="meta"),
                                                     torch.empty(2, 5, 7, device="meta"), 0.5, 3, 2, [5, 6])
    assert back.shape == (2, 18, 5, 6)
    with pytest.raises(ValueError, match=r"output_dim \* group_size\^2"):
        torch_npu.npu_ps_roi_pooling(torch.randn(1, 10, 4, 4).to(NPU), torch.zeros(1, 5, 2).to(NPU), 1.0, 3, 2)
    with pytest.raises(ValueError, match="rois must be"):
        torch_npu.npu_ps_roi_pooling(torch.randn(1, 18, 4, 4).to(NPU), torch.zeros(1, 4, 2).to(NPU), 1.0, 3, 2)


# ---- npu_nms_rotated -------------------------------------------------------------------------------------------


def rotated_boxes(n, mode, seed):
    """Clustered boxes so that suppression happens: (cx, cy, w, h, degrees), or (x1, y1, x2, y2, degrees)."""
    g = gen(seed)
    centre = torch.rand(n, 2, generator=g) * 40
    size = torch.rand(n, 2, generator=g) * 20 + 4
    angle = torch.rand(n, 1, generator=g) * 180 - 90
    if mode == 0:
        return torch.cat([centre, size, angle], 1)
    return torch.cat([centre - size / 2, centre + size / 2, angle], 1)


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS)
def test_nms_rotated(mode, dtype):
    boxes = rotated_boxes(40, mode, 5).to(dtype)
    scores = torch.rand(40, generator=gen(6)).to(dtype)
    for iou, threshold, limit in ((0.2, 0.0, -1), (0.5, 0.3, -1), (0.3, 0.0, 4)):
        selected, count = torch_npu.npu_nms_rotated(boxes.to(NPU), scores.to(NPU), iou, threshold, limit, mode)
        expected = ref.nms_rotated(boxes.float(), scores.float(), iou, threshold, limit, mode)
        assert selected.dtype == torch.int32 and count.dtype == torch.int32
        assert selected.cpu().tolist() == expected, (iou, threshold, limit)
        assert count.cpu().tolist() == [len(expected)]
    assert len(expected) == 4  # the limit binds: the test is not vacuous


def test_nms_rotated_degenerate_boxes_meta_device_op_and_errors():
    boxes = torch.tensor([[0., 0., 10., 10., 0.], [1., 0., 10., 10., 0.], [0., 0., 0., 5., 30.],
                          [30., 30., 10., 10., 45.]])
    scores = torch.tensor([0.9, 0.8, 0.95, 0.5])
    before = device_op_count("aclnnRotatedNMS")
    selected, count = torch_npu.npu_nms_rotated(boxes.to(NPU), scores.to(NPU), 0.5)
    torch.npu.synchronize()
    assert device_op_count("aclnnRotatedNMS") == before + 1
    # the zero-width box overlaps nothing and survives; the shifted copy of box 0 is suppressed.
    assert selected.cpu().tolist() == ref.nms_rotated(boxes, scores, 0.5) == [2, 0, 3]
    assert count.cpu().tolist() == [3]
    meta = torch.ops.npu.npu_nms_rotated(torch.empty(9, 5, device="meta"), torch.empty(9, device="meta"), 0.5,
                                         max_output_size=4)
    assert [tuple(t.shape) for t in meta] == [(4,), (1,)] and meta[0].dtype == torch.int32
    with pytest.raises(ValueError, match=r"\(num_boxes, 5\)"):
        torch_npu.npu_nms_rotated(torch.randn(3, 4).to(NPU), torch.rand(3).to(NPU), 0.5)
    with pytest.raises(ValueError, match="mode"):
        torch_npu.npu_nms_rotated(boxes.to(NPU), scores.to(NPU), 0.5, mode=2)


# ---- npu_random_choice_with_mask -------------------------------------------------------------------------------


def check_choice(x, count, indices, mask):
    """Properties: shapes / dtypes, valid rows first, each a distinct true element, padding rows zero."""
    truths = {tuple(p) for p in x.nonzero().tolist()}
    take = min(count, len(truths))
    assert indices.shape == (count, x.dim()) and indices.dtype == torch.int32
    assert mask.shape == (count,) and mask.dtype == torch.bool
    assert mask[:take].all() and not mask[take:].any()
    rows = [tuple(r) for r in indices[:take].tolist()]
    assert len(set(rows)) == take and set(rows) <= truths
    assert (indices[take:] == 0).all()
    return rows


@pytest.mark.parametrize("count", [6, 40])
def test_random_choice_with_mask_properties(count):
    x = torch.rand(5, 7, generator=gen(7)) < 0.45
    assert 6 < int(x.sum()) < 40
    indices, mask = torch_npu.npu_random_choice_with_mask(x.to(NPU), count)
    rows = check_choice(x, count, indices.cpu(), mask.cpu())
    if count >= int(x.sum()):
        assert set(rows) == {tuple(p) for p in x.nonzero().tolist()}


def test_random_choice_with_mask_seeds():
    x = torch.rand(40, generator=gen(8)) < 0.5
    draw = lambda **kw: [t.cpu() for t in torch_npu.npu_random_choice_with_mask(x.to(NPU), 8, **kw)]
    torch.npu.manual_seed(11)
    first = draw()
    torch.npu.manual_seed(11)
    again = draw()
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    # Fresh draws choose differently (8 of ~20 in order: a repeat is practically impossible).
    assert any(not torch.equal(draw()[0], first[0]) for _ in range(3))
    # An explicit (seed, seed2) fixes the result whatever the generator's state.
    torch.npu.manual_seed(1)
    fixed = draw(seed=5, seed2=2)
    torch.npu.manual_seed(2)
    assert torch.equal(draw(seed=5, seed2=2)[0], fixed[0])
    # Over repeated draws every true element gets chosen: the choice is not biased to a fixed subset.
    seen = set()
    for _ in range(25):
        seen |= set(check_choice(x, 8, *draw()))
    assert seen == {tuple(p) for p in x.nonzero().tolist()}


def test_random_choice_with_mask_torch_npu_example_meta_device_op_and_errors():
    x = torch.tensor([1, 0, 1, 0], dtype=torch.bool)
    before = device_op_count("aclnnRandomChoiceWithMask")
    indices, mask = torch_npu.npu_random_choice_with_mask(x.to(NPU), 2, 1, 0)
    torch.npu.synchronize()
    assert device_op_count("aclnnRandomChoiceWithMask") == before + 1
    # torch_npu's example: both true elements come back (their order is the random part).
    assert sorted(indices.cpu().flatten().tolist()) == [0, 2] and mask.cpu().all()
    meta = torch.ops.npu.npu_random_choice_with_mask(torch.empty(3, 4, 5, dtype=torch.bool, device="meta"), 7)
    assert [tuple(t.shape) for t in meta] == [(7, 3), (7,)]
    with pytest.raises(TypeError, match="torch.bool"):
        torch_npu.npu_random_choice_with_mask(torch.ones(4).to(NPU), 2)
    with pytest.raises(ValueError, match="count"):
        torch_npu.npu_random_choice_with_mask(x.to(NPU), 0)


# ---- npu_sub_sample --------------------------------------------------------------------------------------------


def labels_with(n_ignore, n_negative, n_positive, seed):
    g = gen(seed)
    labels = torch.cat([torch.full((n_ignore,), -1), torch.zeros(n_negative, dtype=torch.long),
                        torch.randint(1, 4, (n_positive,), generator=g)])
    return labels[torch.randperm(labels.numel(), generator=g)].int()


@pytest.mark.parametrize("counts,per_images,fraction", [((30, 120, 50), 64, 0.25), ((10, 100, 5), 64, 0.25),
                                                        ((0, 8, 40), 32, 0.5), ((5, 3, 2), 64, 0.25)])
def test_sub_sample_properties(counts, per_images, fraction):
    labels = labels_with(*counts, seed=9)
    out = torch_npu.npu_sub_sample(labels.to(NPU), per_images, fraction).cpu()
    assert out.dtype == labels.dtype and out.shape == labels.shape
    kept = out != -1
    assert torch.equal(out[kept], labels[kept])  # sampled labels keep their value; the rest are -1
    positives, negatives = int((labels > 0).sum()), int((labels == 0).sum())
    want_pos = min(int(per_images * fraction), positives)
    assert int((out > 0).sum()) == want_pos
    assert int((out == 0).sum()) == min(per_images - want_pos, negatives)


def test_sub_sample_seeds_meta_device_op_and_errors():
    labels = labels_with(20, 200, 60, seed=10).to(NPU)
    torch.npu.manual_seed(3)
    first = torch_npu.npu_sub_sample(labels, 64, 0.25).cpu()
    torch.npu.manual_seed(3)
    before = device_op_count("aclnnSubSample")
    again = torch_npu.npu_sub_sample(labels, 64, 0.25).cpu()
    torch.npu.synchronize()
    assert device_op_count("aclnnSubSample") == before + 1
    assert torch.equal(first, again)
    assert any(not torch.equal(torch_npu.npu_sub_sample(labels, 64, 0.25).cpu(), first) for _ in range(3))
    meta = torch.ops.npu.npu_sub_sample(torch.empty(50, dtype=torch.int32, device="meta"), 16, 0.5)
    assert meta.shape == (50,) and meta.dtype == torch.int32
    with pytest.raises(TypeError, match="int32"):
        torch_npu.npu_sub_sample(torch.zeros(5).to(NPU), 4, 0.5)
    with pytest.raises(ValueError, match="positive_fraction"):
        torch_npu.npu_sub_sample(labels, 4, 1.5)


# ---- npu_normalize_batch ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("normalize_type", [0, 1])
def test_normalize_batch(dtype, normalize_type):
    x = (torch.rand(4, 3, 12, generator=gen(11)) * 9 + 1).to(dtype)
    seq_len = torch.tensor([3, 12, 7, 5], dtype=torch.int32)
    out = torch_npu.npu_normalize_batch(x.to(NPU), seq_len.to(NPU), normalize_type)
    assert out.dtype == dtype and out.shape == x.shape
    expected = ref.normalize_batch(x, seq_len, normalize_type)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5 if dtype == torch.float32 else None,
                               atol=1e-5 if dtype == torch.float32 else None)


def test_normalize_batch_meta_device_op_and_errors():
    x, seq_len = torch.rand(2, 3, 6).to(NPU), torch.tensor([4, 6], dtype=torch.int32).to(NPU)
    before = device_op_count("aclnnNormalizeBatch")
    torch_npu.npu_normalize_batch(x, seq_len)
    torch.npu.synchronize()
    assert device_op_count("aclnnNormalizeBatch") == before + 1
    meta = torch.ops.npu.npu_normalize_batch(torch.empty(2, 3, 6, device="meta"),
                                             torch.empty(2, dtype=torch.int32, device="meta"), 1)
    assert meta.shape == (2, 3, 6)
    with pytest.raises(ValueError, match="normalize_type"):
        torch_npu.npu_normalize_batch(x, seq_len, 2)
    with pytest.raises(ValueError, match="one length per utterance"):
        torch_npu.npu_normalize_batch(x, seq_len[:1], 0)


# ---- npu_masked_softmax_with_rel_pos_bias ----------------------------------------------------------------------

SWIN_FORMS = [
    # x, atten_mask, relative_pos_bias
    ((1, 2, 3, 4, 4), (1, 2, 1, 4, 4), (1, 1, 3, 4, 4)),  # torch_npu's own test
    ((2, 3, 4, 5, 6), (3, 5, 6), (4, 5, 6)),
    ((6, 4, 5, 6), (3, 1, 5, 6), (1, 4, 5, 6)),  # (B * W, N, S1, S2)
    ((6, 4, 5, 6), None, (4, 5, 6)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", SWIN_FORMS)
def test_masked_softmax_with_rel_pos_bias(dtype, shapes):
    x_shape, mask_shape, bias_shape = shapes
    g = gen(12)
    x = torch.randn(x_shape, generator=g).to(dtype)
    mask = None if mask_shape is None else torch.where(torch.rand(mask_shape, generator=g) < 0.2, -100.0, 0.0).to(dtype)
    bias = torch.randn(bias_shape, generator=g).to(dtype)
    for scale in (1.0, 0.35):
        out = torch_npu.npu_masked_softmax_with_rel_pos_bias(x.to(NPU), None if mask is None else mask.to(NPU),
                                                             bias.to(NPU), scale_value=scale)
        assert out.dtype == dtype and out.shape == x.shape
        torch.testing.assert_close(out.cpu(), ref.masked_softmax_with_rel_pos_bias(x, mask, bias, scale))


def test_masked_softmax_with_rel_pos_bias_meta_device_op_and_errors():
    x, mask, bias = torch.randn(2, 3, 4, 5, 6), torch.zeros(3, 5, 6), torch.randn(4, 5, 6)
    before = device_op_count("aclnnMaskedSoftmaxWithRelPosBias")
    torch_npu.npu_masked_softmax_with_rel_pos_bias(x.to(NPU), mask.to(NPU), bias.to(NPU))
    torch.npu.synchronize()
    assert device_op_count("aclnnMaskedSoftmaxWithRelPosBias") == before + 1
    meta = torch.ops.npu.npu_masked_softmax_with_rel_pos_bias(torch.empty(2, 3, 4, 5, 6, device="meta"), None,
                                                              torch.empty(4, 5, 6, device="meta"))
    assert meta.shape == (2, 3, 4, 5, 6)
    with pytest.raises(ValueError, match="relative_pos_bias"):
        torch_npu.npu_masked_softmax_with_rel_pos_bias(x.to(NPU), mask.to(NPU), torch.randn(3, 5, 6).to(NPU))
    with pytest.raises(ValueError, match="windows"):
        torch_npu.npu_masked_softmax_with_rel_pos_bias(x.to(NPU), torch.zeros(2, 5, 6).to(NPU), bias.to(NPU))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        torch_npu.npu_masked_softmax_with_rel_pos_bias(x.int().to(NPU), mask.to(NPU), bias.to(NPU))


# ---- npu_deformable_conv2d / npu_deformable_conv2dbk -------------------------------------------------------------

DEFORM_CASES = [
    # N, C, H, W, Co, (kH, kW), stride, padding, dilation, groups, deformable_groups, modulated, bias
    (2, 4, 7, 6, 6, (3, 3), (1, 1, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1), 1, 1, True, True),
    (1, 4, 8, 7, 4, (3, 2), (1, 1, 2, 1), (1, 0, 1, 1), (1, 1, 1, 2), 2, 2, True, False),
    (2, 6, 5, 5, 3, (2, 2), (1, 1, 1, 2), (0, 1, 0, 1), (1, 1, 2, 1), 1, 3, False, True),
]


def deform_inputs(case, seed, dtype=torch.float32):
    n, c, h, w, co, (kh, kw), stride, pad, dil, groups, dg, modulated, with_bias = case
    out_h = (h + pad[0] + pad[1] - ((kh - 1) * dil[2] + 1)) // stride[2] + 1
    out_w = (w + pad[2] + pad[3] - ((kw - 1) * dil[3] + 1)) // stride[3] + 1
    g = gen(seed)
    x = torch.randn(n, c, h, w, generator=g)
    weight = torch.randn(co, c // groups, kh, kw, generator=g) * 0.3
    taps = dg * kh * kw
    offset = torch.randn(n, taps * (3 if modulated else 2), out_h, out_w, generator=g) * 1.5
    if modulated:
        offset[:, 2 * taps:] = torch.rand(n, taps, out_h, out_w, generator=g)
    bias = torch.randn(co, generator=g) if with_bias else None
    args = dict(kernel_size=[kh, kw], stride=list(stride), padding=list(pad), dilation=list(dil), groups=groups,
                deformable_groups=dg, modulated=modulated)
    cast = lambda t: None if t is None else t.to(dtype)
    return cast(x), cast(weight), cast(offset), cast(bias), args


@pytest.mark.parametrize("case", DEFORM_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_deformable_conv2d_forward(case, dtype):
    x, weight, offset, bias, args = deform_inputs(case, 13, dtype)
    out, sampled = torch_npu.npu_deformable_conv2d(x.to(NPU), weight.to(NPU), offset.to(NPU),
                                                   None if bias is None else bias.to(NPU), **args)
    expected_out, expected_sampled = ref.deformable_conv2d(x, weight, offset, bias, **args)
    assert out.dtype == sampled.dtype == torch.float32  # every input is used as float32, as in torch_npu
    torch.testing.assert_close(sampled.cpu(), expected_sampled, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.cpu(), expected_out, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", DEFORM_CASES)
def test_deformable_conv2d_gradients(case):
    x, weight, offset, bias, args = deform_inputs(case, 14)
    leaves = [t.clone().requires_grad_() for t in (x, weight, offset) + ((bias,) if bias is not None else ())]
    out, _ = ref.deformable_conv2d(*leaves[:3], leaves[3] if bias is not None else None, **args)
    grad_out = torch.randn(out.shape, generator=gen(15))
    out.backward(grad_out)
    npu_leaves = [t.detach().to(NPU).requires_grad_() for t in leaves]
    before = device_op_count("aclnnDeformableConv2dBackward")
    npu_out, _ = torch_npu.npu_deformable_conv2d(*npu_leaves[:3], npu_leaves[3] if bias is not None else None, **args)
    npu_out.backward(grad_out.to(NPU))
    torch.npu.synchronize()
    assert device_op_count("aclnnDeformableConv2dBackward") == before + 1
    for name, a, b in zip(("input", "weight", "offset", "bias"), npu_leaves, leaves):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-4, msg=lambda t, name=name: f"{name}: {t}")


def test_deformable_conv2dbk_direct_meta_and_errors():
    case = DEFORM_CASES[0]
    x, weight, offset, bias, args = deform_inputs(case, 16)
    leaves = [t.clone().requires_grad_() for t in (x, weight, offset, bias)]
    out, sampled = ref.deformable_conv2d(*leaves, **args)
    grad_out = torch.randn(out.shape, generator=gen(17))
    out.backward(grad_out)
    before = device_op_count("aclnnDeformableConv2d")
    _, npu_sampled = torch_npu.npu_deformable_conv2d(x.to(NPU), weight.to(NPU), offset.to(NPU), bias.to(NPU), **args)
    grads = torch_npu.npu_deformable_conv2dbk(x.to(NPU), grad_out.to(NPU), npu_sampled, weight.to(NPU),
                                              offset.to(NPU), **args)
    torch.npu.synchronize()
    assert device_op_count("aclnnDeformableConv2d") == before + 1
    for got, leaf in zip(grads, leaves):
        torch.testing.assert_close(got.cpu(), leaf.grad, rtol=1e-4, atol=1e-4)
    meta = lambda t: torch.empty(t.shape, device="meta")
    fwd = torch.ops.npu.npu_deformable_conv2d(meta(x), meta(weight), meta(offset), None, **args)
    assert [tuple(t.shape) for t in fwd] == [tuple(out.shape), tuple(sampled.shape)]
    bwd = torch.ops.npu.npu_deformable_conv2dbk(meta(x), meta(out), meta(sampled), meta(weight), meta(offset), **args)
    assert [tuple(t.shape) for t in bwd] == [tuple(x.shape), tuple(weight.shape), tuple(offset.shape),
                                            (weight.shape[0],)]
    with pytest.raises(ValueError, match="offset must be"):
        torch_npu.npu_deformable_conv2d(x.to(NPU), weight.to(NPU), offset[:, :5].to(NPU), None, **args)
    with pytest.raises(ValueError, match="kernel_size"):
        torch_npu.npu_deformable_conv2d(x.to(NPU), weight.to(NPU), offset.to(NPU), None,
                                        **dict(args, kernel_size=[3, 2]))
