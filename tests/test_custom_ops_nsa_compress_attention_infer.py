"""npu_nsa_compress_attention_infer against a CPU reference written from the op's definition: attention output and
top-k select blocks (TND / BSND, float16 / bfloat16 / float32), Meta shapes, the device-op counter and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import nsa_compress_attention_infer as ref

OP = "aclnnNsaCompressAttentionInfer"
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5}


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def _inputs(dtype, seed, lengths, n1, n2, d, dv, page, layout="TND", spare_blocks=2):
    """Query (one token per batch) and a paged compressed cache whose pages are shuffled through block_table."""
    g = torch.Generator().manual_seed(seed)
    batch = len(lengths)
    per_batch = max((length + page - 1) // page for length in lengths)
    blocks = batch * per_batch + spare_blocks
    table = torch.randperm(blocks, generator=g)[:batch * per_batch].view(batch, per_batch).to(torch.int32)
    shape = (batch, 1, n1, d) if layout == "BSND" else (batch, n1, d)
    query = torch.randn(*shape, generator=g).to(dtype)
    key = torch.randn(blocks, page, n2 * d, generator=g).to(dtype)
    value = torch.randn(blocks, page, n2 * dv, generator=g).to(dtype)
    return query, key, value, table


def _check_topk(topk, importances, lengths, count, cmp, stride, sel):
    """First block and last two first; the rest are the highest-importance other blocks, in falling order (compared
    by their reference importance so that float rounding between equal-scoring blocks cannot fail the test)."""
    topk = topk.reshape(len(lengths), -1, count).long()
    for b, length in enumerate(lengths):
        blocks = ref.select_block_num(length, cmp, stride, sel)
        for h in range(topk.shape[1]):
            row = topk[b, h]
            assert row[:3].tolist() == [0, blocks - 2, blocks - 1]
            rest = row[3:]
            assert len(set(rest.tolist())) == count - 3
            assert bool(((rest >= 1) & (rest <= blocks - 3)).all())
            score = importances[b][h]
            best = torch.sort(score[1:blocks - 2], descending=True).values[:count - 3]
            torch.testing.assert_close(score[rest], best, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["TND", "BSND"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_nsa_compress_attention_infer(layout, dtype):
    n1, n2, d, dv, page = 8, 2, 24, 16, 16
    cmp, stride, sel, count = 32, 16, 64, 5
    lengths = [40, 27, 33]
    query, key, value, table = _inputs(dtype, 1, lengths, n1, n2, d, dv, page, layout)
    before = device_op_count(OP)
    out, topk = torch_npu.npu_nsa_compress_attention_infer(
        query.npu(), key.npu(), value.npu(), 0.3, n1, n2, sel, count, page, cmp, stride, layout=layout,
        block_table=table.npu(), actual_cmp_seq_kvlen=lengths)
    assert device_op_count(OP) == before + 1
    exp_out, exp_topk, importances = ref.nsa_compress_attention_infer(
        query, key, value, 0.3, n1, n2, sel, count, page, cmp, stride, table, lengths, layout)
    assert out.dtype == dtype and out.shape == exp_out.shape
    assert topk.dtype == torch.int32 and topk.shape == exp_topk.shape
    torch.testing.assert_close(out.cpu().float(), exp_out, rtol=TOL[dtype], atol=TOL[dtype] * 4)
    _check_topk(topk.cpu(), importances, lengths, count, cmp, stride, sel)


@pytest.mark.parametrize("cmp,stride,sel,count", [(16, 16, 16, 6), (48, 16, 48, 8), (64, 32, 64, 4)])
def test_nsa_compress_attention_infer_block_geometries(cmp, stride, sel, count):
    n1, n2, d, dv, page = 4, 1, 16, 16, 32
    lengths = [45, 61]
    query, key, value, table = _inputs(torch.float16, 2, lengths, n1, n2, d, dv, page)
    out, topk = torch_npu.npu_nsa_compress_attention_infer(
        query.npu(), key.npu(), value.npu(), 0.25, n1, n2, sel, count, page, cmp, stride,
        block_table=table.npu(), actual_cmp_seq_kvlen=lengths)
    exp_out, _, importances = ref.nsa_compress_attention_infer(
        query, key, value, 0.25, n1, n2, sel, count, page, cmp, stride, table, lengths)
    torch.testing.assert_close(out.cpu().float(), exp_out, rtol=2e-3, atol=8e-3)
    _check_topk(topk.cpu(), importances, lengths, count, cmp, stride, sel)


def test_nsa_compress_attention_infer_upstream_example():
    # upstream's example: 32 query heads on one key head, D 65 / Dv 18, pages reused by the block table
    g = torch.Generator().manual_seed(3)
    query = torch.randn(1, 32, 65, generator=g).half()
    key = torch.randn(25, 48, 65, generator=g).half()
    value = torch.randn(25, 48, 18, generator=g).half()
    table = torch.tensor([[23, 2, 20, 22, 4, 21, 7, 12, 3, 20, 20, 0, 15, 0, 4, 8, 10, 20, 21, 18, 18, 18, 11, 12,
                           20]]).int()
    out, topk = torch_npu.npu_nsa_compress_attention_infer(
        query.npu(), key.npu(), value.npu(), 0.01, 32, 1, 32, 397, 48, 32, 16, block_table=table.npu(),
        actual_cmp_seq_kvlen=[1180])
    assert out.shape == (1, 32, 18) and topk.shape == (1, 1, 397)
    exp_out, _, importances = ref.nsa_compress_attention_infer(query, key, value, 0.01, 32, 1, 32, 397, 48, 32, 16,
                                                               table, [1180])
    torch.testing.assert_close(out.cpu().float(), exp_out, rtol=1e-3, atol=1e-3)
    _check_topk(topk.cpu(), importances, [1180], 397, 32, 16, 32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_nsa_compress_attention_infer_meta(dtype):
    meta = dict(device="meta", dtype=dtype)
    table = torch.empty(2, 4, device="meta", dtype=torch.int32)
    out, topk = torch.ops.npu.npu_nsa_compress_attention_infer(
        torch.empty(2, 8, 24, **meta), torch.empty(9, 16, 2 * 24, **meta), torch.empty(9, 16, 2 * 16, **meta), 0.3,
        8, 2, 64, 5, 16, 32, 16, block_table=table, actual_cmp_seq_kvlen=[40, 27])
    assert out.shape == (2, 8, 16) and out.dtype == dtype and out.device.type == "meta"
    assert topk.shape == (2, 2, 5) and topk.dtype == torch.int32
    out, topk = torch.ops.npu.npu_nsa_compress_attention_infer(
        torch.empty(2, 1, 8, 24, **meta), torch.empty(9, 16, 2 * 24, **meta), torch.empty(9, 16, 2 * 16, **meta), 0.3,
        8, 2, 64, 5, 16, 32, 16, layout="BSND", block_table=table, actual_cmp_seq_kvlen=[40, 27])
    assert out.shape == (2, 1, 8, 16) and topk.shape == (2, 1, 2, 5)
    with pytest.raises(ValueError, match="exceeds"):
        torch.ops.npu.npu_nsa_compress_attention_infer(
            torch.empty(2, 8, 24, **meta), torch.empty(9, 16, 48, **meta), torch.empty(9, 16, 32, **meta), 0.3,
            8, 2, 64, 9, 16, 32, 16, block_table=table, actual_cmp_seq_kvlen=[40, 27])


def test_nsa_compress_attention_infer_errors():
    lengths = [40, 27]
    query, key, value, table = _inputs(torch.float16, 4, lengths, 4, 2, 16, 16, 16)
    q, k, v, t = query.npu(), key.npu(), value.npu(), table.npu()
    call = torch_npu.npu_nsa_compress_attention_infer
    good = dict(block_table=t, actual_cmp_seq_kvlen=lengths)
    with pytest.raises(ValueError, match="block_table is required"):
        call(q, k, v, 0.3, 4, 2, 64, 5, 16, 32, 16, actual_cmp_seq_kvlen=lengths)
    with pytest.raises(ValueError, match="actual_cmp_seq_kvlen is required"):
        call(q, k, v, 0.3, 4, 2, 64, 5, 16, 32, 16, block_table=t)
    with pytest.raises(ValueError, match="atten_mask is not supported"):
        call(q, k, v, 0.3, 4, 2, 64, 5, 16, 32, 16, atten_mask=torch.zeros(2, 40, dtype=torch.bool).npu(), **good)
    with pytest.raises(ValueError, match="actual_seq_qlen is not supported"):
        call(q, k, v, 0.3, 4, 2, 64, 5, 16, 32, 16, actual_seq_qlen=[1, 2], **good)
    with pytest.raises(ValueError, match="layout must be"):
        call(q, k, v, 0.3, 4, 2, 64, 5, 16, 32, 16, layout="BSH", **good)
    with pytest.raises(ValueError, match="exceeds the 7 select blocks of batch 1"):
        call(q, k, v, 0.3, 4, 2, 64, 8, 16, 32, 16, **good)
    with pytest.raises(ValueError, match="at least 3"):
        call(q, k, v, 0.3, 4, 2, 64, 2, 16, 32, 16, **good)
    with pytest.raises(ValueError, match="multiple of compress_stride"):
        call(q, k, v, 0.3, 4, 2, 40, 2, 16, 32, 16, **good)
    with pytest.raises(ValueError, match="head_num"):
        call(q, k, v, 0.3, 8, 2, 64, 5, 16, 32, 16, **good)
    with pytest.raises(ValueError, match="page_block_size"):
        call(q, k, v, 0.3, 4, 2, 64, 5, 32, 32, 16, **good)
    with pytest.raises(ValueError, match="too short"):
        call(q, k, v, 0.3, 4, 2, 64, 5, 16, 32, 16, block_table=t, actual_cmp_seq_kvlen=[40, 70])
    with pytest.raises(ValueError, match="S = 1"):
        call(torch.randn(2, 2, 4, 16).half().npu(), k, v, 0.3, 4, 2, 64, 5, 16, 32, 16, layout="BSND", **good)
    with pytest.raises(TypeError, match="int32"):
        call(q, k, v, 0.3, 4, 2, 64, 5, 16, 32, 16, block_table=t.long(), actual_cmp_seq_kvlen=lengths)
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        call(q.int(), k.int(), v.int(), 0.3, 4, 2, 64, 5, 16, 32, 16, **good)
    with pytest.raises(TypeError, match="query's dtype"):
        call(q, k.float(), v, 0.3, 4, 2, 64, 5, 16, 32, 16, **good)
