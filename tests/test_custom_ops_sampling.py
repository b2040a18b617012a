"""npu_top_k_top_p against the documented filtering written row by row on CPU (k only, p only, both; ties;
float16 / bfloat16), with a Meta kernel and its device op."""

import pytest
import torch

import torch_npu


def reference_row(row, p=None, k=None):
    row = row.float()
    out = row.clone()
    if k is not None:
        kth = torch.sort(row).values[row.numel() - k]  # the k-th largest value; ties stay
        out[row < kth] = float("-inf")
    if p is not None:
        order = torch.sort(out, stable=True).indices
        probs = torch.softmax(out[order], -1)
        cumulative = torch.cumsum(probs, -1)
        drop = cumulative <= 1 - p
        drop[-1] = False
        out[order[drop]] = float("-inf")
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_top_k_top_p(dtype):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 50, generator=g).to(dtype)
    logits[1, :5] = logits[1, 10]  # ties with the k-th value
    k = torch.tensor([1, 7, 50, 20], dtype=torch.int32)
    p = torch.tensor([0.9, 0.5, 0.1, 1.0]).to(dtype)
    for kw in ({"k": k}, {"p": p}, {"k": k, "p": p}):
        out = torch_npu.npu_top_k_top_p(logits.npu(), **{n: t.npu() for n, t in kw.items()})
        assert out.dtype == dtype
        for b in range(4):
            expect = reference_row(logits[b], p=float(kw["p"][b]) if "p" in kw else None,
                                   k=int(kw["k"][b]) if "k" in kw else None)
            kept = torch.isfinite(expect)
            assert torch.equal(torch.isfinite(out[b].cpu().float()), kept), (kw.keys(), b)
            assert torch.equal(out[b].cpu().float()[kept], logits[b].float()[kept])


def test_meta_errors_and_device_op():
    assert torch.ops.npu.npu_top_k_top_p(torch.empty(2, 9, device="meta")).shape == (2, 9)
    with pytest.raises(RuntimeError, match="every k"):
        torch_npu.npu_top_k_top_p(torch.randn(1, 4).npu(), k=torch.tensor([5], dtype=torch.int32).npu()).cpu()
    with pytest.raises(ValueError, match="2-D"):
        torch_npu.npu_top_k_top_p(torch.randn(4).npu())
    before = torch.npu.op_stats().get("aclnnApplyTopKTopP", {}).get("device_op", 0)
    torch_npu.npu_top_k_top_p(torch.randn(1, 4).npu(), p=torch.tensor([0.5]).npu())
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnApplyTopKTopP"]["device_op"] == before + 1
