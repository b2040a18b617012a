"""Paged KV caches: npu_scatter_pa_kv_cache writes tokens into their slots (ND and fractal NZ caches, padding
slots skipped) and npu_gather_pa_kv_cache reads sequences back through block tables, against plain
indexing on CPU; their functional forms, Meta kernels and device ops."""

import pytest
import torch

import torch_npu

NPU = "npu"


def nz_rows(cache):
    """[blocks, H / C, bs, C] -> [blocks * bs, H]: each slot's hidden values."""
    return cache.permute(0, 2, 1, 3).flatten(2).flatten(0, 1)


@pytest.mark.parametrize("mode", ["Norm", "PA_NZ"])
def test_scatter_then_gather_round_trip(mode):
    g = torch.Generator().manual_seed(0)
    blocks, bs, n, d = 6, 4, 2, 16  # NZ: two groups of 16 per token
    tokens = 9
    key, value = torch.randn(tokens, n, d, generator=g), torch.randn(tokens, n, d, generator=g)
    slots = torch.randperm(blocks * bs, generator=g)[:tokens]
    slots[3] = -1  # a padding token: no slot
    shape = (blocks, bs, n, d) if mode == "Norm" else (blocks, n * d // 16, bs, 16)
    k_cache, v_cache = torch.zeros(shape), torch.zeros(shape)
    kc, vc = k_cache.npu(), v_cache.npu()
    torch_npu.npu_scatter_pa_kv_cache(key.npu(), value.npu(), kc, vc, slots.to(torch.int32).npu(), cache_mode=mode)
    rows = (lambda c: c.flatten(2).flatten(0, 1)) if mode == "Norm" else nz_rows
    expect_k, expect_v = rows(k_cache).clone(), rows(v_cache).clone()
    for t, s in enumerate(slots.tolist()):
        if s >= 0:
            expect_k[s], expect_v[s] = key[t].flatten(), value[t].flatten()
    assert torch.equal(rows(kc.cpu()), expect_k) and torch.equal(rows(vc.cpu()), expect_v)
    # The functional form leaves its inputs alone.
    k2, v2 = torch_npu.npu_scatter_pa_kv_cache_functional(key.npu(), value.npu(), torch.zeros(shape).npu(),
                                                          torch.zeros(shape).npu(), slots.npu(), cache_mode=mode)
    assert torch.equal(rows(k2.cpu()), expect_k)
    if mode == "Norm":
        # Gather two sequences back through a block table (lengths 5 and 3, cumulative form too).
        table = torch.tensor([[2, 0], [5, 1]], dtype=torch.int32)
        lens = torch.tensor([5, 3], dtype=torch.int32)
        out_k, out_v = torch.zeros(8, n, d).npu(), torch.zeros(8, n, d).npu()
        torch_npu.npu_gather_pa_kv_cache(kc, vc, table.npu(), lens.npu(), out_k, out_v)
        flat = kc.cpu().flatten(0, 1)  # [slots, n, d]
        want = torch.cat([flat[[2 * bs + j if j < bs else 0 * bs + j - bs for j in range(5)]],
                          flat[[5 * bs + j for j in range(3)]]])
        assert torch.equal(out_k.cpu(), want)
        cum_k, _ = torch_npu.npu_gather_pa_kv_cache_functional(kc, vc, table.npu(), torch.tensor([0, 5, 8]).npu(),
                                                               torch.zeros(8, n, d).npu(), torch.zeros(8, n, d).npu(),
                                                               is_seq_lens_cumsum=True)
        assert torch.equal(cum_k.cpu(), want)


def test_gather_offsets_past_the_table_and_errors():
    kc = torch.arange(4 * 2 * 1 * 2, dtype=torch.float32).view(4, 2, 1, 2).npu()
    out_k, out_v = torch.full((5, 1, 2), 7.0).npu(), torch.full((5, 1, 2), 7.0).npu()
    # Sequence 0 starts at block 1 of its table (offset 2 = one block of 2): blocks 3 then past the table.
    torch_npu.npu_gather_pa_kv_cache(kc, kc, torch.tensor([[0, 3]], dtype=torch.int32).npu(),
                                     torch.tensor([4]).npu(), out_k, out_v, seq_offset=torch.tensor([2]).npu())
    flat = kc.cpu().flatten(0, 1)
    assert torch.equal(out_k.cpu()[:2], flat[6:8]) and out_k.cpu()[2:4].abs().sum() == 0
    assert torch.equal(out_k.cpu()[4], torch.full((1, 2), 7.0))  # rows past the sequences are left alone
    with pytest.raises(RuntimeError, match="past the cache"):
        torch_npu.npu_scatter_pa_kv_cache(torch.ones(1, 1, 2).npu(), torch.ones(1, 1, 2).npu(), kc, kc.clone(),
                                          torch.tensor([99]).npu(), cache_mode="Norm")
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="values per token"):
        torch_npu.npu_scatter_pa_kv_cache(torch.ones(1, 1, 2).npu(), torch.ones(1, 1, 2).npu(), kc, kc.clone(),
                                          torch.tensor([1]).npu())  # default PA_NZ against an ND cache
    with pytest.raises(ValueError, match="cache_mode"):
        torch_npu.npu_scatter_pa_kv_cache(torch.ones(1, 1, 2).npu(), torch.ones(1, 1, 2).npu(), kc, kc.clone(),
                                          torch.tensor([1]).npu(), cache_mode="Paged")


def test_meta_and_device_ops():
    m = lambda *s: torch.empty(*s, device="meta")  # noqa: E731
    k, v = torch.ops.npu.npu_scatter_pa_kv_cache_functional(m(2, 1, 2), m(2, 1, 2), m(4, 2, 1, 2), m(4, 2, 1, 2),
                                                            m(2), cache_mode="Norm")
    assert k.shape == (4, 2, 1, 2)
    count = lambda name: torch.npu.op_stats().get(name, {}).get("device_op", 0)  # noqa: E731
    before = [count("aclnnScatterPaKvCache"), count("aclnnGatherPaKvCache")]
    kc = torch.zeros(4, 2, 1, 2).npu()
    torch_npu.npu_scatter_pa_kv_cache(torch.ones(1, 1, 2).npu(), torch.ones(1, 1, 2).npu(), kc, kc.clone(),
                                      torch.tensor([1]).npu(), cache_mode="Norm")
    torch_npu.npu_gather_pa_kv_cache(kc, kc, torch.tensor([[0]]).npu(), torch.tensor([1]).npu(),
                                     torch.zeros(1, 1, 2).npu(), torch.zeros(1, 1, 2).npu())
    torch.npu.synchronize()
    assert [count("aclnnScatterPaKvCache") - before[0], count("aclnnGatherPaKvCache") - before[1]] == [1, 1]
