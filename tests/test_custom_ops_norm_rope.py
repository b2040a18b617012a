"""The LLM layers' fused ops on their device ops: RMSNorm (plain, Gemma's, with a residual add), rotary
embedding (half / interleave / a rotate matrix), SwiGLU and FastGelu, against CPU references composed of
ATen ops in every dtype, gradients through autograd of the reference, Meta kernels and device op names."""

import pytest
import torch

import torch_npu
import custom_op_refs as ref

NPU = "npu"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: (1e-4, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)}


def check(actual, expected, dtype=torch.float32):
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(actual.detach().float().cpu(), expected.detach().float().cpu(), rtol=rtol, atol=atol)


def fwd_bwd(fn, inputs, grad):
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    out.backward(grad.to(out.device, out.dtype))
    return out, [t.grad for t in leaves]


def compare(npu_fn, cpu_fn, inputs, dtype):
    """npu_fn on npu copies of `inputs` (in dtype) against cpu_fn in float32, forward and all gradients."""
    xs = [t.to(dtype) for t in inputs]
    out_ref, grads_ref = fwd_bwd(cpu_fn, [t.float() for t in xs], grad := torch.randn_like(cpu_fn(*[t.float() for t in xs])))
    out, grads = fwd_bwd(npu_fn, [t.to(NPU) for t in xs], grad)
    assert out.dtype == dtype
    check(out, out_ref, dtype)
    for a, b in zip(grads, grads_ref):
        check(a, b, dtype)


def gemma_rms_norm(x, gamma, eps=1e-6):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return xf * rstd * (1 + gamma.float()), rstd


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_and_gradients(dtype):
    x, g = torch.randn(3, 5, 32), torch.rand(32) + 0.5
    compare(lambda a, b: torch_npu.npu_rms_norm(a, b, 1e-5)[0], lambda a, b: ref.rms_norm(a, b, 1e-5)[0], [x, g], dtype)
    y, rstd = torch_npu.npu_rms_norm(x.to(dtype).npu(), g.to(dtype).npu())
    assert rstd.dtype == torch.float32 and rstd.shape == (3, 5, 1)
    check(rstd, ref.rms_norm(x.to(dtype).float(), g.to(dtype).float())[1])
    # Two trailing dimensions normalised together.
    g2 = torch.rand(5, 32) + 0.5
    compare(lambda a, b: torch_npu.npu_rms_norm(a, b)[0], lambda a, b: ref.rms_norm(a, b)[0], [x, g2], dtype)


def test_rms_norm_backward_op_returns_float32_dgamma():
    x, g, dy = torch.randn(4, 16).half(), (torch.rand(16) + 0.5).half(), torch.randn(4, 16).half()
    _, rstd = torch_npu.npu_rms_norm(x.npu(), g.npu())
    dx, dgamma = torch_npu.npu_rms_norm_backward(dy.npu(), x.npu(), g.npu(), rstd)
    assert dx.dtype == torch.float16 and dgamma.dtype == torch.float32
    leaves = [x.float().requires_grad_(True), g.float().requires_grad_(True)]
    ref.rms_norm(*leaves)[0].backward(dy.float())
    check(dx, leaves[0].grad, torch.float16)
    check(dgamma, leaves[1].grad, torch.float16)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemma_and_add_rms_norm(dtype):
    x1, x2, g = torch.randn(2, 7, 64).to(dtype), torch.randn(2, 7, 64).to(dtype), (torch.rand(64) - 0.5).to(dtype)
    y, rstd = torch_npu.npu_gemma_rms_norm(x1.npu(), g.npu(), 1e-5)
    y_ref, rstd_ref = gemma_rms_norm(x1, g, 1e-5)
    check(y, y_ref, dtype)
    check(rstd, rstd_ref, dtype)
    assert y.dtype == dtype and rstd.dtype == torch.float32
    y, rstd, x = torch_npu.npu_add_rms_norm(x1.npu(), x2.npu(), g.npu())
    residual = (x1.float() + x2.float()).to(dtype)
    check(x, residual, dtype)
    y_ref, rstd_ref = ref.rms_norm(residual, g)
    check(y, y_ref, dtype)
    check(rstd, rstd_ref, dtype)
    with pytest.raises(ValueError, match="one shape"):
        torch_npu.npu_add_rms_norm(x1.npu(), x2[:, :3].npu(), g.npu())
    with pytest.raises(ValueError, match="gamma"):
        torch_npu.npu_gemma_rms_norm(x1.npu(), g[:8].npu())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_rotary_mul_bsnd_broadcast_cos_sin(mode, dtype):
    # transformers / DeepSpeed: x [B, S, N, D], cos / sin [1, S, 1, D].
    x, cos, sin = torch.randn(2, 6, 4, 16), torch.randn(1, 6, 1, 16), torch.randn(1, 6, 1, 16)
    compare(lambda a, b, c: torch_npu.npu_rotary_mul(a, b, c, mode), lambda a, b, c: ref.rotary_mul(a, b, c, mode),
            [x, cos, sin], dtype)


def test_rotary_mul_with_a_rotate_matrix():
    d = 8
    x, cos, sin = torch.randn(2, 3, 4, d), torch.randn(1, 3, 1, d), torch.randn(1, 3, 1, d)
    rot = torch.randn(d, d)
    out = torch_npu.npu_rotary_mul(x.npu(), cos.npu(), sin.npu(), rotate=rot.npu())
    check(out, x * cos + (x @ rot) * sin)
    leaf = x.npu().requires_grad_(True)
    with pytest.raises(ValueError, match="rotate"):
        torch_npu.npu_rotary_mul(leaf, cos.npu(), sin.npu(), rotate=rot.npu()).sum().backward()
    with pytest.raises(RuntimeError, match="rotate"):
        torch_npu.npu_rotary_mul(x.npu(), cos.npu(), sin.npu(), rotate=torch.randn(d, d + 1).npu()).cpu()


@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu_and_fast_gelu(dtype):
    x = torch.randn(4, 6, 10)
    for dim in (-1, 1):
        compare(lambda a: torch_npu.npu_swiglu(a, dim), lambda a: ref.swiglu(a, dim), [x], dtype)
    compare(torch_npu.npu_fast_gelu, ref.fast_gelu, [x * 3], dtype)
    with pytest.raises(ValueError, match="two equal halves"):
        torch_npu.npu_swiglu(torch.randn(3, 5).npu())


def test_meta_kernels_and_compile():
    m = lambda *s: torch.empty(*s, device="meta")  # noqa: E731
    y, rstd, x = torch.ops.npu.npu_add_rms_norm(m(2, 3, 8), m(2, 3, 8), m(8))
    assert y.shape == x.shape == (2, 3, 8) and rstd.shape == (2, 3, 1) and rstd.dtype == torch.float32
    y, rstd = torch.ops.npu.npu_gemma_rms_norm(m(4, 8), m(8))
    assert rstd.shape == (4, 1)
    assert torch.ops.npu.npu_swiglu(m(4, 6), 0).shape == (2, 6)
    assert torch.ops.npu.npu_rotary_mul(m(1, 2, 3, 8), m(1, 2, 1, 8), m(1, 2, 1, 8), "interleave").shape == (1, 2, 3, 8)
    dx, dgamma = torch.ops.npu.npu_rms_norm_backward(m(4, 8), m(4, 8), m(8), m(4, 1))
    assert dx.shape == (4, 8) and dgamma.dtype == torch.float32

    def block(h, g, cos, sin):
        h, _, res = torch_npu.npu_add_rms_norm(h, h, g)
        h = torch_npu.npu_rotary_mul(h, cos, sin)
        return torch_npu.npu_swiglu(torch.cat([h, res], -1)).sum()

    args = [torch.randn(2, 3, 4, 8).npu(), torch.rand(8).npu(), torch.randn(1, 3, 1, 8).npu(), torch.randn(1, 3, 1, 8).npu()]
    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    check(compiled(*args), block(*args))


def test_device_ops_are_named():
    count = lambda name: torch.npu.op_stats().get(name, {}).get("device_op", 0)  # noqa: E731
    names = ["aclnnRmsNorm", "aclnnRmsNormGrad", "aclnnRotaryPositionEmbedding", "aclnnRotaryPositionEmbeddingGrad",
             "aclnnSwiGlu", "aclnnSwiGluGrad", "aclnnFastGelu", "aclnnFastGeluBackward", "aclnnAddRmsNorm",
             "aclnnGemmaRmsNorm"]
    before = [count(n) for n in names]
    x = torch.randn(2, 8, device=NPU, requires_grad=True)
    g = torch.rand(8, device=NPU, requires_grad=True)
    cos = torch.randn(1, 8, device=NPU, requires_grad=True)
    h = torch_npu.npu_rms_norm(x, g)[0]
    h = torch_npu.npu_rotary_mul(h, cos, cos)
    torch_npu.npu_swiglu(torch_npu.npu_fast_gelu(h)).sum().backward()
    torch_npu.npu_add_rms_norm(x.detach(), x.detach(), g.detach())
    torch_npu.npu_gemma_rms_norm(x.detach(), g.detach())
    torch.npu.synchronize()
    assert [count(n) - b for n, b in zip(names, before)] == [1] * len(names)


def geglu_reference(x, dim, approximate, activate_left):
    a, b = x.float().chunk(2, dim)
    act, other = (a, b) if activate_left else (b, a)
    gelu = torch.nn.functional.gelu(act, approximate="tanh" if approximate == 1 else "none")
    return gelu * other, gelu


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate,activate_left", [(1, False), (0, True)])
def test_geglu_and_gradient(dtype, approximate, activate_left):
    x = torch.randn(3, 4, 12)
    for dim in (-1, 1):
        compare(lambda a: torch_npu.npu_geglu(a, dim, approximate, activate_left)[0],
                lambda a: geglu_reference(a, dim, approximate, activate_left)[0], [x], dtype)
    out, gelu = torch_npu.npu_geglu(x.to(dtype).npu(), -1, approximate, activate_left)
    check(gelu, geglu_reference(x.to(dtype), -1, approximate, activate_left)[1], dtype)
    assert torch.ops.npu.npu_geglu(torch.empty(2, 8, device="meta"))[0].shape == (2, 4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_and_scaled_masked_softmax_on_device_ops(dtype):
    x = torch.randn(2, 3, 6, 6) * 3
    for approximate in ("none", "tanh"):
        compare(lambda a: torch_npu.npu_gelu(a, approximate=approximate),
                lambda a: torch.nn.functional.gelu(a, approximate=approximate), [x], dtype)
    mask = torch.rand(2, 1, 6, 6) < 0.3
    compare(lambda a: torch_npu.npu_scaled_masked_softmax(a, mask.npu(), 0.5),
            lambda a: ref.scaled_masked_softmax(a, mask, 0.5), [x], dtype)
    compare(lambda a: torch_npu.npu_scaled_masked_softmax(a, mask.npu(), 0.5, True),
            lambda a: ref.scaled_masked_softmax(a, mask, 0.5, True), [x], dtype)
    count = lambda name: torch.npu.op_stats().get(name, {}).get("device_op", 0)  # noqa: E731
    names = ["aclnnGelu", "aclnnScaledMaskedSoftmax", "aclnnScaledMaskedSoftmaxBackward", "aclnnGeGluV3",
             "aclnnGeGluV3Backward"]
    before = [count(n) for n in names]
    t = torch.randn(2, 4, 4, device=NPU, requires_grad=True)
    y = torch_npu.npu_scaled_masked_softmax(torch_npu.npu_gelu(t), (torch.rand(2, 4, 4) < 0.2).npu(), 0.5)
    torch_npu.npu_geglu(y)[0].sum().backward()
    torch.npu.synchronize()
    assert [count(n) - b for n, b in zip(names, before)] == [1, 1, 1, 1, 1]


def dropout_add_softmax_reference(self, x1, alpha, keep_mask, prob, dim):
    """softmax(x1 + alpha * self) along dim in float32, then dropout by the given 0/1 mask."""
    p = torch.softmax(x1.float() + alpha * self.float(), dim)
    return p, p * keep_mask.view(p.shape).float() / (1 - prob)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("prob", [0.0, 0.3])
def test_dropout_with_add_softmax_and_gradients(dtype, prob):
    self_cpu, x1_cpu = torch.randn(2, 4, 8, 16).to(dtype), torch.randn(2, 4, 8, 16).to(dtype)
    s = self_cpu.npu().requires_grad_(True)
    x = x1_cpu.npu().requires_grad_(True)
    mask, softmax, out = torch_npu.npu_dropout_with_add_softmax(s, x, 0.125, prob, -1)
    assert mask.dtype == torch.uint8 and mask.shape == (s.numel(),) and softmax.dtype == out.dtype == dtype
    kept = mask.cpu().float().mean().item()
    if prob == 0.0:
        assert kept == 1.0
    else:
        assert set(mask.cpu().unique().tolist()) <= {0, 1} and abs(kept - (1 - prob)) < 0.05
    # The reference replays the returned mask; gradients by autograd through it.
    rs, rx = self_cpu.float().requires_grad_(True), x1_cpu.float().requires_grad_(True)
    ref_softmax, ref_out = dropout_add_softmax_reference(rs, rx, 0.125, mask.cpu(), prob, -1)
    check(softmax, ref_softmax, dtype)
    check(out, ref_out, dtype)
    grad = torch.randn(out.shape)
    out.backward(grad.to(dtype).npu())
    ref_out.backward(grad.to(dtype).float())
    check(s.grad, rs.grad, dtype)
    check(x.grad, rx.grad, dtype)


def test_dropout_with_add_softmax_meta_device_ops_and_errors():
    m = torch.empty(2, 3, 4, 8, device="meta")
    mask, softmax, out = torch.ops.npu.npu_dropout_with_add_softmax(m, m, 2, 0.1, -1)
    assert mask.shape == (192,) and mask.dtype == torch.uint8 and softmax.shape == out.shape == m.shape
    count = lambda name: torch.npu.op_stats().get(name, {}).get("device_op", 0)  # noqa: E731
    names = ["aclnnAxpyWithSoftmaxAndDropOutDoMask", "aclnnDropoutWithMulsAndSoftmaxGrad"]
    before = [count(n) for n in names]
    a = torch.randn(2, 8, device=NPU, requires_grad=True)
    torch_npu.npu_dropout_with_add_softmax(a, torch.randn(2, 8, device=NPU), 1.0, 0.5, 1)[2].sum().backward()
    torch.npu.synchronize()
    assert [count(n) - b for n, b in zip(names, before)] == [1, 1]
    with pytest.raises(ValueError, match="must be in \\[0, 1\\)"):
        torch_npu.npu_dropout_with_add_softmax(a, a, 1.0, 1.0, -1)
    with pytest.raises(ValueError, match="same shape"):
        torch_npu.npu_dropout_with_add_softmax(a, torch.randn(2, 4, device=NPU), 1.0, 0.1, -1)
    with pytest.raises(IndexError, match="out of range"):
        torch_npu.npu_dropout_with_add_softmax(a, a, 1.0, 0.1, 2)
