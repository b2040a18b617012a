"""npu_block_sparse_attention, npu_kv_quant_sparse_flash_attention, npu_nsa_select_attention (+ grad, infer),
npu_nsa_compress_attention and npu_chunk_gated_delta_rule against CPU references written from the documented
definitions, with gradients, Meta shapes, device-op counters and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import sparse_attention_more as ref

TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5}


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------------------ block sparse attention

def _random_mask(shape, g):
    mask = (torch.rand(shape, generator=g) > 0.4).to(torch.int8)
    mask[..., 0, 0] = 1
    return mask


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_block_sparse_attention_bnsd(dtype):
    g = _gen(10)
    b, n1, n2, s, d = 2, 4, 2, 12, 16
    query = torch.randn(b, n1, s, d, generator=g).to(dtype)
    key = torch.randn(b, n2, s, d, generator=g).to(dtype)
    value = torch.randn(b, n2, s, d, generator=g).to(dtype)
    block_shape = [4, 3]
    mask = _random_mask((b, n1, 3, 4), g)
    mask[0, 1, 2] = 0  # a block row with nothing visible: zeros out, lse -inf
    inner = 0 if dtype == torch.bfloat16 else 1
    before = device_op_count("aclnnBlockSparseAttention")
    out, lse = torch_npu.npu_block_sparse_attention(query.npu(), key.npu(), value.npu(), mask.npu(), block_shape,
                                                    q_input_layout="BNSD", kv_input_layout="BNSD",
                                                    num_key_value_heads=n2, scale_value=d ** -0.5,
                                                    inner_precise=inner, softmax_lse_flag=1)
    assert device_op_count("aclnnBlockSparseAttention") == before + 1
    expect_out, expect_lse = ref.block_sparse_attention(query, key, value, mask, block_shape, "BNSD", d ** -0.5)
    assert out.dtype == dtype and out.shape == query.shape
    assert lse.dtype == torch.float32 and lse.shape == (b, n1, s, 1)
    torch.testing.assert_close(out.cpu().float(), expect_out, rtol=TOL[dtype], atol=TOL[dtype] * 4)
    torch.testing.assert_close(lse.cpu(), expect_lse, rtol=1e-3, atol=1e-3)
    assert torch.isinf(lse.cpu()[0, 1, 8:]).all() and (out.cpu()[0, 1, 8:] == 0).all()


def test_block_sparse_attention_bnsd_lengths():
    g = _gen(11)
    query = torch.randn(2, 2, 9, 8, generator=g).half()
    key = torch.randn(2, 1, 10, 8, generator=g).half()
    value = torch.randn(2, 1, 10, 8, generator=g).half()
    mask = _random_mask((2, 2, 3, 4), g)
    out, lse = torch_npu.npu_block_sparse_attention(query.npu(), key.npu(), value.npu(), mask.npu(), [3, 3],
                                                    q_input_layout="BNSD", kv_input_layout="BNSD",
                                                    num_key_value_heads=1, scale_value=0.3,
                                                    actual_seq_lengths=[9, 5], actual_seq_lengths_kv=[10, 7],
                                                    softmax_lse_flag=1)
    expect_out, expect_lse = ref.block_sparse_attention(query, key, value, mask, [3, 3], "BNSD", 0.3, [9, 5], [10, 7])
    torch.testing.assert_close(out.cpu().float(), expect_out, rtol=2e-3, atol=8e-3)
    torch.testing.assert_close(lse.cpu(), expect_lse, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_block_sparse_attention_tnd(dtype):
    g = _gen(12)
    lengths_q, lengths_kv = [5, 7], [6, 9]
    n1, n2, d = 4, 1, 16
    query = torch.randn(sum(lengths_q), n1, d, generator=g).to(dtype)
    key = torch.randn(sum(lengths_kv), n2, d, generator=g).to(dtype)
    value = torch.randn(sum(lengths_kv), n2, d, generator=g).to(dtype)
    mask = _random_mask((2, n1, 4, 3), g)
    out, lse = torch_npu.npu_block_sparse_attention(query.npu(), key.npu(), value.npu(), mask.npu(), [2, 4],
                                                    num_key_value_heads=n2, scale_value=0.25, inner_precise=0,
                                                    actual_seq_lengths=lengths_q,
                                                    actual_seq_lengths_kv=lengths_kv, softmax_lse_flag=1)
    expect_out, expect_lse = ref.block_sparse_attention(query, key, value, mask, [2, 4], "TND", 0.25, lengths_q,
                                                        lengths_kv)
    assert out.shape == query.shape and lse.shape == (12, n1, 1)
    torch.testing.assert_close(out.cpu().float(), expect_out, rtol=TOL[dtype], atol=TOL[dtype] * 4)
    torch.testing.assert_close(lse.cpu(), expect_lse, rtol=1e-3, atol=1e-3)


def test_block_sparse_attention_meta_and_errors():
    meta = dict(device="meta", dtype=torch.float16)
    out, lse = torch.ops.npu.npu_block_sparse_attention(
        torch.empty(2, 4, 8, 16, **meta), torch.empty(2, 2, 8, 16, **meta), torch.empty(2, 2, 8, 16, **meta),
        torch.empty(2, 4, 1, 1, device="meta", dtype=torch.int8), [128, 128], q_input_layout="BNSD",
        kv_input_layout="BNSD", num_key_value_heads=2)
    assert out.shape == (2, 4, 8, 16) and out.dtype == torch.float16 and out.device.type == "meta"
    assert lse.shape == (2, 4, 8, 1) and lse.dtype == torch.float32
    out, lse = torch.ops.npu.npu_block_sparse_attention(
        torch.empty(10, 4, 16, **meta), torch.empty(10, 1, 16, **meta), torch.empty(10, 1, 16, **meta),
        torch.empty(1, 4, 1, 1, device="meta", dtype=torch.int8), [128, 128], actual_seq_lengths=[10],
        actual_seq_lengths_kv=[10])
    assert out.shape == (10, 4, 16) and lse.shape == (10, 4, 1)

    q = torch.randn(8, 2, 16).half().npu()
    kv = torch.randn(8, 1, 16).half().npu()
    mask = torch.ones(1, 2, 1, 1, dtype=torch.int8).npu()
    with pytest.raises(ValueError, match="TND needs actual_seq_lengths"):
        torch_npu.npu_block_sparse_attention(q, kv, kv, mask, [128, 128])
    with pytest.raises(ValueError, match="given together"):
        torch_npu.npu_block_sparse_attention(q, kv, kv, mask, [128, 128], actual_seq_lengths=[8])
    with pytest.raises(ValueError, match="num_key_value_heads"):
        torch_npu.npu_block_sparse_attention(q, kv, kv, mask, [128, 128], num_key_value_heads=2,
                                             actual_seq_lengths=[8], actual_seq_lengths_kv=[8])
    with pytest.raises(ValueError, match="both be 'TND' or both be 'BNSD'"):
        torch_npu.npu_block_sparse_attention(q, kv, kv, mask, [128, 128], kv_input_layout="BNSD",
                                             actual_seq_lengths=[8], actual_seq_lengths_kv=[8])
    with pytest.raises(ValueError, match="inner_precise=0"):
        torch_npu.npu_block_sparse_attention(q.bfloat16(), kv.bfloat16(), kv.bfloat16(), mask, [128, 128],
                                             actual_seq_lengths=[8], actual_seq_lengths_kv=[8])
    with pytest.raises(TypeError, match="same dtype"):
        torch_npu.npu_block_sparse_attention(q, kv.float(), kv, mask, [128, 128], actual_seq_lengths=[8],
                                             actual_seq_lengths_kv=[8])
    with pytest.raises(TypeError, match="block_sparse_mask must be int8"):
        torch_npu.npu_block_sparse_attention(q, kv, kv, mask.float(), [128, 128], actual_seq_lengths=[8],
                                             actual_seq_lengths_kv=[8])


# ------------------------------------------------------------------------------------------ kv-quant sparse FA

DN, ROPE, TILE = 256, 64, 128


def _kv_cache(shape_prefix, dtype, g):
    """A combined per-tile int8 cache [..., N2, DN + ROPE*esize + DN/TILE*4]."""
    nope = torch.randint(-8, 8, shape_prefix + (DN,), generator=g, dtype=torch.int8)
    rope = torch.randn(shape_prefix + (ROPE,), generator=g).to(dtype)
    scales = torch.rand(shape_prefix + (DN // TILE,), generator=g) * 0.05 + 0.01
    return ref.pack_kv_cache(nope, rope, scales)


def _sparse_indices(shape, skv, block, g, invalid_tail=2):
    """Distinct block ids per row (valid first), the last `invalid_tail` slots -1."""
    blocks = (skv + block - 1) // block
    rows = [torch.randperm(blocks, generator=g)[:shape[-1]] for _ in range(int(torch.tensor(shape[:-1]).prod()))]
    idx = torch.stack(rows).view(shape).to(torch.int32)
    idx[..., shape[-1] - invalid_tail:] = -1
    return idx


def _kv_quant_sfa(query, key, indices, scale, **kw):
    return torch_npu.npu_kv_quant_sparse_flash_attention(
        query.npu(), key.npu(), key.npu(), indices.npu(), scale, 2, 2, attention_mode=2, tile_size=TILE,
        rope_head_dim=ROPE, **{k: (v.npu() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()})


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("sparse_mode", [0, 3])
def test_kv_quant_sparse_flash_attention_bsnd(dtype, sparse_mode):
    g = _gen(20)
    b, s1, n1, n2, s2 = 2, 3, 4, 1, 20
    query = torch.randn(b, s1, n1, DN + ROPE, generator=g).to(dtype)
    key = _kv_cache((b, s2, n2), dtype, g)
    indices = _sparse_indices((b, s1, n2, 8), s2, 2, g)
    act_q = torch.tensor([3, 2], dtype=torch.int32)
    act_kv = torch.tensor([20, 13], dtype=torch.int32)
    before = device_op_count("aclnnKvQuantSparseFlashAttention")
    out = _kv_quant_sfa(query, key, indices, 0.05, sparse_block_size=2, sparse_mode=sparse_mode,
                        actual_seq_lengths_query=act_q, actual_seq_lengths_kv=act_kv).cpu()
    assert device_op_count("aclnnKvQuantSparseFlashAttention") == before + 1
    expect = ref.kv_quant_sparse_flash_attention(query, key, indices, 0.05, actual_seq_lengths_query=act_q,
                                                 actual_seq_lengths_kv=act_kv, sparse_block_size=2,
                                                 sparse_mode=sparse_mode, tile_size=TILE, rope_head_dim=ROPE)
    assert out.dtype == dtype and out.shape == (b, s1, n1, DN)
    torch.testing.assert_close(out.float(), expect, rtol=TOL[dtype] * 4, atol=TOL[dtype] * 8)
    assert out.float().abs().sum() > 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_kv_quant_sparse_flash_attention_paged_tnd_sinks(dtype):
    g = _gen(21)
    lengths_q, lengths_kv = [2, 3], [17, 30]
    n1, n2, block_size = 8, 1, 16
    query = torch.randn(sum(lengths_q), n1, DN + ROPE, generator=g).to(dtype)
    blocks = _kv_cache((4, block_size, n2), dtype, g)
    table = torch.tensor([[3, 1], [0, 2]], dtype=torch.int32)
    indices = _sparse_indices((sum(lengths_q), n2, 10), 30, 1, g, invalid_tail=3)
    sinks = torch.randn(n1, generator=g)
    act_q = torch.tensor([2, 5], dtype=torch.int32)  # prefix sums for TND
    act_kv = torch.tensor(lengths_kv, dtype=torch.int32)
    before = device_op_count("aclnnKvQuantSparseFlashAttentionV2")
    out = _kv_quant_sfa(query, blocks, indices, 0.04, block_table=table, actual_seq_lengths_query=act_q,
                        actual_seq_lengths_kv=act_kv, layout_query="TND", layout_kv="PA_BSND", sinks=sinks).cpu()
    assert device_op_count("aclnnKvQuantSparseFlashAttentionV2") == before + 1
    expect = ref.kv_quant_sparse_flash_attention(query, blocks, indices, 0.04, block_table=table,
                                                 actual_seq_lengths_query=act_q, actual_seq_lengths_kv=act_kv,
                                                 layout_query="TND", layout_kv="PA_BSND", tile_size=TILE,
                                                 rope_head_dim=ROPE, sinks=sinks)
    assert out.shape == (5, n1, DN)
    torch.testing.assert_close(out.float(), expect, rtol=TOL[dtype] * 4, atol=TOL[dtype] * 8)


def test_kv_quant_sparse_flash_attention_meta_and_errors():
    q = torch.empty(2, 3, 4, DN + ROPE, device="meta", dtype=torch.bfloat16)
    k = torch.empty(2, 16, 1, DN + 2 * ROPE + DN // TILE * 4, device="meta", dtype=torch.int8)
    idx = torch.empty(2, 3, 1, 8, device="meta", dtype=torch.int32)
    out = torch.ops.npu.npu_kv_quant_sparse_flash_attention(q, k, k, idx, 0.1, 2, 2, attention_mode=2,
                                                            tile_size=TILE, rope_head_dim=ROPE)
    assert out.shape == (2, 3, 4, DN) and out.dtype == torch.bfloat16 and out.device.type == "meta"

    g = _gen(22)
    query = torch.randn(1, 2, 2, DN + ROPE, generator=g).half().npu()
    key = _kv_cache((1, 8, 1), torch.float16, g).npu()
    indices = torch.zeros(1, 2, 1, 4, dtype=torch.int32).npu()
    call = torch_npu.npu_kv_quant_sparse_flash_attention
    with pytest.raises(ValueError, match="attention_mode must be 2"):
        call(query, key, key, indices, 0.1, 2, 2, tile_size=TILE, rope_head_dim=ROPE)
    with pytest.raises(ValueError, match="quant_mode must be 2"):
        call(query, key, key, indices, 0.1, 0, 2, attention_mode=2, tile_size=TILE, rope_head_dim=ROPE)
    with pytest.raises(TypeError, match="chip number format"):
        call(query, key, key, indices, 0.1, 2, 2, attention_mode=2, tile_size=TILE, rope_head_dim=ROPE, key_dtype=1)
    with pytest.raises(ValueError, match="key D must be"):
        call(query, key[..., :-4], key[..., :-4], indices, 0.1, 2, 2, attention_mode=2, tile_size=TILE,
             rope_head_dim=ROPE)
    with pytest.raises(ValueError, match="needs block_table"):
        call(query, key, key, indices, 0.1, 2, 2, attention_mode=2, tile_size=TILE, rope_head_dim=ROPE,
             layout_kv="PA_BSND", actual_seq_lengths_kv=torch.tensor([8], dtype=torch.int32).npu())
    with pytest.raises(TypeError, match="sparse_indices must be int32"):
        call(query, key, key, indices.long(), 0.1, 2, 2, attention_mode=2, tile_size=TILE, rope_head_dim=ROPE)


# ------------------------------------------------------------------------------------------ NSA select attention

def _select_inputs(dtype, seed, qlen=(5, 7), kvlen=(12, 16), n1=4, n2=2, d=16, dv=8, size=4, count=3):
    g = _gen(seed)
    query = torch.randn(sum(qlen), n1, d, generator=g).to(dtype)
    key = torch.randn(sum(kvlen), n2, d, generator=g).to(dtype)
    value = torch.randn(sum(kvlen), n2, dv, generator=g).to(dtype)
    rows = []
    for ql, kl in zip(qlen, kvlen):
        blocks = (kl + size - 1) // size
        for _ in range(ql * n2):
            rows.append(torch.randperm(blocks, generator=g)[:count])
    topk = torch.stack(rows).view(sum(qlen), n2, count).to(torch.int32)
    seq_q = list(torch.tensor(qlen).cumsum(0).tolist())
    seq_kv = list(torch.tensor(kvlen).cumsum(0).tolist())
    return query, key, value, topk, seq_q, seq_kv


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
def test_nsa_select_attention_forward(dtype, causal):
    query, key, value, topk, seq_q, seq_kv = _select_inputs(dtype, 30)
    mask = torch.ones(16, 16, dtype=torch.bool).triu(1) if causal else None
    before = device_op_count("aclnnNsaSelectedAttention")
    out, smax, ssum = torch_npu.npu_nsa_select_attention(
        query.npu(), key.npu(), value.npu(), topk.npu(), 0.25, 4, 4, 3,
        atten_mask=None if mask is None else mask.npu(), actual_seq_qlen=seq_q, actual_seq_kvlen=seq_kv)
    assert device_op_count("aclnnNsaSelectedAttention") == before + 1
    exp_out, exp_max, exp_sum = ref.nsa_select_attention(query, key, value, topk, 0.25, 4, causal, seq_q, seq_kv)
    assert out.dtype == dtype and out.shape == (12, 4, 8)
    assert smax.dtype == torch.float32 and smax.shape == (12, 4, 8) and ssum.shape == (12, 4, 8)
    torch.testing.assert_close(out.cpu().float(), exp_out, rtol=TOL[dtype] * 2, atol=TOL[dtype] * 4)
    torch.testing.assert_close(smax.cpu(), exp_max, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ssum.cpu(), exp_sum, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_nsa_select_attention_backward(dtype):
    query, key, value, topk, seq_q, seq_kv = _select_inputs(dtype, 31)
    mask = torch.ones(16, 16, dtype=torch.bool).triu(1)
    upstream = torch.randn(12, 4, 8, generator=_gen(32)).to(dtype)
    leaves = [t.detach().float().clone().requires_grad_() for t in (query, key, value)]
    # CPU autograd reference in float32 on the same (rounded) inputs.
    exp_out = ref.nsa_select_attention(leaves[0], leaves[1], leaves[2], topk, 0.25, 4, True, seq_q, seq_kv)[0]
    exp_out.backward(upstream.float())
    npu_leaves = [t.detach().npu().requires_grad_() for t in (query, key, value)]
    before = device_op_count("aclnnNsaSelectedAttentionGrad")
    out = torch_npu.npu_nsa_select_attention(*npu_leaves, topk.npu(), 0.25, 4, 4, 3, atten_mask=mask.npu(),
                                             actual_seq_qlen=seq_q, actual_seq_kvlen=seq_kv)[0]
    out.backward(upstream.npu())
    assert device_op_count("aclnnNsaSelectedAttentionGrad") == before + 1
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for got, want in zip(npu_leaves, leaves):
        assert got.grad.dtype == dtype
        torch.testing.assert_close(got.grad.cpu().float(), want.grad, rtol=tol, atol=tol)


def test_nsa_select_attention_grad_op_direct():
    query, key, value, topk, seq_q, seq_kv = _select_inputs(torch.float32, 33, qlen=(6,), kvlen=(10,))
    out, smax, ssum = torch_npu.npu_nsa_select_attention(query.npu(), key.npu(), value.npu(), topk.npu(), 0.5, 4, 4,
                                                         3, actual_seq_qlen=seq_q, actual_seq_kvlen=seq_kv)
    grad = torch.randn(out.shape, generator=_gen(34))
    dq, dk, dv = torch_npu.npu_nsa_select_attention_grad(grad.npu(), query.npu(), key.npu(), value.npu(), out, smax,
                                                         ssum, topk.npu(), 0.5, 4, 4, 3, actual_seq_qlen=seq_q,
                                                         actual_seq_kvlen=seq_kv)
    leaves = [t.clone().requires_grad_() for t in (query, key, value)]
    ref.nsa_select_attention(*leaves, topk, 0.5, 4, False, seq_q, seq_kv)[0].backward(grad)
    for got, want in zip((dq, dk, dv), leaves):
        torch.testing.assert_close(got.cpu(), want.grad, rtol=1e-4, atol=1e-4)


def test_nsa_select_attention_meta_and_errors():
    meta = dict(device="meta", dtype=torch.bfloat16)
    q, k, v = torch.empty(9, 8, 32, **meta), torch.empty(20, 2, 32, **meta), torch.empty(20, 2, 16, **meta)
    topk = torch.empty(9, 2, 4, device="meta", dtype=torch.int32)
    out, smax, ssum = torch.ops.npu.npu_nsa_select_attention(q, k, v, topk, 1.0, 8, 4, 4)
    assert out.shape == (9, 8, 16) and out.dtype == torch.bfloat16
    assert smax.shape == ssum.shape == (9, 8, 8) and smax.dtype == torch.float32
    grads = torch.ops.npu.npu_nsa_select_attention_grad(out, q, k, v, out, smax, ssum, topk, 1.0, 8, 4, 4)
    assert [tuple(x.shape) for x in grads] == [(9, 8, 32), (20, 2, 32), (20, 2, 16)]

    query, key, value, topk, seq_q, seq_kv = _select_inputs(torch.float16, 35)
    args = (query.npu(), key.npu(), value.npu())
    with pytest.raises(ValueError, match="head_num"):
        torch_npu.npu_nsa_select_attention(*args, topk.npu(), 1.0, 3, 4, 3, actual_seq_qlen=seq_q,
                                           actual_seq_kvlen=seq_kv)
    with pytest.raises(ValueError, match="topk_indices must be"):
        torch_npu.npu_nsa_select_attention(*args, topk.npu(), 1.0, 4, 4, 2, actual_seq_qlen=seq_q,
                                           actual_seq_kvlen=seq_kv)
    with pytest.raises(TypeError, match="topk_indices must be int32"):
        torch_npu.npu_nsa_select_attention(*args, topk.long().npu(), 1.0, 4, 4, 3, actual_seq_qlen=seq_q,
                                           actual_seq_kvlen=seq_kv)
    with pytest.raises(ValueError, match="given together"):
        torch_npu.npu_nsa_select_attention(*args, topk.npu(), 1.0, 4, 4, 3, actual_seq_qlen=seq_q)


def _infer_cache(b, kvlen, page, n2, d, dv, dtype, g, flat):
    per_batch = max((l + page - 1) // page for l in kvlen)
    blocks = b * per_batch
    table = torch.randperm(blocks, generator=g).view(b, per_batch).to(torch.int32)
    key = torch.randn(blocks, page, n2, d, generator=g).to(dtype)
    value = torch.randn(blocks, page, n2, dv, generator=g).to(dtype)
    if flat:
        key, value = key.flatten(2), value.flatten(2)
    return key, value, table


def _infer_topk(rows, n2, count, kvlen_of_row, size, g):
    out = torch.full((rows, n2, count), -1, dtype=torch.int32)
    for r in range(rows):
        blocks = (kvlen_of_row[r] + size - 1) // size
        for h in range(n2):
            pick = torch.randperm(blocks, generator=g)[:count]
            out[r, h, :pick.numel()] = pick.to(torch.int32)
    return out


@pytest.mark.parametrize("layout", ["BSH", "BSND", "TND"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_nsa_select_attention_infer(layout, dtype):
    g = _gen(40)
    b, n1, n2, d, dv, page, size, count = 3, 4, 2, 16, 8, 8, 4, 3
    kvlen = [20, 9, 3]
    key, value, table = _infer_cache(b, kvlen, page, n2, d, dv, dtype, g, flat=layout != "BSND")
    if layout == "TND":
        query = torch.randn(b, n1, d, generator=g).to(dtype)
        topk = _infer_topk(b, n2, count, kvlen, size, g)
    else:
        s1 = 2
        query = torch.randn(b, s1, n1, d, generator=g).to(dtype)
        if layout == "BSH":
            query = query.flatten(2)
        topk = _infer_topk(b * s1, n2, count, [l for l in kvlen for _ in range(s1)], size, g).view(b, s1, n2, count)
    before = device_op_count("aclnnNsaSelectedAttentionInfer")
    out = torch_npu.npu_nsa_select_attention_infer(query.npu(), key.npu(), value.npu(), topk.npu(), 0.3, n1, n2,
                                                   size, count, page, layout=layout, block_table=table.npu(),
                                                   actual_seq_kvlen=kvlen).cpu()
    assert device_op_count("aclnnNsaSelectedAttentionInfer") == before + 1
    expect = ref.nsa_select_attention_infer(query, key, value, topk, 0.3, n1, n2, size, page, layout, table, kvlen)
    assert out.dtype == dtype and out.shape == expect.shape
    torch.testing.assert_close(out.float(), expect, rtol=TOL[dtype] * 2, atol=TOL[dtype] * 4)


def test_nsa_select_attention_infer_meta_and_errors():
    meta = dict(device="meta", dtype=torch.float16)
    out = torch.ops.npu.npu_nsa_select_attention_infer(
        torch.empty(2, 1, 4 * 16, **meta), torch.empty(6, 8, 2 * 16, **meta), torch.empty(6, 8, 2 * 8, **meta),
        torch.empty(2, 2, 3, device="meta", dtype=torch.int32), 1.0, 4, 2, 4, 3, 8, layout="BSH",
        block_table=torch.empty(2, 3, device="meta", dtype=torch.int32), actual_seq_kvlen=[20, 9])
    assert out.shape == (2, 1, 32) and out.dtype == torch.float16
    out = torch.ops.npu.npu_nsa_select_attention_infer(
        torch.empty(2, 4, 16, **meta), torch.empty(6, 8, 32, **meta), torch.empty(6, 8, 16, **meta),
        torch.empty(2, 2, 3, device="meta", dtype=torch.int32), 1.0, 4, 2, 4, 3, 8, layout="TND",
        block_table=torch.empty(2, 3, device="meta", dtype=torch.int32), actual_seq_kvlen=[20, 9])
    assert out.shape == (2, 4, 8)

    g = _gen(41)
    key, value, table = _infer_cache(2, [8, 8], 8, 1, 16, 16, torch.float16, g, flat=True)
    query = torch.randn(2, 1, 32, generator=g).half().npu()
    topk = torch.zeros(2, 1, 2, dtype=torch.int32).npu()
    call = torch_npu.npu_nsa_select_attention_infer
    with pytest.raises(ValueError, match="block_table"):
        call(query, key.npu(), value.npu(), topk, 1.0, 2, 1, 4, 2, 8, layout="BSH", actual_seq_kvlen=[8, 8])
    with pytest.raises(ValueError, match="layout must be"):
        call(query, key.npu(), value.npu(), topk, 1.0, 2, 1, 4, 2, 8, layout="SBH", block_table=table.npu(),
             actual_seq_kvlen=[8, 8])
    with pytest.raises(ValueError, match="page_block_size"):
        call(query, key.npu(), value.npu(), topk, 1.0, 2, 1, 4, 2, 16, layout="BSH", block_table=table.npu(),
             actual_seq_kvlen=[8, 8])


# ------------------------------------------------------------------------------------------ chunk gated delta rule

def _gdr_inputs(dtype, state_dtype, seed, lengths=(5, 3), nk=2, nv=4, dk=8, dv=6):
    g = _gen(seed)
    t = sum(lengths)
    query = torch.nn.functional.normalize(torch.rand(t, nk, dk, generator=g), dim=-1).to(dtype)
    key = torch.nn.functional.normalize(torch.rand(t, nk, dk, generator=g), dim=-1).to(dtype)
    value = torch.rand(t, nv, dv, generator=g).to(dtype)
    beta = (torch.rand(t, nv, generator=g) * 0.9 + 0.05).to(dtype)
    gate = -torch.rand(t, nv, generator=g)
    state = torch.rand(len(lengths), nv, dv, dk, generator=g).to(state_dtype)
    return query, key, value, beta, gate, state, torch.tensor(lengths, dtype=torch.int32)


@pytest.mark.parametrize("dtype,state_dtype", [(torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32),
                                               (torch.float16, torch.float16), (torch.float32, torch.float32)])
@pytest.mark.parametrize("with_g", [True, False])
def test_chunk_gated_delta_rule(dtype, state_dtype, with_g):
    query, key, value, beta, gate, state, lengths = _gdr_inputs(dtype, state_dtype, 50)
    gate = gate if with_g else None
    state_before = state.clone()
    npu_state = state.npu()
    before = device_op_count("aclnnChunkGatedDeltaRule")
    out, final = torch_npu.npu_chunk_gated_delta_rule(query.npu(), key.npu(), value.npu(), beta=beta.npu(),
                                                      initial_state=npu_state, actual_seq_lengths=lengths.npu(),
                                                      scale=0.35, g=None if gate is None else gate.npu())
    assert device_op_count("aclnnChunkGatedDeltaRule") == before + 1
    exp_out, exp_final = ref.chunk_gated_delta_rule(query, key, value, beta, state, lengths, 0.35, gate)
    assert out.dtype == dtype and out.shape == value.shape
    assert final.dtype == state_dtype and final.shape == state.shape
    tol = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-5}
    torch.testing.assert_close(out.cpu().float(), exp_out, rtol=tol[dtype], atol=tol[dtype] * 4)
    torch.testing.assert_close(final.cpu().float(), exp_final, rtol=tol[state_dtype], atol=tol[state_dtype] * 4)
    assert torch.equal(npu_state.cpu(), state_before)  # the initial state is an input only


def test_chunk_gated_delta_rule_default_scale_meta_and_errors():
    query, key, value, beta, _, state, lengths = _gdr_inputs(torch.bfloat16, torch.bfloat16, 51, lengths=(4,))
    out = torch_npu.npu_chunk_gated_delta_rule(query.npu(), key.npu(), value.npu(), beta=beta.npu(),
                                               initial_state=state.npu(), actual_seq_lengths=lengths.npu())[0]
    expect = ref.chunk_gated_delta_rule(query, key, value, beta, state, lengths)[0]  # scale None means 1.0
    torch.testing.assert_close(out.cpu().float(), expect, rtol=2e-2, atol=8e-2)

    meta = dict(device="meta", dtype=torch.bfloat16)
    out, final = torch.ops.npu.npu_chunk_gated_delta_rule(
        torch.empty(10, 2, 16, **meta), torch.empty(10, 2, 16, **meta), torch.empty(10, 4, 8, **meta),
        beta=torch.empty(10, 4, **meta), initial_state=torch.empty(3, 4, 8, 16, device="meta", dtype=torch.float32),
        actual_seq_lengths=torch.empty(3, device="meta", dtype=torch.int32), scale=0.5)
    assert out.shape == (10, 4, 8) and out.dtype == torch.bfloat16
    assert final.shape == (3, 4, 8, 16) and final.dtype == torch.float32

    q, k, v, b, s, l = (t.npu() for t in (query, key, value, beta, state, lengths))
    with pytest.raises(ValueError, match="beta"):
        torch_npu.npu_chunk_gated_delta_rule(q, k, v, initial_state=s, actual_seq_lengths=l)
    with pytest.raises(ValueError, match="initial_state"):
        torch_npu.npu_chunk_gated_delta_rule(q, k, v, beta=b, actual_seq_lengths=l)
    with pytest.raises(TypeError, match="actual_seq_lengths must be int32"):
        torch_npu.npu_chunk_gated_delta_rule(q, k, v, beta=b, initial_state=s, actual_seq_lengths=l.long())
    with pytest.raises(ValueError, match="multiple of Nk"):
        torch_npu.npu_chunk_gated_delta_rule(q, k, v[:, :3], beta=b[:, :3], initial_state=s[:, :3],
                                             actual_seq_lengths=l)


# ------------------------------------------------------------------------------------------ NSA compress attention

def _compress_inputs(dtype, seed, qlen=(6, 5), cmplen=(7, 4), sellen=(4, 3), n1=4, n2=2, d=16, dv=8):
    g = _gen(seed)
    query = torch.randn(sum(qlen), n1, d, generator=g).to(dtype)
    key = torch.randn(sum(cmplen), n2, d, generator=g).to(dtype)
    value = torch.randn(sum(cmplen), n2, dv, generator=g).to(dtype)
    cums = [list(torch.tensor(x).cumsum(0).tolist()) for x in (qlen, cmplen, sellen)]
    return query, key, value, cums


def _check_topk(topk, importances, seq_q, count):
    """Each sample's picks are distinct blocks whose importances are the top `count` importances (order-robust
    against near ties); slots past the sample's block count are -1."""
    start = 0
    for end, imp in zip(seq_q, importances):  # imp [N2, s1, sel]
        got = topk[start:end].permute(1, 0, 2).long()  # [N2, s1, count]
        keep = min(count, imp.shape[-1])
        assert (got[..., keep:] == -1).all()
        picked = imp.gather(-1, got[..., :keep])
        want = imp.sort(-1, descending=True).values[..., :keep]
        torch.testing.assert_close(picked.sort(-1, descending=True).values, want, rtol=1e-3, atol=1e-4)
        for row in got[..., :keep].reshape(-1, keep):
            assert row.unique().numel() == keep
        start = end


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("masked", [False, True])
def test_nsa_compress_attention(dtype, masked):
    query, key, value, (seq_q, seq_cmp, seq_sel) = _compress_inputs(dtype, 60)
    atten_mask = torch.ones(6, 7, dtype=torch.uint8).triu(2) if masked else None
    topk_mask = torch.zeros(6, 4, dtype=torch.bool)
    topk_mask[:, 0] = True  # the first block is always picked
    before = device_op_count("aclnnNsaCompressAttention")
    out, topk, smax, ssum = torch_npu.npu_nsa_compress_attention(
        query.npu(), key.npu(), value.npu(), 0.3, 4, 4, 2, 4, 3, topk_mask=topk_mask.npu(),
        atten_mask=None if atten_mask is None else atten_mask.npu(), actual_seq_qlen=seq_q,
        actual_cmp_seq_kvlen=seq_cmp, actual_sel_seq_kvlen=seq_sel)
    assert device_op_count("aclnnNsaCompressAttention") == before + 1
    exp_out, importances, exp_max, exp_sum = ref.nsa_compress_attention(
        query, key, value, 0.3, 4, 2, 4, 3, topk_mask, atten_mask, seq_q, seq_cmp, seq_sel)
    assert out.dtype == dtype and out.shape == (11, 4, 8)
    assert topk.dtype == torch.int32 and topk.shape == (11, 2, 3)
    assert smax.dtype == torch.float32 and smax.shape == (11, 4, 8)
    torch.testing.assert_close(out.cpu().float(), exp_out, rtol=TOL[dtype] * 2, atol=TOL[dtype] * 4)
    topk = topk.cpu()
    assert (topk[..., 0] == 0).all()
    _check_topk(topk, importances, seq_q, 3)
    # flash-attention TND statistics: N-major in memory
    stats_max = smax.cpu().reshape(4, 11, 8)
    stats_sum = ssum.cpu().reshape(4, 11, 8)
    torch.testing.assert_close(stats_max[..., 0].T, exp_max, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(stats_sum[..., 5].T, exp_sum, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_nsa_compress_attention_backward(dtype):
    query, key, value, (seq_q, seq_cmp, seq_sel) = _compress_inputs(dtype, 61)
    atten_mask = torch.ones(6, 7, dtype=torch.uint8).triu(2)
    upstream = torch.randn(11, 4, 8, generator=_gen(62)).to(dtype)
    leaves = [t.detach().float().clone().requires_grad_() for t in (query, key, value)]
    ref.nsa_compress_attention(*leaves, 0.3, 4, 2, 4, 3, None, atten_mask, seq_q, seq_cmp, seq_sel)[0].backward(
        upstream.float())
    npu_leaves = [t.detach().npu().requires_grad_() for t in (query, key, value)]
    out = torch_npu.npu_nsa_compress_attention(*npu_leaves, 0.3, 4, 4, 2, 4, 3, atten_mask=atten_mask.npu(),
                                               actual_seq_qlen=seq_q, actual_cmp_seq_kvlen=seq_cmp,
                                               actual_sel_seq_kvlen=seq_sel)[0]
    out.backward(upstream.npu())
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for got, want in zip(npu_leaves, leaves):
        torch.testing.assert_close(got.grad.cpu().float(), want.grad, rtol=tol, atol=tol)


def test_nsa_compress_attention_meta_and_errors():
    meta = dict(device="meta", dtype=torch.float16)
    out, topk, smax, ssum = torch.ops.npu.npu_nsa_compress_attention(
        torch.empty(9, 8, 32, **meta), torch.empty(12, 2, 32, **meta), torch.empty(12, 2, 16, **meta), 1.0, 8, 32,
        16, 64, 4, actual_seq_qlen=[9], actual_cmp_seq_kvlen=[12], actual_sel_seq_kvlen=[5])
    assert out.shape == (9, 8, 16) and out.dtype == torch.float16
    assert topk.shape == (9, 2, 4) and topk.dtype == torch.int32
    assert smax.shape == ssum.shape == (9, 8, 8) and smax.dtype == torch.float32

    query, key, value, (seq_q, seq_cmp, seq_sel) = _compress_inputs(torch.float16, 63)
    args = (query.npu(), key.npu(), value.npu(), 0.3, 4)
    with pytest.raises(ValueError, match="are required"):
        torch_npu.npu_nsa_compress_attention(*args, 4, 2, 4, 3, actual_seq_qlen=seq_q)
    with pytest.raises(ValueError, match="multiples of compress_stride"):
        torch_npu.npu_nsa_compress_attention(*args, 5, 2, 4, 3, actual_seq_qlen=seq_q, actual_cmp_seq_kvlen=seq_cmp,
                                             actual_sel_seq_kvlen=seq_sel)
    with pytest.raises(ValueError, match="head_num"):
        torch_npu.npu_nsa_compress_attention(query.npu(), key.npu(), value.npu(), 0.3, 2, 4, 2, 4, 3,
                                             actual_seq_qlen=seq_q, actual_cmp_seq_kvlen=seq_cmp,
                                             actual_sel_seq_kvlen=seq_sel)
    with pytest.raises(TypeError, match="bool or uint8"):
        torch_npu.npu_nsa_compress_attention(*args, 4, 2, 4, 3, atten_mask=torch.zeros(6, 7).npu(),
                                             actual_seq_qlen=seq_q, actual_cmp_seq_kvlen=seq_cmp,
                                             actual_sel_seq_kvlen=seq_sel)
