"""Fused attention: npu_fusion_attention (causal, BNSD, B=1, N=8, D=64) against PyTorch's CPU flash
attention (scaled_dot_product_attention, is_causal) on the same shapes, forward and forward+backward, and
the npu's peak device memory against one head's S x S score matrix."""

import torch
import torch.nn.functional as F

import torch_npu
from common import interleaved, row, stats

SECTION = "attention"
TARGET_RATIO = 1.25  # npu time at most 1.25x CPU SDPA's (speed >= 0.8x)
HEADS, HEAD_DIM = 8, 64


def _shapes(quick: bool) -> list:
    return [256] if quick else [2048, 8192]


def _inputs(s: int, dtype, grad: bool):
    gen = torch.Generator().manual_seed(s)
    cpu = [torch.randn(1, HEADS, s, HEAD_DIM, generator=gen).to(dtype) for _ in range(3)]
    npu = [t.to("npu") for t in cpu]
    if grad:
        cpu = [t.requires_grad_(True) for t in cpu]
        npu = [t.requires_grad_(True) for t in npu]
    return cpu, npu


def _fns(s: int, dtype, backward: bool):
    cpu, npu = _inputs(s, dtype, backward)
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1).to("npu")
    scale = HEAD_DIM ** -0.5
    grad = torch.ones(1, HEADS, s, HEAD_DIM, dtype=dtype)
    grad_npu = grad.to("npu")

    def npu_fn():
        out = torch_npu.npu_fusion_attention(*npu, HEADS, "BNSD", atten_mask=mask, scale=scale, sparse_mode=3)[0]
        if backward:
            out.backward(grad_npu)

    def cpu_fn():
        out = F.scaled_dot_product_attention(*cpu, is_causal=True, scale=scale)
        if backward:
            out.backward(grad)

    return npu_fn, cpu_fn


def _peak_bytes(s: int) -> int:
    """Device memory an fp32 forward+backward holds at its peak beyond its inputs and output gradient."""
    _, npu = _inputs(s, torch.float32, True)
    grad = torch.ones(1, HEADS, s, HEAD_DIM, device="npu")
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1).to("npu")
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    out = torch_npu.npu_fusion_attention(*npu, HEADS, "BNSD", atten_mask=mask, scale=0.125, sparse_mode=3)[0]
    out.backward(grad)
    torch.npu.synchronize()
    return torch.npu.max_memory_allocated() - base


def run(quick: bool = False) -> list:
    # Short calls vary most from sample to sample on a shared machine: more samples for S=2048.
    repeats_at = lambda s: 2 if quick else (9 if s <= 2048 else 3)  # noqa: E731
    rows = []
    for s in _shapes(quick):
        for dtype, label in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            for backward in (False, True):
                npu_fn, cpu_fn = _fns(s, dtype, backward)
                npu_fn(), cpu_fn()  # first call: allocator, one-time kernel setup
                npu, cpu = interleaved([(npu_fn, "npu", 1), (cpu_fn, "cpu", 1)], repeats_at(s))
                what = "forward+backward" if backward else "forward"
                rows.append(row(SECTION, f"causal S={s} {label} {what}: ms per call", "ms",
                                stats(t * 1e3 for t in npu), stats(t * 1e3 for t in cpu),
                                ref_label="CPU SDPA (flash)", target=TARGET_RATIO,
                                key=f"{SECTION}.s{s}_{label}_{'fwd_bwd' if backward else 'fwd'}"))
        peak = _peak_bytes(s) / 2 ** 20
        one_head = s * s * 4 / 2 ** 20
        # The target applies at long sequences: at S=2048 the outputs and gradients alone (O(S)) are
        # about one head's score matrix.
        rows.append(row(SECTION, f"causal S={s} fp32 forward+backward: peak device memory, MiB", "MiB",
                        stats([peak]), stats([one_head]), ref_label="one head's S x S fp32 scores",
                        target=1.0 if s >= 8192 else None,
                        key=f"{SECTION}.s{s}_peak_memory",
                        note="beyond the inputs; grows with S (outputs, gradients, statistics), not S^2"))
    return rows


if __name__ == "__main__":
    from run import standalone
    standalone(run)
