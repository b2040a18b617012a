"""npu_fusion_attention against a CPU reference: layouts, masks, pse, GQA, backward; dropout statistics and seeds."""

import pytest
import torch

import torch_npu
import custom_op_refs as ref
from test_custom_ops import close

NPU = "npu"
B, N, S, D = 2, 4, 5, 8


def to_layout(t, layout):
    """(B, N, S, D) -> the given layout."""
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.permute(0, 2, 1, 3).contiguous()
    if layout == "BSH":
        return t.permute(0, 2, 1, 3).flatten(2).contiguous()
    return t.permute(2, 0, 1, 3).flatten(2).contiguous()  # SBH


def qkv(n_kv=N, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, N, S, D, generator=g), torch.randn(B, n_kv, S, D, generator=g),
            torch.randn(B, n_kv, S, D, generator=g))


@pytest.mark.parametrize("layout", ["BNSD", "BSH", "BSND", "SBH"])
def test_forward_backward_layouts(layout):
    q, k, v = qkv()
    scale = D ** -0.5
    mask = torch.ones(S, S, dtype=torch.bool).triu(1)  # causal: True = masked out
    grad = torch.randn(B, N, S, D)

    cpu = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out_ref = ref.attention_bnsd(*cpu, scale, mask)
    out_ref.backward(grad)

    npu = [to_layout(t, layout).to(NPU).requires_grad_(True) for t in (q, k, v)]
    res = torch_npu.npu_fusion_attention(*npu, N, layout, atten_mask=mask.to(NPU), scale=scale)
    assert len(res) == 7 and isinstance(res[4], int)
    out = res[0]
    assert out.shape == npu[0].shape
    close(out, to_layout(out_ref.detach(), layout))
    out.backward(to_layout(grad, layout).to(NPU))
    for a, b in zip(npu, cpu):
        close(a.grad, to_layout(b.grad, layout))


def test_pse_gqa_and_half():
    q, k, v = qkv(n_kv=2, seed=1)
    pse = torch.randn(1, N, S, S)
    cpu = [t.clone().requires_grad_(True) for t in (q, k, v, pse)]
    out_ref = ref.attention_bnsd(cpu[0], cpu[1], cpu[2], 0.3, pse=cpu[3])
    out_ref.sum().backward()
    npu = [t.to(NPU).requires_grad_(True) for t in (q, k, v, pse)]
    out = torch_npu.npu_fusion_attention(npu[0], npu[1], npu[2], N, "BNSD", pse=npu[3], scale=0.3)[0]
    out.sum().backward()
    close(out, out_ref)
    for a, b in zip(npu, cpu):
        close(a.grad, b.grad)
    half = torch_npu.npu_fusion_attention(q.half().to(NPU), k.half().to(NPU), v.half().to(NPU), N, "BNSD",
                                          scale=0.3)[0]
    assert half.dtype == torch.float16
    close(half, ref.attention_bnsd(q, k, v, 0.3), torch.float16)


def test_token_band():
    q, k, v = qkv(seed=2)
    out = torch_npu.npu_fusion_attention(q.to(NPU), k.to(NPU), v.to(NPU), N, "BNSD", scale=0.5, pre_tockens=1,
                                         next_tockens=0)[0]
    i, j = torch.arange(S).view(-1, 1), torch.arange(S).view(1, -1)
    close(out, ref.attention_bnsd(q, k, v, 0.5, mask=(j > i) | (j < i - 1)))


def test_dropout_statistics_and_seed_determinism():
    q = torch.zeros(1, 1, 64, 8)
    k = torch.zeros(1, 1, 256, 8)
    v = torch.ones(1, 1, 256, 8)  # uniform attention: the output is the kept fraction / keep_prob
    torch.npu.manual_seed(7)
    out, _, _, _, seed, offset, numels = torch_npu.npu_fusion_attention(
        q.to(NPU), k.to(NPU), v.to(NPU), 1, "BNSD", keep_prob=0.8)
    assert numels == 64 * 256
    mean = out.cpu().mean().item()
    assert abs(mean - 1.0) < 0.03  # E[mask / keep_prob] = 1; 16384 Bernoulli draws
    kept = out.cpu()[0, 0, :, 0] * 0.8 * 256  # kept count per query row
    assert torch.allclose(kept, kept.round(), atol=1e-3) and kept.std() > 0
    torch.npu.manual_seed(7)
    again = torch_npu.npu_fusion_attention(q.to(NPU), k.to(NPU), v.to(NPU), 1, "BNSD", keep_prob=0.8)
    assert again[4] == seed and torch.equal(again[0].cpu(), out.cpu())
    other = torch_npu.npu_fusion_attention(q.to(NPU), k.to(NPU), v.to(NPU), 1, "BNSD", keep_prob=0.8)
    assert other[4] != seed and not torch.equal(other[0].cpu(), out.cpu())


def test_dropout_backward_uses_the_forward_mask():
    q, k, v = qkv(seed=3)
    npu = [t.to(NPU).requires_grad_(True) for t in (q, k, v)]
    out, _, _, _, seed, _, _ = torch_npu.npu_fusion_attention(*npu, N, "BNSD", scale=0.4, keep_prob=0.7)
    out.sum().backward()
    # The grad op regenerates the mask from the seed: same gradients as a direct call with that seed.
    dq, dk, dv, dpse = torch_npu.npu_fusion_attention_grad(
        *[t.detach() for t in npu], torch.ones_like(out), N, "BNSD", scale_value=0.4, keep_prob=0.7, seed=seed)
    assert dpse is None
    for a, b in zip((dq, dk, dv), npu):
        close(a, b.grad)


def test_bad_arguments():
    q, k, v = (t.to(NPU) for t in qkv())
    with pytest.raises(ValueError, match="input_layout"):
        torch_npu.npu_fusion_attention(q, k, v, N, "NSBD")
    with pytest.raises(ValueError, match="head_num"):
        torch_npu.npu_fusion_attention(q, k, v, N + 1, "BNSD")
    with pytest.raises(ValueError, match="sparse_mode"):
        torch_npu.npu_fusion_attention(q, k, v, N, "BNSD", sparse_mode=2)
