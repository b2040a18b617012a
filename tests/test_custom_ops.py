"""torch_npu's custom ops (torch_npu.npu_xxx / torch.ops.npu.npu_xxx) against CPU references, forward and backward."""

import pytest
import torch

import torch_npu
import custom_op_refs as ref

NPU = "npu"


def close(actual, expected, dtype=torch.float32):
    tol = {torch.float32: (1e-4, 1e-5), torch.float16: (2e-3, 2e-3)}[dtype]
    torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=tol[0], atol=tol[1], check_dtype=False)


def grads_of(fn, *inputs, grad_out=None):
    """Output and input gradients of fn(*inputs) for a fixed random output gradient."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    g = grad_out if grad_out is not None else torch.randn_like(out.detach().cpu()).to(out.device)
    out.backward(g.to(out.device))
    return out.detach(), [t.grad for t in leaves], g.cpu()


def check_fwd_bwd(npu_fn, cpu_fn, *cpu_inputs, dtype=torch.float32):
    out_cpu, g_cpu, g = grads_of(cpu_fn, *cpu_inputs)
    out_npu, g_npu, _ = grads_of(npu_fn, *[t.to(NPU) for t in cpu_inputs], grad_out=g)
    close(out_npu, out_cpu, dtype)
    for a, b in zip(g_npu, g_cpu):
        close(a, b, dtype)


def test_reachable_three_ways():
    x = torch.randn(3, 4, device=NPU)
    for fn in (torch_npu.npu_fast_gelu, torch.ops.npu.npu_fast_gelu, torch.Tensor.npu_fast_gelu):
        close(fn(x), ref.fast_gelu(x.cpu()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_dtype_cast_format_cast_broadcast(dtype):
    x = torch.randn(2, 3).to(dtype)
    y = torch_npu.npu_dtype_cast(x.to(NPU), torch.float16 if dtype == torch.float32 else torch.float32)
    assert y.dtype != dtype and torch.equal(y.cpu(), x.to(y.dtype))
    same = torch_npu.npu_dtype_cast(x.to(NPU), dtype)
    assert torch.equal(same.cpu(), x)
    f = x.to(NPU).npu_format_cast(29)
    assert torch.equal(f.cpu(), x)
    with pytest.raises(ValueError, match="unknown acl_format 12345"):
        torch_npu.npu_format_cast(x.to(NPU), 12345)
    b = torch_npu.npu_broadcast(x[:1].to(NPU), [4, 3])
    assert torch.equal(b.cpu(), x[:1].expand(4, 3))


def test_outputs_do_not_alias_inputs():
    x = torch.randn(2, 3, device=NPU)
    for out in (torch_npu.npu_dtype_cast(x, torch.float32), torch_npu.npu_format_cast(x, 2),
                torch_npu.npu_confusion_transpose(x, [0, 1], [2, 3], True)):
        assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


@pytest.mark.parametrize("transpose_first", [True, False])
def test_confusion_transpose(transpose_first):
    x = torch.randn(2, 3, 4, 6)
    perm, shape = ([0, 2, 1, 3], [2, 4, 18]) if transpose_first else ([0, 2, 1], [2, 12, 6])
    close(torch_npu.npu_confusion_transpose(x.to(NPU), perm, shape, transpose_first),
          ref.confusion_transpose(x, perm, shape, transpose_first))


def test_one_hot():
    idx = torch.tensor([5, 3, 2, 1], dtype=torch.int32)
    close(torch_npu.npu_one_hot(idx.to(NPU), depth=6), ref.one_hot(idx, -1, 6))
    idx2 = torch.randint(0, 4, (2, 3))
    close(torch_npu.npu_one_hot(idx2.to(NPU), 0, 4, 2.5, -1), ref.one_hot(idx2, 0, 4, 2.5, -1))
    with pytest.raises(ValueError, match="integer class indices"):
        torch_npu.npu_one_hot(torch.zeros(2, device=NPU), depth=2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rms_norm(dtype):
    x, g = torch.randn(2, 5, 16).to(dtype), torch.rand(16).to(dtype) + 0.5
    y, rstd = torch_npu.npu_rms_norm(x.to(NPU), g.to(NPU), epsilon=1e-5)
    y_ref, rstd_ref = ref.rms_norm(x, g, 1e-5)
    close(y, y_ref, dtype)
    close(rstd, rstd_ref)
    assert rstd.dtype == torch.float32 and rstd.shape == (2, 5, 1)
    if dtype == torch.float32:
        check_fwd_bwd(lambda a, b: torch_npu.npu_rms_norm(a, b)[0], lambda a, b: ref.rms_norm(a, b)[0], x, g)


@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_rotary_mul(mode):
    x, cos, sin = torch.randn(2, 3, 4, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8)
    check_fwd_bwd(lambda a, b, c: torch_npu.npu_rotary_mul(a, b, c, mode),
                  lambda a, b, c: ref.rotary_mul(a, b, c, mode), x, cos, sin)
    with pytest.raises(RuntimeError, match="rotary_mode of npu_rotary_mul should be half or interleave"):
        torch_npu.npu_rotary_mul(x.to(NPU), cos.to(NPU), sin.to(NPU), "sideways")


@pytest.mark.parametrize("dim", [-1, 0])
def test_swiglu(dim):
    x = torch.randn(4, 6)
    check_fwd_bwd(lambda a: torch_npu.npu_swiglu(a, dim), lambda a: ref.swiglu(a, dim), x)


def test_fast_gelu():
    check_fwd_bwd(torch_npu.npu_fast_gelu, ref.fast_gelu, torch.randn(3, 7) * 3)


def test_linear():
    x, w, b = torch.randn(5, 4), torch.randn(3, 4), torch.randn(3)
    check_fwd_bwd(torch_npu.npu_linear, torch.nn.functional.linear, x, w, b)
    check_fwd_bwd(lambda a, c: torch_npu.npu_linear(a, c), torch.nn.functional.linear, x, w)


@pytest.mark.parametrize("fixed_triu", [False, True])
def test_scaled_masked_softmax(fixed_triu):
    x = torch.randn(2, 2, 4, 4)
    mask = torch.rand(2, 2, 4, 4) > 0.7
    check_fwd_bwd(lambda a: torch_npu.npu_scaled_masked_softmax(a, mask.to(NPU), 0.5, fixed_triu),
                  lambda a: ref.scaled_masked_softmax(a, mask, 0.5, fixed_triu), x)


def test_stride_add():
    a, b = torch.randn(1, 48, 2, 2), torch.randn(1, 32, 2, 2)
    out = torch_npu.npu_stride_add(a.to(NPU), b.to(NPU), 1, 0, 2)
    close(out, a[:, 16:48] + b[:, 0:32])
    with pytest.raises(ValueError, match="out of range"):
        torch_npu.npu_stride_add(a.to(NPU), b.to(NPU), 2, 0, 2)


def test_float_status():
    x = torch.randn(3, device=NPU)
    status = torch_npu.npu_alloc_float_status(x)
    assert status.shape == (8,) and status.device.type == NPU
    assert torch.equal(torch_npu.npu_get_float_status(status).cpu(), torch.zeros(8))
    assert torch.equal(status.npu_clear_float_status().cpu(), torch.zeros(8))


def test_bounding_box_encode_decode():
    anchor = torch.tensor([[1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 6.0]])
    gt = torch.tensor([[5.0, 6.0, 7.0, 8.0], [7.0, 8.0, 9.0, 12.0]])
    means, stds = [0.1, 0.0, -0.1, 0.0], [0.1, 0.1, 0.2, 0.2]
    close(torch_npu.npu_bounding_box_encode(anchor.to(NPU), gt.to(NPU), *means, *stds),
          ref.bbox_encode(anchor, gt, means, stds))
    deltas = torch.randn(2, 4)
    close(torch_npu.npu_bounding_box_decode(anchor.to(NPU), deltas.to(NPU), *means, *stds, [10, 12], 0.1),
          ref.bbox_decode(anchor, deltas, means, stds, (10, 12), 0.1))
    # torch_npu's documented example.
    out = torch_npu.npu_bounding_box_decode(anchor.to(NPU), gt.to(NPU), 0, 0, 0, 0, 1, 1, 1, 1, (10, 10), 0.1)
    close(out, torch.tensor([[2.5, 6.5, 9.0, 9.0], [9.0, 9.0, 9.0, 9.0]]))


def random_boxes(n, seed):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 10
    return torch.cat([xy, xy + torch.rand(n, 2, generator=g) * 5 + 0.5], 1)


@pytest.mark.parametrize("mode", [0, 1])
def test_iou(mode):
    a, b = random_boxes(5, 0), random_boxes(3, 1)
    close(torch_npu.npu_iou(a.to(NPU), b.to(NPU), mode), ref.iou(a, b, mode))


@pytest.mark.parametrize("is_cross", [False, True])
def test_giou(is_cross):
    # torch_npu's layout: (4, N) columns of x1, y1, x2, y2
    a, b = random_boxes(4, 2).t().contiguous(), random_boxes(5 if is_cross else 4, 3).t().contiguous()
    check_fwd_bwd(lambda x, y: torch_npu.npu_giou(x, y, False, is_cross),
                  lambda x, y: ref.giou(x, y, False, is_cross), a, b)
    out = torch_npu.npu_giou(a.to(NPU), b.to(NPU), False, is_cross)
    assert out.shape == ((4, 5) if is_cross else (4, 1))
    xywh = torch.cat([a[:2], a[2:] - a[:2]], 0)
    close(torch_npu.npu_giou(xywh.to(NPU), xywh.to(NPU), trans=True), torch.ones(4, 1))
    with pytest.raises(ValueError, match=r"\(4, N\)"):
        torch_npu.npu_giou(random_boxes(3, 4).to(NPU), random_boxes(3, 5).to(NPU))  # (N, 4) rows


def test_nms_v4():
    boxes, scores = random_boxes(30, 4), torch.rand(30, generator=torch.Generator().manual_seed(5))
    sel, valid = torch_npu.npu_nms_v4(boxes.to(NPU), scores.to(NPU), 20, torch.tensor(0.3, device=NPU),
                                      torch.tensor(0.2, device=NPU))
    kept = ref.nms(boxes, scores, 20, 0.3, 0.2)
    assert sel.dtype == torch.int32 and sel.shape == (20,) and valid.shape == ()
    assert int(valid) == len(kept) and sel.cpu()[: len(kept)].tolist() == kept


@pytest.mark.parametrize("end_mode", [0, 1])
def test_roi_align(end_mode):
    feat = torch.randn(2, 3, 6, 7)
    rois = torch.tensor([[0, -2.0, -2.0, 22.0, 22.0], [1, 4.0, 2.0, 18.0, 10.0], [0, 20.0, 20.0, 40.0, 30.0]])
    out = torch_npu.npu_roi_align(feat.to(NPU), rois.to(NPU), 0.25, 3, 2, 2, end_mode)
    close(out, ref.roi_align(feat, rois, 0.25, 3, 2, 2, end_mode))
    # torch_npu's documented example.
    x = torch.arange(1, 37, dtype=torch.float32).view(1, 1, 6, 6)
    ex = torch_npu.npu_roi_align(x.to(NPU), torch.tensor([[0, -2.0, -2.0, 22.0, 22.0]], device=NPU), 0.25, 3, 3, 2, 0)
    close(ex, torch.tensor([[[[4.5, 6.5, 8.5], [16.5, 18.5, 20.5], [28.5, 30.5, 32.5]]]]))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_worked_example(approximate):
    """The op added in docs/op_development.md: yaml entry + GeluKernelNpu.cpp + a derivatives.yaml line."""
    x = torch.randn(4, 5) * 2
    ref_fn = lambda a: torch.nn.functional.gelu(a, approximate=approximate)  # noqa: E731
    check_fwd_bwd(lambda a: torch_npu.npu_gelu(a, approximate=approximate), ref_fn, x)
    close(torch.ops.npu.npu_gelu(x.to(NPU), approximate=approximate), ref_fn(x))
    close(x.to(NPU).npu_gelu(approximate=approximate), ref_fn(x))
    torch._dynamo.reset()
    compiled = torch.compile(lambda a: torch_npu.npu_gelu(a, approximate=approximate) * 2, backend="eager",
                             fullgraph=True)
    close(compiled(x.to(NPU)), ref_fn(x) * 2)
    with pytest.raises(ValueError, match="approximate must be"):
        torch_npu.npu_gelu(x.to(NPU), approximate="fast")


def test_layout_sort_and_reduce_ops_match_cpu():
    x = torch.randn(3, 4, 5)
    torch.testing.assert_close(torch_npu.npu_transpose(x.npu(), (2, 0, 1)).cpu(), x.permute(2, 0, 1))
    assert torch_npu.npu_transpose(x.npu(), (2, 0, 1)).is_contiguous()
    torch.testing.assert_close(torch_npu.npu_slice(x.npu(), [1, 0, 2], [2, 3, 3]).cpu(), x[1:3, 0:3, 2:5])
    with pytest.raises(ValueError, match="exceeds"):
        torch_npu.npu_slice(x.npu(), [2, 0, 0], [2, 1, 1])
    torch.testing.assert_close(torch_npu.npu_pad(torch.ones(2, 3).npu(), [1, 0, 2, 1]).cpu(),
                               torch.nn.functional.pad(torch.ones(2, 3), (2, 1, 1, 0)))
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    torch.testing.assert_close(torch_npu.npu_bmmV2(a.npu(), b.npu(), []).cpu(), a @ b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch_npu.npu_sort_v2(x.npu(), 1, True).cpu(), x.sort(1, True)[0])
    values, indices = torch_npu.npu_max(x.npu(), 2, keepdim=True)
    ref = x.max(2, keepdim=True)
    assert indices.dtype == torch.int32
    torch.testing.assert_close(values.cpu(), ref.values)
    torch.testing.assert_close(indices.cpu().long(), ref.indices)
    values, indices = torch_npu.npu_min(x.npu(), 0)
    torch.testing.assert_close(values.cpu(), x.min(0).values)


def test_mish_and_softmax_cross_entropy_with_logits():
    x = torch.randn(4, 6)
    xn = x.npu().requires_grad_()
    y = torch_npu.npu_mish(xn)
    xc = x.clone().requires_grad_()
    ref = torch.nn.functional.mish(xc)
    torch.testing.assert_close(y.cpu(), ref)
    y.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)
    labels = torch.softmax(torch.randn(4, 6), -1)
    loss = torch_npu.npu_softmax_cross_entropy_with_logits(x.npu(), labels.npu())
    torch.testing.assert_close(loss.cpu(), -(labels * x.log_softmax(-1)).sum(-1))
    # torch_npu's two spellings of fast GELU (fast_gelu is an op of its own) agree.
    torch.testing.assert_close(torch_npu.fast_gelu(x.npu()).cpu(), torch_npu.npu_fast_gelu(x.npu()).cpu())


def test_copy_memory_():
    dst, src = torch.zeros(2, 3).npu(), torch.arange(6.0).npu()
    torch_npu.copy_memory_(dst, src)
    torch.testing.assert_close(dst.cpu(), torch.arange(6.0).view(2, 3))
    with pytest.raises(RuntimeError, match="same dtype"):
        torch_npu.copy_memory_(dst, src.int())
