"""npu_fused_floyd_attention and its backward against a CPU reference from the documented formula: outputs and
softmax statistics, gradients vs CPU autograd of the reference, masks, the Meta kernels, device-op counters and
argument errors."""

import pytest
import torch

import torch_npu
from op_refs import floyd_attention as ref

B, H, N, M, K, D = 1, 2, 4, 8, 6, 16
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2),
       torch.bfloat16: dict(rtol=4e-2, atol=4e-2)}


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def inputs(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(B, H, N, M, D), (B, H, N, K, D), (B, H, N, K, D), (B, H, K, M, D), (B, H, K, M, D)]
    return [(torch.randn(s, generator=g) * 0.5).to(dtype) for s in shapes]


def masks():
    g = torch.Generator().manual_seed(7)
    mask = torch.rand(B, 1, N, 1, K, generator=g) < 0.3
    mask[..., 0] = False  # every row keeps a pivot
    return mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("masked", [False, True])
def test_forward_and_grads(dtype, masked):
    q, k1, v1, k2, v2 = inputs(dtype)
    mask = masks() if masked else None
    leaves = [t.npu().requires_grad_() for t in (q, k1, v1, k2, v2)]
    fwd, bwd = device_op_count("aclnnFusedFloydAttention"), device_op_count("aclnnFusedFloydAttentionGrad")
    smax, ssum, out = torch_npu.npu_fused_floyd_attention(*leaves, atten_mask=None if mask is None else mask.npu(),
                                                          scale_value=0.25)
    cpu = [t.float().requires_grad_() for t in (q, k1, v1, k2, v2)]
    want_max, want_sum, want = ref.floyd_attention(*cpu, mask=mask, scale=0.25)
    assert out.dtype == dtype and smax.dtype == torch.float32 and smax.shape == (B, H, N, M, 8)
    torch.testing.assert_close(out.cpu().float(), want.detach(), **TOL[dtype])
    torch.testing.assert_close(smax.cpu(), want_max.detach(), **TOL[dtype])
    torch.testing.assert_close(ssum.cpu(), want_sum.detach(), **TOL[dtype])
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    out.backward(grad.npu())
    want.backward(grad.float())
    for got, exp in zip(leaves, cpu):
        torch.testing.assert_close(got.grad.cpu().float(), exp.grad, **TOL[dtype])
    assert device_op_count("aclnnFusedFloydAttention") == fwd + 1
    assert device_op_count("aclnnFusedFloydAttentionGrad") == bwd + 1


def test_statistics_are_not_differentiable():
    leaves = [t.npu().requires_grad_() for t in inputs(torch.float32)]
    smax, ssum, out = torch_npu.npu_fused_floyd_attention(*leaves)
    assert out.requires_grad and not smax.requires_grad and not ssum.requires_grad


def test_backward_op_directly():
    q, k1, v1, k2, v2 = inputs(torch.float32)
    dev = [t.npu() for t in (q, k1, v1, k2, v2)]
    smax, ssum, out = torch_npu.npu_fused_floyd_attention(*dev, scale_value=0.5)
    grad = torch.randn(out.shape)
    grads = torch_npu.npu_fused_floyd_attention_backward(grad.npu(), *dev, out, smax, ssum, scale_value=0.5)
    cpu = [t.requires_grad_() for t in (q, k1, v1, k2, v2)]
    ref.floyd_attention(*cpu, scale=0.5)[2].backward(grad)
    for got, exp in zip(grads, cpu):
        torch.testing.assert_close(got.cpu(), exp.grad, rtol=1e-4, atol=1e-4)


def test_meta():
    meta = [t.to("meta") for t in inputs(torch.float16)]
    smax, ssum, out = torch_npu.npu_fused_floyd_attention(*meta)
    assert out.device.type == "meta" and out.shape == (B, H, N, M, D) and out.dtype == torch.float16
    assert smax.shape == ssum.shape == (B, H, N, M, 8) and smax.dtype == torch.float32
    grads = torch_npu.npu_fused_floyd_attention_backward(meta[0], *meta, meta[0], smax, ssum)
    assert [g.shape for g in grads] == [t.shape for t in meta]


def test_errors():
    q, k1, v1, k2, v2 = (t.npu() for t in inputs(torch.float32))
    with pytest.raises(ValueError, match="5-D"):
        torch_npu.npu_fused_floyd_attention(q[0], k1, v1, k2, v2)
    with pytest.raises(TypeError, match="query_ik's dtype"):
        torch_npu.npu_fused_floyd_attention(q, k1.half(), v1, k2, v2)
    with pytest.raises(ValueError, match="key_jk must be"):
        torch_npu.npu_fused_floyd_attention(q, k1, v1, k2[:, :, :3], v2[:, :, :3])
    with pytest.raises(ValueError, match=r"atten_mask must be \[B, 1, N, 1, K\]"):
        torch_npu.npu_fused_floyd_attention(q, k1, v1, k2, v2, atten_mask=torch.zeros(B, N, K, dtype=torch.bool).npu())
    with pytest.raises(TypeError, match="bool or uint8"):
        torch_npu.npu_fused_floyd_attention(q, k1, v1, k2, v2, atten_mask=torch.zeros(B, 1, N, 1, K).npu())
