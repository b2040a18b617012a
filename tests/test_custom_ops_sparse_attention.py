"""npu_lightning_indexer and npu_sparse_flash_attention against CPU references written row by row from the
documented definitions (BSND / TND / PA_BSND layouts, causal and plain masks, sinks, MLA rope), with Meta shapes,
device-op counters and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import sparse_attention as ref

HALF_TYPES = [torch.float16, torch.bfloat16]
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5}


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _to_blocks(per_batch_tokens, table, block_size):
    """Places [B, S, ...] tokens into the PA blocks named by table ([B, blocks per batch])."""
    b, s = per_batch_tokens.shape[:2]
    blocks = torch.zeros((table.numel(), block_size) + tuple(per_batch_tokens.shape[2:]),
                         dtype=per_batch_tokens.dtype)
    for i in range(b):
        for j in range(table.shape[1]):
            piece = per_batch_tokens[i, j * block_size:(j + 1) * block_size]
            blocks[int(table[i, j]), :piece.shape[0]] = piece
    return blocks


def _paged(key_bsnd, lengths, block_size, generator):
    """Scatters BSND keys into shuffled PA_BSND blocks; returns (blocks, block_table)."""
    b, s = key_bsnd.shape[:2]
    per_batch = (s + block_size - 1) // block_size
    table = torch.randperm(b * per_batch, generator=generator).view(b, per_batch).to(torch.int32)
    return _to_blocks(key_bsnd, table, block_size), table


def _npu(t):
    return None if t is None else t.npu()


# ------------------------------------------------------------------------------------------ lightning indexer

def _check_indexer(query, key, weights, npu_idx, npu_val, sparse_count, sparse_mode, dtype, **kw):
    """Invalid slots must match exactly; valid slots must hold distinct keys whose reference scores are the
    reference top scores (robust to order swaps between scores equal up to rounding)."""
    expect_idx, expect_val = ref.lightning_indexer(query, key, weights, sparse_count=sparse_count,
                                                   sparse_mode=sparse_mode, **kw)
    assert npu_idx.dtype == torch.int32 and npu_idx.shape == expect_idx.shape
    assert torch.equal(npu_idx < 0, expect_idx < 0)
    layout_q = kw.get("layout_query", "BSND")
    for span in ref.query_spans(query, layout_q, kw.get("actual_seq_lengths_query")):
        scores = ref.indexer_score_rows(query, key, weights, span, kw.get("actual_seq_lengths_key"),
                                        kw.get("block_table"), layout_q, kw.get("layout_key", "BSND"))
        got = ref.query_rows(npu_idx, layout_q, span).long()
        want = ref.query_rows(expect_val, layout_q, span)
        valid = got >= 0
        picked = scores.gather(-1, got.clamp(min=0))
        torch.testing.assert_close(picked[valid], want[valid], rtol=1e-4, atol=1e-3)
        for row in got.reshape(-1, got.shape[-1]):
            kept = row[row >= 0]
            assert kept.unique().numel() == kept.numel()
        if npu_val is not None:
            got_val = ref.query_rows(npu_val, layout_q, span).float()
            assert torch.equal(torch.isinf(got_val), ~valid)
            torch.testing.assert_close(got_val[valid], want[valid], rtol=TOL[dtype], atol=TOL[dtype] * 8)


@pytest.mark.parametrize("dtype", HALF_TYPES)
@pytest.mark.parametrize("sparse_mode", [0, 3])
def test_lightning_indexer_bsnd(dtype, sparse_mode):
    g = _gen(1)
    query = torch.randn(2, 3, 4, 16, generator=g).to(dtype)
    key = torch.randn(2, 10, 1, 16, generator=g).to(dtype)
    weights = torch.randn(2, 3, 4, generator=g).to(dtype)
    act_q = torch.tensor([3, 2], dtype=torch.int32)
    act_k = torch.tensor([10, 7], dtype=torch.int32)
    idx, val = torch_npu.npu_lightning_indexer(query.npu(), key.npu(), weights.npu(),
                                               actual_seq_lengths_query=act_q.npu(),
                                               actual_seq_lengths_key=act_k.npu(), sparse_count=6,
                                               sparse_mode=sparse_mode, return_value=True)
    assert val.dtype == dtype and val.shape == (2, 3, 1, 6)
    _check_indexer(query, key, weights, idx.cpu(), val.cpu(), 6, sparse_mode, dtype,
                   actual_seq_lengths_query=act_q, actual_seq_lengths_key=act_k)


def test_lightning_indexer_more_slots_than_keys_and_float32_weights():
    g = _gen(2)
    query = torch.randn(1, 4, 2, 8, generator=g).half()
    key = torch.randn(1, 5, 1, 8, generator=g).half()
    weights = torch.randn(1, 4, 2, generator=g)  # float32 weights are accepted with half query/key
    idx, val = torch_npu.npu_lightning_indexer(query.npu(), key.npu(), weights.npu(), sparse_count=8)
    assert val.numel() == 0  # return_value=False leaves an empty placeholder
    idx = idx.cpu()
    _check_indexer(query, key, weights, idx, None, 8, 3, torch.float16)
    # causal from the bottom-right corner: row i sees i + 2 keys, everything past is -1
    assert (idx[0, :, 0] >= 0).sum(-1).tolist() == [2, 3, 4, 5]


@pytest.mark.parametrize("dtype", HALF_TYPES)
def test_lightning_indexer_tnd_query_paged_key(dtype):
    g = _gen(3)
    lengths_q = [2, 1, 3]
    lengths_k = [20, 5, 33]
    query = torch.randn(sum(lengths_q), 8, 16, generator=g).to(dtype)
    weights = torch.randn(sum(lengths_q), 8, generator=g).to(dtype)
    key_bsnd = torch.randn(3, 33, 1, 16, generator=g).to(dtype)
    blocks, table = _paged(key_bsnd, lengths_k, 16, g)
    act_q = torch.tensor([2, 3, 6], dtype=torch.int32)  # prefix sums for TND
    act_k = torch.tensor(lengths_k, dtype=torch.int32)
    idx, val = torch_npu.npu_lightning_indexer(query.npu(), blocks.npu(), weights.npu(),
                                               actual_seq_lengths_query=act_q.npu(), actual_seq_lengths_key=act_k.npu(),
                                               block_table=table.npu(), layout_query="TND", layout_key="PA_BSND",
                                               sparse_count=7)
    assert idx.shape == (6, 1, 7)
    _check_indexer(query, blocks, weights, idx.cpu(), None, 7, 3, dtype, actual_seq_lengths_query=act_q,
                   actual_seq_lengths_key=act_k, block_table=table, layout_query="TND", layout_key="PA_BSND")


def test_lightning_indexer_meta_device_op_and_errors():
    meta = dict(device="meta")
    idx, val = torch.ops.npu.npu_lightning_indexer(torch.empty(2, 3, 8, 16, dtype=torch.float16, **meta),
                                                   torch.empty(2, 9, 1, 16, dtype=torch.float16, **meta),
                                                   torch.empty(2, 3, 8, dtype=torch.float16, **meta),
                                                   sparse_count=4, return_value=True)
    assert idx.shape == (2, 3, 1, 4) and idx.dtype == torch.int32 and val.shape == (2, 3, 1, 4)
    idx, _ = torch.ops.npu.npu_lightning_indexer(torch.empty(5, 8, 16, dtype=torch.bfloat16, **meta),
                                                 torch.empty(7, 1, 16, dtype=torch.bfloat16, **meta),
                                                 torch.empty(5, 8, dtype=torch.bfloat16, **meta),
                                                 layout_query="TND", layout_key="TND", sparse_count=3)
    assert idx.shape == (5, 1, 3)
    q, k = torch.randn(1, 2, 2, 8).half().npu(), torch.randn(1, 4, 1, 8).half().npu()
    w = torch.randn(1, 2, 2).half().npu()
    before = torch.npu.op_stats().get("aclnnLightningIndexer", {}).get("device_op", 0)
    torch_npu.npu_lightning_indexer(q, k, w, sparse_count=2)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnLightningIndexer"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="sparse_mode must be 0 or 3"):
        torch_npu.npu_lightning_indexer(q, k, w, sparse_mode=1)
    with pytest.raises(ValueError, match="layout_query must be BSND"):
        torch_npu.npu_lightning_indexer(q, k, w, layout_query="BNSD")
    with pytest.raises(ValueError, match="needs block_table"):
        torch_npu.npu_lightning_indexer(q, k, w, layout_key="PA_BSND",
                                        actual_seq_lengths_key=torch.tensor([4], dtype=torch.int32).npu())
    with pytest.raises(TypeError, match="key dtype"):
        torch_npu.npu_lightning_indexer(q, k.float(), w)


# ------------------------------------------------------------------------------------------ sparse flash attention

def _random_indices(sq_shape, kv_heads, blocks_per_row, total_blocks, generator):
    """Distinct block ids per row, valid ones first and -1 padding after a random cut."""
    rows = int(torch.tensor(sq_shape).prod()) * kv_heads
    out = torch.full((rows, blocks_per_row), -1, dtype=torch.int32)
    for r in range(rows):
        take = int(torch.randint(1, blocks_per_row + 1, (1,), generator=generator))
        out[r, :take] = torch.randperm(total_blocks, generator=generator)[:take].to(torch.int32)
    return out.view(*sq_shape, kv_heads, blocks_per_row)


def _check_attention(result, expect, dtype, with_lse):
    out, smax, ssum = result
    want_out, want_max, want_sum = expect
    assert out.dtype == dtype and out.shape == want_out.shape
    torch.testing.assert_close(out.cpu().float(), want_out, rtol=TOL[dtype] * 4, atol=TOL[dtype] * 4)
    if with_lse:
        assert smax.dtype == torch.float32 and smax.shape == want_max.shape
        torch.testing.assert_close(smax.cpu(), want_max, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(ssum.cpu(), want_sum, rtol=1e-4, atol=1e-4)
    else:
        assert smax.numel() == 0 and ssum.numel() == 0


@pytest.mark.parametrize("dtype", HALF_TYPES)
@pytest.mark.parametrize("sparse_mode", [0, 3])
@pytest.mark.parametrize("block", [1, 4])
def test_sparse_flash_attention_bsnd(dtype, sparse_mode, block):
    g = _gen(10)
    b, s1, s2, n1, n2, d = 2, 3, 13, 4, 2, 16
    query = torch.randn(b, s1, n1, d, generator=g).to(dtype)
    key = torch.randn(b, s2, n2, d, generator=g).to(dtype)
    value = torch.randn(b, s2, n2, d, generator=g).to(dtype)
    total_blocks = (s2 + block - 1) // block
    indices = _random_indices((b, s1), n2, min(5, total_blocks), total_blocks, g)
    act_kv = torch.tensor([13, 9], dtype=torch.int32)
    indices[1][indices[1] >= (9 + block - 1) // block] = 0  # keep batch 1 inside its kv length
    scale = d ** -0.5
    result = torch_npu.npu_sparse_flash_attention(query.npu(), key.npu(), value.npu(), indices.npu(), scale,
                                                  actual_seq_lengths_kv=act_kv.npu(), sparse_block_size=block,
                                                  sparse_mode=sparse_mode, return_softmax_lse=True)
    expect = ref.sparse_flash_attention(query, key, value, indices, scale, actual_seq_lengths_kv=act_kv,
                                        sparse_block_size=block, sparse_mode=sparse_mode)
    _check_attention(result, expect, dtype, True)


def test_sparse_flash_attention_matches_dense_attention_when_all_keys_selected():
    # independent cross-check: selecting every key with no mask is ordinary softmax attention
    g = _gen(11)
    query = torch.randn(1, 4, 2, 8, generator=g)
    key = torch.randn(1, 6, 1, 8, generator=g)
    value = torch.randn(1, 6, 1, 8, generator=g)
    indices = torch.arange(6, dtype=torch.int32).expand(1, 4, 1, 6).contiguous()
    out, _, _ = torch_npu.npu_sparse_flash_attention(query.half().npu(), key.half().npu(), value.half().npu(),
                                                     indices.npu(), 0.25, sparse_mode=0)
    q, k, v = query.half().float(), key.half().float(), value.half().float()
    probs = torch.softmax(torch.einsum("bsnd,btd->bnst", q, k[:, :, 0]) * 0.25, -1)
    dense = torch.einsum("bnst,btd->bsnd", probs, v[:, :, 0])
    torch.testing.assert_close(out.cpu().float(), dense, rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("dtype", HALF_TYPES)
def test_sparse_flash_attention_tnd_mla_rope_and_sinks(dtype):
    g = _gen(12)
    lengths_q, lengths_kv = [2, 3], [7, 12]
    n1, d, dr = 4, 16, 8
    query = torch.randn(5, n1, d, generator=g).to(dtype)
    query_rope = torch.randn(5, n1, dr, generator=g).to(dtype)
    key = torch.randn(19, 1, d, generator=g).to(dtype)
    key_rope = torch.randn(19, 1, dr, generator=g).to(dtype)
    act_q = torch.tensor([2, 5], dtype=torch.int32)
    act_kv = torch.tensor([7, 19], dtype=torch.int32)
    indices = _random_indices((5,), 1, 4, 7, g)  # blocks of 2 cover at most 14 tokens; batch 0 has 7
    indices[indices >= 4] = 1
    sinks = torch.randn(n1, generator=g)
    result = torch_npu.npu_sparse_flash_attention(
        query.npu(), key.npu(), key.npu(), indices.npu(), 0.2, actual_seq_lengths_query=act_q.npu(),
        actual_seq_lengths_kv=act_kv.npu(), query_rope=query_rope.npu(), key_rope=key_rope.npu(), sparse_block_size=2,
        layout_query="TND", layout_kv="TND", attention_mode=2, return_softmax_lse=True, sinks=sinks.npu())
    expect = ref.sparse_flash_attention(query, key, key, indices, 0.2, actual_seq_lengths_query=act_q,
                                        actual_seq_lengths_kv=act_kv, query_rope=query_rope, key_rope=key_rope,
                                        sparse_block_size=2, layout_query="TND", layout_kv="TND", sinks=sinks)
    assert result[1].shape == (1, 5, n1)
    _check_attention(result, expect, dtype, True)


def test_sparse_flash_attention_paged_kv():
    g = _gen(13)
    dtype = torch.bfloat16
    lengths_kv = [40, 17]
    query = torch.randn(2, 2, 4, 16, generator=g).to(dtype)
    kv_bsnd = torch.randn(2, 40, 1, 16, generator=g).to(dtype)
    blocks, table = _paged(kv_bsnd, lengths_kv, 16, g)
    act_kv = torch.tensor(lengths_kv, dtype=torch.int32)
    indices = _random_indices((2, 2), 1, 6, 17, g)
    indices[1][indices[1] >= 17] = 0
    result = torch_npu.npu_sparse_flash_attention(query.npu(), blocks.npu(), blocks.npu(), indices.npu(), 0.25,
                                                  block_table=table.npu(), actual_seq_lengths_kv=act_kv.npu(),
                                                  layout_kv="PA_BSND")
    expect = ref.sparse_flash_attention(query, blocks, blocks, indices, 0.25, block_table=table,
                                        actual_seq_lengths_kv=act_kv, layout_kv="PA_BSND")
    _check_attention(result, expect, dtype, False)


def test_sparse_flash_attention_meta_device_ops_and_errors():
    meta = dict(device="meta", dtype=torch.float16)
    out, smax, ssum = torch.ops.npu.npu_sparse_flash_attention(
        torch.empty(2, 3, 8, 16, **meta), torch.empty(2, 9, 2, 16, **meta), torch.empty(2, 9, 2, 16, **meta),
        torch.empty(2, 3, 2, 4, device="meta", dtype=torch.int32), 0.5, return_softmax_lse=True)
    assert out.shape == (2, 3, 8, 16) and smax.shape == (2, 2, 3, 4) and ssum.dtype == torch.float32
    q = torch.randn(1, 2, 2, 8).half().npu()
    kv = torch.randn(1, 4, 1, 8).half().npu()
    idx = torch.zeros(1, 2, 1, 2, dtype=torch.int32).npu()
    stats = torch.npu.op_stats()
    before = stats.get("aclnnSparseFlashAttention", {}).get("device_op", 0)
    before_v2 = stats.get("aclnnSparseFlashAttentionV2", {}).get("device_op", 0)
    torch_npu.npu_sparse_flash_attention(q, kv, kv, idx, 1.0)
    torch_npu.npu_sparse_flash_attention(q, kv, kv, idx, 1.0, sinks=torch.zeros(2).npu())
    torch.npu.synchronize()
    stats = torch.npu.op_stats()
    assert stats["aclnnSparseFlashAttention"]["device_op"] == before + 1
    assert stats["aclnnSparseFlashAttentionV2"]["device_op"] == before_v2 + 1
    with pytest.raises(ValueError, match="sparse_block_size must be positive"):
        torch_npu.npu_sparse_flash_attention(q, kv, kv, idx, 1.0, sparse_block_size=0)
    with pytest.raises(ValueError, match="query_rope and key_rope"):
        torch_npu.npu_sparse_flash_attention(q, kv, kv, idx, 1.0, query_rope=q)
    with pytest.raises(TypeError, match="sparse_indices must be int32"):
        torch_npu.npu_sparse_flash_attention(q, kv, kv, idx.float(), 1.0)
    with pytest.raises(TypeError, match="sinks must be float32"):
        torch_npu.npu_sparse_flash_attention(q, kv, kv, idx, 1.0, sinks=torch.zeros(2).half().npu())


# ------------------------------------------------------------------------------------------ gather sparse index

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8, torch.bool])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_gather_sparse_index(dtype, index_dtype):
    g = _gen(20)
    source = (torch.randn(7, 3, 5, generator=g) * 10).to(dtype)
    index = torch.randint(0, 7, (2, 4), generator=g).to(index_dtype)
    out = torch_npu.npu_gather_sparse_index(source.npu(), index.npu())
    assert out.dtype == dtype and out.shape == (2, 4, 3, 5)
    assert torch.equal(out.cpu(), ref.gather_sparse_index(source, index))
    vector = torch_npu.npu_gather_sparse_index(source[:, 0, 0].contiguous().npu(), index[0].npu())
    assert torch.equal(vector.cpu(), ref.gather_sparse_index(source[:, 0, 0].contiguous(), index[0]))


def test_gather_sparse_index_backward_sums_repeated_rows():
    g = _gen(21)
    source = torch.randn(5, 4, generator=g)
    index = torch.tensor([[0, 3, 3], [1, 0, 3]])
    upstream = torch.randn(2, 3, 4, generator=g)
    cpu_source = source.clone().requires_grad_()
    ref.gather_sparse_index(cpu_source, index).backward(upstream)
    npu_source = source.npu().requires_grad_()
    torch_npu.npu_gather_sparse_index(npu_source, index.npu()).backward(upstream.npu())
    torch.testing.assert_close(npu_source.grad.cpu(), cpu_source.grad)


def test_gather_sparse_index_meta_device_op_and_errors():
    out = torch.ops.npu.npu_gather_sparse_index(torch.empty(16, 32, device="meta"),
                                                torch.empty(2, 3, dtype=torch.long, device="meta"))
    assert out.shape == (2, 3, 32)
    source = torch.randn(4, 2).npu()
    before = torch.npu.op_stats().get("aclnnGatherV3", {}).get("device_op", 0)
    torch_npu.npu_gather_sparse_index(source, torch.tensor([1, 2]).npu())
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnGatherV3"]["device_op"] == before + 1
    with pytest.raises(TypeError, match="index must be int32 or int64"):
        torch_npu.npu_gather_sparse_index(source, torch.tensor([1.0]).npu())
    with pytest.raises(ValueError, match="must be at most 8"):
        torch_npu.npu_gather_sparse_index(torch.randn(2, 1, 1, 1, 1).npu(),
                                          torch.zeros(1, 1, 1, 1, 1, dtype=torch.long).npu())
    with pytest.raises(RuntimeError, match="index values must be in"):
        torch_npu.npu_gather_sparse_index(source, torch.tensor([4]).npu()).cpu()


# ------------------------------------------------------------------------------------------ quant lightning indexer

@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("paged", [False, True])
def test_quant_lightning_indexer(scale_dtype, paged):
    g = _gen(30)
    b, s1, s2, n1, d = 2, 3, 20, 4, 16
    query = torch.randint(-127, 128, (b, s1, n1, d), generator=g, dtype=torch.int8)
    key = torch.randint(-127, 128, (b, s2, 1, d), generator=g, dtype=torch.int8)
    weights = torch.randn(b, s1, n1, generator=g).half()
    q_scale = (torch.rand(b, s1, n1, generator=g) * 0.02).to(scale_dtype)
    k_scale = (torch.rand(b, s2, 1, generator=g) * 0.02).to(scale_dtype)
    act_k = torch.tensor([20, 11], dtype=torch.int32)
    kw = dict(actual_seq_lengths_key=act_k)
    if paged:
        key, table = _paged(key, [20, 11], 16, g)
        k_scale = _to_blocks(k_scale, table, 16)  # the scales follow their keys into the same blocks
        kw.update(block_table=table, layout_key="PA_BSND")
    npu_kw = {name: (t.npu() if isinstance(t, torch.Tensor) else t) for name, t in kw.items()}
    idx = torch_npu.npu_quant_lightning_indexer(query.npu(), key.npu(), weights.npu(), q_scale.npu(), k_scale.npu(),
                                                0, 0, sparse_count=8, **npu_kw).cpu()
    expect = ref.quant_lightning_indexer(query, key, weights, q_scale, k_scale, sparse_count=8, **kw)
    assert idx.dtype == torch.int32 and idx.shape == (b, s1, 1, 8)
    assert torch.equal(idx < 0, expect < 0)
    q = query.float() * q_scale.float().unsqueeze(-1)
    k = key.float() * k_scale.float().unsqueeze(-1)
    for span in ref.query_spans(q, "BSND", None):
        scores = ref.indexer_score_rows(q, k, weights, span, act_k, kw.get("block_table"), "BSND",
                                        kw.get("layout_key", "BSND"))
        got, want = idx[span[0]].long(), expect[span[0]].long()
        valid = got >= 0
        torch.testing.assert_close(scores.gather(-1, got.clamp(min=0))[valid],
                                   scores.gather(-1, want.clamp(min=0))[valid], rtol=1e-4, atol=1e-4)


def test_quant_lightning_indexer_meta_device_op_and_errors():
    meta = dict(device="meta")
    out = torch.ops.npu.npu_quant_lightning_indexer(
        torch.empty(2, 3, 4, 16, dtype=torch.int8, **meta), torch.empty(2, 9, 1, 16, dtype=torch.int8, **meta),
        torch.empty(2, 3, 4, dtype=torch.float16, **meta), torch.empty(2, 3, 4, dtype=torch.float16, **meta),
        torch.empty(2, 9, 1, dtype=torch.float16, **meta), 0, 0, sparse_count=5)
    assert out.shape == (2, 3, 1, 5) and out.dtype == torch.int32
    q = torch.ones(1, 2, 2, 8, dtype=torch.int8).npu()
    k = torch.ones(1, 4, 1, 8, dtype=torch.int8).npu()
    w = torch.ones(1, 2, 2).half().npu()
    qs, ks = torch.ones(1, 2, 2).half().npu(), torch.ones(1, 4, 1).half().npu()
    before = torch.npu.op_stats().get("aclnnQuantLightningIndexer", {}).get("device_op", 0)
    torch_npu.npu_quant_lightning_indexer(q, k, w, qs, ks, 0, 0, sparse_count=2)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnQuantLightningIndexer"]["device_op"] == before + 1
    with pytest.raises(TypeError, match="must be int8"):
        torch_npu.npu_quant_lightning_indexer(q.half(), k.half(), w, qs, ks, 0, 0)
    with pytest.raises(TypeError, match="hifloat8"):
        torch_npu.npu_quant_lightning_indexer(q, k, w, qs, ks, 0, 0, query_dtype=1)
    with pytest.raises(ValueError, match="key_dequant_scale must be"):
        torch_npu.npu_quant_lightning_indexer(q, k, w, qs, qs, 0, 0)


# ------------------------------------------------------------------------------------------ dense indexer softmax lse

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dense_lightning_indexer_softmax_lse_bsnd(dtype):
    g = _gen(40)
    query = torch.randn(2, 5, 4, 16, generator=g).to(dtype)
    key = torch.randn(2, 7, 1, 16, generator=g).to(dtype)
    weights = torch.randn(2, 5, 4, generator=g).to(dtype)
    smax, ssum = torch_npu.npu_dense_lightning_indexer_softmax_lse(query.npu(), key.npu(), weights.npu())
    want_max, want_sum = ref.dense_lightning_indexer_softmax_lse(query, key, weights)
    assert smax.dtype == torch.float32 and smax.shape == (2, 1, 5)
    torch.testing.assert_close(smax.cpu(), want_max, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(ssum.cpu(), want_sum, rtol=1e-4, atol=1e-4)


def test_dense_lightning_indexer_softmax_lse_tnd():
    g = _gen(41)
    dtype = torch.bfloat16
    query = torch.randn(5, 8, 16, generator=g).to(dtype)   # batches of 2 and 3 query tokens
    key = torch.randn(11, 2, 16, generator=g).to(dtype)    # batches of 4 and 7 key tokens, two key heads
    weights = torch.randn(5, 8, generator=g).to(dtype)
    smax, ssum = torch_npu.npu_dense_lightning_indexer_softmax_lse(query.npu(), key.npu(), weights.npu(),
                                                                   actual_seq_qlen=[2, 5], actual_seq_klen=[4, 11],
                                                                   layout="TND")
    want_max, want_sum = ref.dense_lightning_indexer_softmax_lse(query, key, weights, [2, 5], [4, 11], "TND")
    assert smax.shape == (2, 5)
    torch.testing.assert_close(smax.cpu(), want_max, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(ssum.cpu(), want_sum, rtol=1e-4, atol=1e-4)


def test_dense_lightning_indexer_softmax_lse_meta_device_op_and_errors():
    smax, ssum = torch.ops.npu.npu_dense_lightning_indexer_softmax_lse(
        torch.empty(2, 3, 8, 16, device="meta", dtype=torch.float16),
        torch.empty(2, 6, 1, 16, device="meta", dtype=torch.float16),
        torch.empty(2, 3, 8, device="meta", dtype=torch.float16))
    assert smax.shape == (2, 1, 3) and ssum.dtype == torch.float32
    q, k, w = torch.randn(1, 2, 2, 8).npu(), torch.randn(1, 3, 1, 8).npu(), torch.randn(1, 2, 2).npu()
    before = torch.npu.op_stats().get("aclnnDenseLightningIndexerSoftmaxLse", {}).get("device_op", 0)
    torch_npu.npu_dense_lightning_indexer_softmax_lse(q, k, w)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnDenseLightningIndexerSoftmaxLse"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="needs actual_seq_qlen"):
        torch_npu.npu_dense_lightning_indexer_softmax_lse(q[0], k[0], w[0], layout="TND")
    with pytest.raises(TypeError, match="key_index dtype"):
        torch_npu.npu_dense_lightning_indexer_softmax_lse(q, k.half(), w)


# ------------------------------------------------------------------------------------------ nsa compress

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("block,stride", [(4, 4), (4, 2), (3, 5)])
def test_nsa_compress(dtype, block, stride):
    g = _gen(50)
    lengths = [9, 2, 16]  # the 2-token sample is shorter than a block and gives nothing
    seq = torch.tensor(lengths).cumsum(0).tolist()
    source = torch.randn(seq[-1], 2, 8, generator=g).to(dtype)
    weight = torch.randn(block, 2, generator=g).to(dtype)
    out = torch_npu.npu_nsa_compress(source.npu(), weight.npu(), block, stride, actual_seq_len=seq)
    expect = ref.nsa_compress(source, weight, block, stride, seq)
    assert out.dtype == dtype and out.shape == expect.shape
    torch.testing.assert_close(out.cpu().float(), expect.float(), rtol=TOL[dtype] * 4, atol=TOL[dtype] * 4)


def test_nsa_compress_gradient():
    g = _gen(51)
    seq = [7, 12]
    source = torch.randn(12, 2, 4, generator=g)
    weight = torch.randn(3, 2, generator=g)
    upstream = torch.randn(ref.nsa_compress(source, weight, 3, 2, seq).shape, generator=g)
    cpu_source, cpu_weight = source.clone().requires_grad_(), weight.clone().requires_grad_()
    ref.nsa_compress(cpu_source, cpu_weight, 3, 2, seq).backward(upstream)
    npu_source, npu_weight = source.npu().requires_grad_(), weight.npu().requires_grad_()
    torch_npu.npu_nsa_compress(npu_source, npu_weight, 3, 2, actual_seq_len=seq).backward(upstream.npu())
    torch.testing.assert_close(npu_source.grad.cpu(), cpu_source.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(npu_weight.grad.cpu(), cpu_weight.grad, rtol=1e-5, atol=1e-5)


def test_nsa_compress_meta_device_op_and_errors():
    out = torch.ops.npu.npu_nsa_compress(torch.empty(40, 4, 16, device="meta", dtype=torch.float16),
                                         torch.empty(16, 4, device="meta", dtype=torch.float16), 16, 8,
                                         actual_seq_len=[20, 40])
    assert out.shape == (1 + 1, 4, 16)  # each 20-token sequence: (20 - 16) // 8 + 1 blocks
    source, weight = torch.randn(8, 1, 4).npu(), torch.randn(4, 1).npu()
    before = torch.npu.op_stats().get("aclnnNsaCompress", {}).get("device_op", 0)
    torch_npu.npu_nsa_compress(source, weight, 4, 4, actual_seq_len=[8])
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnNsaCompress"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="actual_seq_len .* is required"):
        torch_npu.npu_nsa_compress(source, weight, 4, 4)
    with pytest.raises(ValueError, match="weight must be"):
        torch_npu.npu_nsa_compress(source, weight, 2, 2, actual_seq_len=[8])
    with pytest.raises(TypeError, match="weight dtype"):
        torch_npu.npu_nsa_compress(source, weight.half(), 4, 4, actual_seq_len=[8])
