"""MoE routing ops against CPU references written from their definitions (custom_op_refs.py, moe_*):
npu_moe_gating_top_k_softmax, npu_moe_gating_top_k (grouped top-k, hash routing, its backward),
npu_moe_init_routing, npu_moe_init_routing_v2 (dropless / drop-pad, active ranges, count / cumsum / key-value
statistics, gather / scatter indices, static and dynamic int8 quantization), npu_moe_finalize_routing,
npu_moe_compute_expert_tokens, npu_moe_token_permute / npu_moe_token_unpermute (with their grad ops and autograd)
and npu_moe_re_routing; equal scores / experts in the inputs pin the documented orders. Meta shapes, device ops,
clear errors."""

import pytest
import torch

from op_refs import moe_routing as ref
import torch_npu

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}


def _npu(t):
    return None if t is None else t.npu()


def _meta(t):
    return None if t is None else t.to("meta")


def _device_ops(name):
    torch.npu.synchronize()
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def _assert_int_close(got, expected, tol=0):
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, expected.shape, got.dtype)
    if got.numel():
        assert (got.int() - expected.int()).abs().max() <= tol


# ------------------------------------------------------------------------------- npu_moe_gating_top_k_softmax


@pytest.mark.parametrize("dtype", FLOATS)
def test_gating_top_k_softmax(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 10, generator=g).to(dtype)
    x[2] = 0.5  # all experts tie: the lowest indices win
    x[3, 7] = x[3, 4] = x[3].max() + 1  # two tie for first: expert 4 before 7
    finished = torch.tensor([False, True, False, False, True, False])
    for fin in (None, finished):
        y, idx, rows = torch_npu.npu_moe_gating_top_k_softmax(x.npu(), _npu(fin), k=3)
        ey, eidx, erows = ref.moe_gating_top_k_softmax(x, fin, 3)
        assert y.dtype == dtype and idx.dtype == rows.dtype == torch.int32
        torch.testing.assert_close(y.cpu(), ey, **TOL[dtype])
        assert torch.equal(idx.cpu(), eidx) and torch.equal(rows.cpu(), erows)
    assert idx.cpu()[2].tolist() == [0, 1, 2] and idx.cpu()[1].tolist() == [10, 10, 10]
    assert idx.cpu()[3, :2].tolist() == [4, 7]


def test_gating_top_k_softmax_3d_empty_meta_errors():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 8, generator=g)
    fin = torch.tensor([[True, False, False], [False, False, True]])
    before = _device_ops("aclnnMoeGatingTopKSoftmax")
    y, idx, rows = torch_npu.npu_moe_gating_top_k_softmax(x.npu(), fin.npu(), 2)
    assert _device_ops("aclnnMoeGatingTopKSoftmax") == before + 1
    ey, eidx, erows = ref.moe_gating_top_k_softmax(x, fin, 2)
    assert y.shape == idx.shape == rows.shape == (2, 3, 2)
    torch.testing.assert_close(y.cpu(), ey)
    assert torch.equal(idx.cpu(), eidx) and torch.equal(rows.cpu(), erows)
    y0, idx0, _ = torch_npu.npu_moe_gating_top_k_softmax(x.npu(), None, 0)
    assert y0.shape == idx0.shape == (2, 3, 0)
    my, midx, mrows = torch.ops.npu.npu_moe_gating_top_k_softmax(x.to("meta"), fin.to("meta"), 5)
    assert my.shape == (2, 3, 5) and midx.dtype == mrows.dtype == torch.int32 and my.dtype == torch.float32
    with pytest.raises(ValueError, match="k must be in"):
        torch_npu.npu_moe_gating_top_k_softmax(x.npu(), None, 9)
    with pytest.raises(TypeError, match="finished must be bool"):
        torch_npu.npu_moe_gating_top_k_softmax(x.npu(), fin.int().npu(), 2)
    with pytest.raises(ValueError, match="without the expert"):
        torch_npu.npu_moe_gating_top_k_softmax(x.npu(), fin[0].npu(), 2)


# -------------------------------------------------------------------------------------- npu_moe_gating_top_k

GROUPINGS = [dict(k=4, k_group=2, group_count=4, group_select_mode=1),
             dict(k=6, k_group=3, group_count=8, group_select_mode=0),
             dict(k=3, k_group=1, group_count=1, group_select_mode=0)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("norm_type", [0, 1])
@pytest.mark.parametrize("grouping", range(len(GROUPINGS)))
def test_gating_top_k(dtype, norm_type, grouping):
    g = torch.Generator().manual_seed(2 + grouping)
    args = dict(GROUPINGS[grouping], norm_type=norm_type, routed_scaling_factor=2.5)
    x = torch.randn(9, 32, generator=g).to(dtype)
    x[4] = 0.25  # every expert ties: groups and experts by index
    bias = (torch.randn(32, generator=g) * 0.1).to(dtype)
    y, idx, norm = torch_npu.npu_moe_gating_top_k(x.npu(), bias=bias.npu(), **args)
    ey, eidx, enorm = ref.moe_gating_top_k(x, bias=bias, **args)
    assert y.dtype == dtype and idx.dtype == torch.int32 and norm.dtype == torch.float32
    assert torch.equal(idx.cpu(), eidx)
    torch.testing.assert_close(y.cpu(), ey, **TOL[dtype])
    torch.testing.assert_close(norm.cpu(), enorm)
    # Without bias the picks are the best unbiased scores.
    _, idx_nb, _ = torch_npu.npu_moe_gating_top_k(x.npu(), **args)
    assert torch.equal(idx_nb.cpu(), ref.moe_gating_top_k(x, **args)[1])


@pytest.mark.parametrize("norm_type", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gating_top_k_gradient(norm_type, dtype):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(5, 16, generator=g).to(dtype)
    bias = (torch.randn(16, generator=g) * 0.1).to(dtype)
    grad = torch.randn(5, 4, generator=g).to(dtype)
    args = dict(k=4, k_group=2, group_count=4, group_select_mode=1, norm_type=norm_type, routed_scaling_factor=1.5)
    xn = x.npu().requires_grad_()
    y, _, _ = torch_npu.npu_moe_gating_top_k(xn, bias=bias.npu(), **args)
    y.backward(grad.npu())
    xc = x.float().requires_grad_()
    ey, _, _ = ref.moe_gating_top_k(xc, bias=bias, **args)
    ey.float().backward(grad.float())
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-3)
    assert xn.grad.dtype == dtype
    torch.testing.assert_close(xn.grad.cpu().float(), xc.grad, **tol)


def test_gating_top_k_backward_op_and_hash_routing():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(6, 12, generator=g)
    idx = torch.stack([torch.randperm(12, generator=g)[:3] for _ in range(6)]).int()
    grad = torch.randn(6, 3, generator=g)
    for norm_type in (0, 1):
        scores_fn = torch.softmax if norm_type == 0 else (lambda t, dim: torch.sigmoid(t))
        xc = x.clone().requires_grad_()
        w = scores_fn(xc, dim=-1).gather(1, idx.long())
        if norm_type == 1:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        (w * 0.5 * grad).sum().backward()
        x_norm = scores_fn(x, dim=-1)
        before = _device_ops("aclnnMoeGatingTopKBackward")
        got = torch_npu.npu_moe_gating_top_k_backward(x_norm.npu(), grad.npu(), idx.npu(), norm_type=norm_type,
                                                      routed_scaling_factor=0.5)
        assert _device_ops("aclnnMoeGatingTopKBackward") == before + 1
        torch.testing.assert_close(got.cpu(), xc.grad, rtol=1e-4, atol=1e-6)
    # Hash routing: the experts come from tid2eid[input_ids]; the weights as usual.
    tid2eid = torch.randint(0, 12, (20, 3), generator=g, dtype=torch.int32)
    ids = torch.randint(0, 20, (6,), generator=g)
    before = _device_ops("aclnnMoeGatingTopKV2")
    y, got_idx, _ = torch_npu.npu_moe_gating_top_k(x.npu(), 3, input_ids=ids.npu(), tid2eid=tid2eid.npu(), norm_type=1)
    assert _device_ops("aclnnMoeGatingTopKV2") == before + 1
    ey, eidx, _ = ref.moe_gating_top_k(x, 3, input_ids=ids, tid2eid=tid2eid, norm_type=1)
    assert torch.equal(got_idx.cpu(), eidx) and torch.equal(eidx, tid2eid[ids])
    torch.testing.assert_close(y.cpu(), ey)


def test_gating_top_k_meta_errors_device_op():
    x = torch.randn(4, 16)
    before = _device_ops("aclnnMoeGatingTopK")
    torch_npu.npu_moe_gating_top_k(x.npu(), 2)
    assert _device_ops("aclnnMoeGatingTopK") == before + 1
    y, idx, norm = torch.ops.npu.npu_moe_gating_top_k(x.to(torch.bfloat16).to("meta"), 3, k_group=2, group_count=4)
    assert y.shape == idx.shape == (4, 3) and y.dtype == torch.bfloat16 and idx.dtype == torch.int32
    assert norm.shape == (4, 16) and norm.dtype == torch.float32
    back = torch.ops.npu.npu_moe_gating_top_k_backward(norm, y, idx)
    assert back.shape == (4, 16) and back.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="renorm must be 0"):
        torch_npu.npu_moe_gating_top_k(x.npu(), 2, renorm=1)
    with pytest.raises(ValueError, match="group_count must divide"):
        torch_npu.npu_moe_gating_top_k(x.npu(), 2, k_group=1, group_count=3)
    with pytest.raises(ValueError, match="k must be in"):
        torch_npu.npu_moe_gating_top_k(x.npu(), 5, k_group=1, group_count=4)
    with pytest.raises(ValueError, match="input_ids and tid2eid"):
        torch_npu.npu_moe_gating_top_k(x.npu(), 2, input_ids=torch.zeros(4, dtype=torch.int32).npu())
    with pytest.raises(TypeError, match="bias must have x's dtype"):
        torch_npu.npu_moe_gating_top_k(x.npu(), 2, bias=torch.zeros(16).half().npu())


# -------------------------------------------------------------------------------------- npu_moe_init_routing


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("active_num", [7, 4, 100])
def test_init_routing(dtype, active_num):
    g = torch.Generator().manual_seed(10)
    n, k = 7, 3
    x = torch.randn(n, 5, generator=g).to(dtype)
    row_idx = torch.arange(n * k, dtype=torch.int32).reshape(k, n).t().contiguous()
    expert_idx = torch.randint(0, 4, (n, k), generator=g, dtype=torch.int32)  # many equal experts
    got = torch_npu.npu_moe_init_routing(x.npu(), row_idx.npu(), expert_idx.npu(), active_num)
    expected = ref.moe_init_routing(x, row_idx, expert_idx, active_num)
    assert got[0].shape == (min(active_num, n) * k, 5) and got[1].dtype == got[2].dtype == torch.int32
    for a, b in zip(got, expected):
        assert torch.equal(a.cpu(), b)


def test_init_routing_meta_errors_device_op():
    x, experts = torch.randn(4, 6), torch.zeros(4, 2, dtype=torch.int32)
    rows = torch.arange(8, dtype=torch.int32).reshape(2, 4).t().contiguous()
    before = _device_ops("aclnnMoeInitRouting")
    torch_npu.npu_moe_init_routing(x.npu(), rows.npu(), experts.npu(), 4)
    assert _device_ops("aclnnMoeInitRouting") == before + 1
    ex, er, ee = torch.ops.npu.npu_moe_init_routing(x.to("meta"), rows.to("meta"), experts.to("meta"), 3)
    assert ex.shape == (6, 6) and er.shape == ee.shape == (8,) and er.dtype == torch.int32
    with pytest.raises(TypeError, match="int32"):
        torch_npu.npu_moe_init_routing(x.npu(), rows.long().npu(), experts.npu(), 4)
    with pytest.raises(ValueError, match="active_num"):
        torch_npu.npu_moe_init_routing(x.npu(), rows.npu(), experts.npu(), -1)


# ----------------------------------------------------------------------------------- npu_moe_init_routing_v2


def _routing_v2_case(dtype, quant_mode, g, tokens=9, h=6, k=3, expert_num=8, scale_rows=None):
    if dtype == torch.int8:
        x = torch.randint(-100, 100, (tokens, h), generator=g, dtype=torch.int8)
    else:
        x = torch.randn(tokens, h, generator=g).to(dtype)
    expert_idx = torch.randint(0, expert_num, (tokens, k), generator=g, dtype=torch.int32)
    expert_idx[0] = expert_idx[1] = 3  # equal experts across tokens and k slots
    scale = offset = None
    if quant_mode == -1:
        scale = torch.rand(tokens, generator=g)
    elif quant_mode == 0:
        scale, offset = torch.rand(1, generator=g) * 50, torch.randn(1, generator=g)
    elif scale_rows:
        scale = torch.rand(scale_rows, h, generator=g) + 0.5
    return x, expert_idx, scale, offset


def _check_routing_v2(x, expert_idx, scale, offset, **kw):
    got = torch_npu.npu_moe_init_routing_v2(x.npu(), expert_idx.npu(), scale=_npu(scale), offset=_npu(offset),
                                            expert_tokens_num_flag=True, **kw)
    expected = ref.moe_init_routing_v2(x, expert_idx, scale, offset, **kw)
    ex, row_idx, counts, scales = (t.cpu() for t in got)
    if kw.get("quant_mode", -1) == -1:
        assert ex.dtype == x.dtype and torch.equal(ex, expected[0])
    else:
        _assert_int_close(ex, expected[0], tol=1)
    assert row_idx.dtype == torch.int32 and torch.equal(row_idx, expected[1])
    assert counts.dtype == torch.int64 and torch.equal(counts, expected[2])
    assert scales.dtype == torch.float32
    torch.testing.assert_close(scales, expected[3], rtol=1e-6, atol=1e-7)
    return got


@pytest.mark.parametrize("dtype", FLOATS + [torch.int8])
@pytest.mark.parametrize("row_idx_type", [0, 1])
@pytest.mark.parametrize("tokens_type", [0, 1, 2])
def test_init_routing_v2_dropless(dtype, row_idx_type, tokens_type):
    g = torch.Generator().manual_seed(20 + tokens_type)
    x, expert_idx, scale, _ = _routing_v2_case(dtype, -1, g)
    for active_range, active_num in (([], -1), ([2, 6], 0), ([0, 8], 11), ([1, 5], 4)):
        for s in (None, scale):
            _check_routing_v2(x, expert_idx, s, None, active_num=active_num, expert_num=8,
                              expert_tokens_num_type=tokens_type, active_expert_range=active_range,
                              row_idx_type=row_idx_type)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("drop_pad_mode", [0, 1])
def test_init_routing_v2_quantized(dtype, drop_pad_mode):
    g = torch.Generator().manual_seed(30 + drop_pad_mode)
    mode_args = dict(expert_capacity=2, expert_num=8, drop_pad_mode=1) if drop_pad_mode else dict(
        expert_num=8, active_expert_range=[1, 7])
    rng = 8 if drop_pad_mode else 6
    for quant_mode, scale_rows in ((0, None), (1, None), (1, 1), (1, rng)):
        x, expert_idx, scale, offset = _routing_v2_case(dtype, quant_mode, g, scale_rows=scale_rows)
        got = _check_routing_v2(x, expert_idx, scale, offset, quant_mode=quant_mode, expert_tokens_num_type=1,
                                **mode_args)
        assert got[0].dtype == torch.int8


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_init_routing_v2_drop_pad(dtype):
    g = torch.Generator().manual_seed(40)
    x, expert_idx, scale, _ = _routing_v2_case(dtype, -1, g, tokens=10)
    for capacity, tokens_type in ((1, 1), (2, 0), (4, 2)):
        got = _check_routing_v2(x, expert_idx, scale, None, expert_capacity=capacity, expert_num=8, drop_pad_mode=1,
                                expert_tokens_num_type=tokens_type)
        assert got[0].shape == (8, capacity, 6)
        dropped = (got[1].cpu() == -1).sum().item()
        kept = torch.clamp(torch.bincount(expert_idx.reshape(-1).long(), minlength=8), max=capacity).sum().item()
        assert dropped == expert_idx.numel() - kept


def test_init_routing_v2_empty_meta_errors_device_op():
    # No tokens: empty outputs, zero statistics (scales are not checked, as upstream).
    x = torch.randn(0, 16).bfloat16()
    ex, ri, counts, sc = torch_npu.npu_moe_init_routing_v2(
        x.npu(), torch.zeros(0, 4, dtype=torch.int32).npu(), scale=torch.zeros(0).npu(), active_num=0,
        expert_num=32, expert_tokens_num_type=1, expert_tokens_num_flag=True, quant_mode=1,
        active_expert_range=[0, 16], row_idx_type=1)
    assert ex.numel() == ri.numel() == sc.numel() == 0 and counts.shape == (16,) and (counts.cpu() == 0).all()
    x, experts = torch.randn(5, 8), torch.randint(0, 4, (5, 2), dtype=torch.int32)
    before = _device_ops("aclnnMoeInitRoutingV3")
    torch_npu.npu_moe_init_routing_v2(x.npu(), experts.npu(), expert_num=4)
    assert _device_ops("aclnnMoeInitRoutingV3") == before + 1
    m = torch.ops.npu.npu_moe_init_routing_v2(x.to("meta"), experts.to("meta"), active_num=3, expert_num=4,
                                              expert_tokens_num_type=2, quant_mode=1)
    assert m[0].shape == (3, 8) and m[0].dtype == torch.int8 and m[1].shape == (10,) and m[1].dtype == torch.int32
    assert m[2].shape == (4, 2) and m[2].dtype == torch.int64 and m[3].shape == (3,) and m[3].dtype == torch.float32
    m = torch.ops.npu.npu_moe_init_routing_v2(x.half().to("meta"), experts.to("meta"), expert_capacity=3,
                                              expert_num=4, drop_pad_mode=1, active_expert_range=[1, 3])
    assert m[0].shape == (4, 3, 8) and m[0].dtype == torch.float16 and m[2].shape == (2,) and m[3].shape == (12,)
    with pytest.raises(ValueError, match="chip number format"):
        torch_npu.npu_moe_init_routing_v2(x.npu(), experts.npu(), expert_num=4, quant_mode=3)
    with pytest.raises(ValueError, match="x_dtype"):
        torch_npu.npu_moe_init_routing_v2(x.npu(), experts.npu(), expert_num=4, x_dtype=290)
    with pytest.raises(ValueError, match="gather indices"):
        torch_npu.npu_moe_init_routing_v2(x.npu(), experts.npu(), expert_num=4, drop_pad_mode=1, expert_capacity=2,
                                          row_idx_type=1)
    with pytest.raises(ValueError, match="active_expert_range"):
        torch_npu.npu_moe_init_routing_v2(x.npu(), experts.npu(), expert_num=4, active_expert_range=[2, 6])
    with pytest.raises(ValueError, match="static quantization needs scale"):
        torch_npu.npu_moe_init_routing_v2(x.npu(), experts.npu(), expert_num=4, quant_mode=0)


# ---------------------------------------------------------------------------------- npu_moe_finalize_routing


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_finalize_routing(dtype, mode):
    g = torch.Generator().manual_seed(50 + mode)
    tokens, k, h, experts, capacity = 5, 3, 4, 6, 4
    if mode in (0, 2):
        rows = torch.randn(tokens * k, h, generator=g).to(dtype)
        dst = torch.randperm(tokens * k, generator=g).int()
    else:
        rows = torch.randn(experts, capacity, h, generator=g).to(dtype)
        dst = torch.randperm(experts * capacity, generator=g)[:tokens * k].int()
        dst[[1, 7]] = -1  # dropped
    skip1, skip2 = (torch.randn(tokens, h, generator=g).to(dtype) for _ in range(2))
    bias = torch.randn(experts, h, generator=g).to(dtype)
    scales = torch.rand(tokens, k, generator=g).to(dtype)
    expert_for_row = torch.randint(0, experts, (tokens, k), generator=g, dtype=torch.int32)
    for args in ((skip1, skip2, bias, scales, dst, expert_for_row), (skip1, None, None, scales, dst, None),
                 (None, None, bias, scales, dst, expert_for_row)):
        got = torch_npu.npu_moe_finalize_routing(rows.npu(), *(_npu(a) for a in args), drop_pad_mode=mode)
        expected = ref.moe_finalize_routing(rows, *args, drop_pad_mode=mode)
        assert got.shape == (tokens, h) and got.dtype == dtype
        torch.testing.assert_close(got.cpu(), expected, **TOL[dtype])
    # Without scales, k tells the tokens apart.
    got = torch_npu.npu_moe_finalize_routing(rows.npu(), skip1.npu(), None, bias.npu(), None, dst.npu(),
                                             expert_for_row.npu(), drop_pad_mode=mode, k=k)
    expected = ref.moe_finalize_routing(rows, skip1, None, bias, None, dst, expert_for_row, drop_pad_mode=mode, k=k)
    torch.testing.assert_close(got.cpu(), expected, **TOL[dtype])


def test_finalize_routing_meta_errors_device_op():
    rows, dst = torch.randn(6, 4), torch.arange(6, dtype=torch.int32)
    before = _device_ops("aclnnMoeFinalizeRoutingV2")
    torch_npu.npu_moe_finalize_routing(rows.npu(), None, None, None, None, dst.npu(), None, k=2)
    assert _device_ops("aclnnMoeFinalizeRoutingV2") == before + 1
    m = torch.ops.npu.npu_moe_finalize_routing(torch.randn(8, 3, 4).to("meta"), None, None, None,
                                               torch.randn(5, 2).to("meta"), dst.repeat(2)[:10].to("meta"), None, 1, 1)
    assert m.shape == (5, 4)
    with pytest.raises(ValueError, match="drop_pad_mode"):
        torch_npu.npu_moe_finalize_routing(rows.npu(), None, None, None, None, dst.npu(), None, drop_pad_mode=4)
    with pytest.raises(ValueError, match="expert_for_source_row must be given"):
        torch_npu.npu_moe_finalize_routing(rows.npu(), None, None, torch.randn(3, 4).npu(), None, dst.npu(), None)
    with pytest.raises(ValueError, match="not tokens"):
        torch_npu.npu_moe_finalize_routing(rows.npu(), None, None, None, None, dst.npu(), None, k=4)
    with pytest.raises(RuntimeError, match="expandedRowIdx"):
        torch_npu.npu_moe_finalize_routing(rows.npu(), None, None, None, None, (dst + 3).npu(), None).cpu()


# ----------------------------------------------------------------------------- npu_moe_compute_expert_tokens


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_compute_expert_tokens(index_dtype):
    g = torch.Generator().manual_seed(60)
    num_expert = 9
    sorted_experts = torch.randint(0, num_expert + 1, (40,), generator=g).sort().values.to(index_dtype)  # incl. 9
    before = _device_ops("aclnnMoeComputeExpertTokens")
    got = torch_npu.npu_moe_compute_expert_tokens(sorted_experts.npu(), num_expert)
    assert _device_ops("aclnnMoeComputeExpertTokens") == before + 1
    assert got.dtype == index_dtype and torch.equal(got.cpu(), ref.moe_compute_expert_tokens(sorted_experts,
                                                                                            num_expert))
    assert torch.ops.npu.npu_moe_compute_expert_tokens(sorted_experts.to("meta"), 5).shape == (5,)
    with pytest.raises(ValueError, match="num_expert"):
        torch_npu.npu_moe_compute_expert_tokens(sorted_experts.npu(), 0)
    with pytest.raises(TypeError, match="int32"):
        torch_npu.npu_moe_compute_expert_tokens(sorted_experts.float().npu(), 3)


# ---------------------------------------------------------------------------- permute / unpermute (+ grads)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("topk", [1, 3])
@pytest.mark.parametrize("num_out_tokens", [None, 5, -2])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_token_permute_unpermute(dtype, topk, num_out_tokens, index_dtype):
    g = torch.Generator().manual_seed(70 + topk)
    tokens = torch.randn(6, 8, generator=g).to(dtype)
    indices = torch.randint(0, 4, (6, topk) if topk > 1 else (6,), generator=g).to(index_dtype)
    permuted, sorted_indices = torch_npu.npu_moe_token_permute(tokens.npu(), indices.npu(), num_out_tokens)
    e_permuted, e_sorted = ref.moe_token_permute(tokens, indices, num_out_tokens)
    assert sorted_indices.dtype == torch.int32 and torch.equal(sorted_indices.cpu(), e_sorted)
    assert torch.equal(permuted.cpu(), e_permuted)
    probs = torch.rand(6, topk, generator=g).to(dtype) if topk > 1 else None
    back = torch_npu.npu_moe_token_unpermute(permuted, sorted_indices, probs=_npu(probs))
    expected = ref.moe_token_unpermute(e_permuted, e_sorted, probs)
    assert back.dtype == dtype and back.shape == (6, 8)
    torch.testing.assert_close(back.cpu(), expected, **TOL[dtype])
    if num_out_tokens is None and topk == 1:
        assert torch.equal(back.cpu(), tokens)  # an exact round trip


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("topk", [1, 2])
def test_token_permute_unpermute_gradients(dtype, topk):
    g = torch.Generator().manual_seed(80 + topk)
    tokens = torch.randn(5, 4, generator=g).to(dtype)
    indices = torch.randint(0, 3, (5, topk), generator=g)
    probs = torch.rand(5, topk, generator=g)  # float32 probs with any token dtype
    upstream = torch.randn(5, 4, generator=g).to(dtype)
    tn, pn = tokens.npu().requires_grad_(), probs.npu().requires_grad_()
    permuted, sorted_indices = torch_npu.npu_moe_token_permute(tn, indices.npu(), num_out_tokens=4 * topk)
    out = torch_npu.npu_moe_token_unpermute(permuted, sorted_indices, probs=pn)
    out.backward(upstream.npu())
    tc, pc = tokens.float().requires_grad_(), probs.clone().requires_grad_()
    e_permuted, e_sorted = ref.moe_token_permute(tc, indices, num_out_tokens=4 * topk)
    ref.moe_token_unpermute(e_permuted, e_sorted, pc).backward(upstream.float())
    tol = TOL[dtype] if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    assert tn.grad.dtype == dtype and pn.grad.dtype == torch.float32
    torch.testing.assert_close(tn.grad.cpu().float(), tc.grad, **tol)
    torch.testing.assert_close(pn.grad.cpu(), pc.grad, **tol)


def test_token_grad_ops_and_padded_mode():
    g = torch.Generator().manual_seed(90)
    tokens, indices = torch.randn(6, 4, generator=g), torch.randint(0, 3, (6, 2), generator=g)
    permuted, sorted_indices = ref.moe_token_permute(tokens, indices)
    grad_rows = torch.randn(12, 4, generator=g)
    before = _device_ops("aclnnMoeTokenPermuteGrad")
    got = torch_npu.npu_moe_token_permute_grad(tokens.npu(), grad_rows.npu(), indices.npu(), sorted_indices.npu())
    got_v2 = torch_npu.npu_moe_token_permute_grad_v2(grad_rows.npu(), sorted_indices.npu(), 6, torch.float32, 2)
    assert _device_ops("aclnnMoeTokenPermuteGrad") == before + 2
    tc = tokens.clone().requires_grad_()
    ref.moe_token_permute(tc, indices)[0].backward(grad_rows)
    torch.testing.assert_close(got.cpu(), tc.grad)
    torch.testing.assert_close(got_v2.cpu(), tc.grad)
    probs, grad_out = torch.rand(6, 2, generator=g), torch.randn(6, 4, generator=g)
    pc, rc = probs.clone().requires_grad_(), permuted.clone().requires_grad_()
    ref.moe_token_unpermute(rc, sorted_indices, pc).backward(grad_out)
    before = _device_ops("aclnnMoeTokenUnpermuteGrad")
    g_rows, g_probs = torch_npu.npu_moe_token_unpermute_grad(permuted.npu(), grad_out.npu(), sorted_indices.npu(),
                                                             probs=probs.npu())
    v_rows, v_probs = torch_npu.npu_moe_token_unpermute_grad_v2(grad_out.npu(), sorted_indices.npu(), 12,
                                                                torch.float32, probs=probs.npu(),
                                                                permuted_tokens=permuted.npu())
    assert _device_ops("aclnnMoeTokenUnpermuteGrad") == before + 2
    for rows_, probs_ in ((g_rows, g_probs), (v_rows, v_probs)):
        torch.testing.assert_close(rows_.cpu(), rc.grad)
        torch.testing.assert_close(probs_.cpu(), pc.grad)
    # Padded mode: indices are the token ids of each [expert, capacity] slot; restore_shape the tokens' shape.
    ids = torch.randint(0, 6, (3, 4), generator=g)
    slot_probs = torch.rand(3, 4, generator=g)
    tn, pn = tokens.npu().requires_grad_(), slot_probs.npu().requires_grad_()
    p_rows, p_sorted = torch_npu.npu_moe_token_permute(tn, ids.npu(), padded_mode=True)
    back = torch_npu.npu_moe_token_unpermute(p_rows, p_sorted, probs=pn, padded_mode=True, restore_shape=[6, 4])
    back.backward(grad_out.npu())
    tc, pc = tokens.clone().requires_grad_(), slot_probs.clone().requires_grad_()
    e_rows, e_sorted = ref.moe_token_permute(tc, ids, padded_mode=True)
    expected = ref.moe_token_unpermute(e_rows, e_sorted, pc, padded_mode=True, restore_shape=(6, 4))
    expected.backward(grad_out)
    assert torch.equal(p_rows.detach().cpu(), e_rows.detach()) and torch.equal(p_sorted.cpu(), e_sorted)
    torch.testing.assert_close(back.detach().cpu(), expected.detach())
    torch.testing.assert_close(tn.grad.cpu(), tc.grad)
    torch.testing.assert_close(pn.grad.cpu(), pc.grad)


def test_token_permute_meta_errors_device_op():
    tokens, indices = torch.randn(4, 8), torch.randint(0, 3, (4, 2))
    before = (_device_ops("aclnnMoeTokenPermute"), _device_ops("aclnnMoeTokenUnpermute"))
    permuted, sorted_indices = torch_npu.npu_moe_token_permute(tokens.npu(), indices.npu())
    torch_npu.npu_moe_token_unpermute(permuted, sorted_indices)
    assert (_device_ops("aclnnMoeTokenPermute"), _device_ops("aclnnMoeTokenUnpermute")) == (before[0] + 1,
                                                                                            before[1] + 1)
    mp, ms = torch.ops.npu.npu_moe_token_permute(tokens.to("meta"), indices.to("meta"), -3)
    assert mp.shape == (5, 8) and ms.shape == (8,) and ms.dtype == torch.int32
    mu = torch.ops.npu.npu_moe_token_unpermute(mp.new_empty(8, 8), ms, torch.rand(4, 2).to("meta"))
    assert mu.shape == (4, 8)
    mg = torch.ops.npu.npu_moe_token_unpermute_grad(mp.new_empty(8, 8), mp.new_empty(8, 8), ms)
    assert mg[0].shape == (8, 8) and mg[1].dim() == 0
    with pytest.raises(ValueError, match="drops more than"):
        torch_npu.npu_moe_token_permute(tokens.npu(), indices.npu(), -9)
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        torch_npu.npu_moe_token_permute(tokens.npu(), indices.float().npu())
    with pytest.raises(ValueError, match="restore_shape"):
        torch_npu.npu_moe_token_unpermute(permuted, sorted_indices, padded_mode=True)
    with pytest.raises(ValueError, match="not tokens \\* topk"):
        torch_npu.npu_moe_token_unpermute(permuted, sorted_indices, probs=torch.rand(8, 3).npu())


# -------------------------------------------------------------------------------------- npu_moe_re_routing


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int8])
@pytest.mark.parametrize("idx_type", [0, 1])
@pytest.mark.parametrize("num_type", [0, 1])
def test_re_routing(dtype, idx_type, num_type):
    g = torch.Generator().manual_seed(100)
    counts = torch.randint(0, 4, (3, 5), generator=g, dtype=torch.int32)
    counts[1, 2] = 0
    a = int(counts.sum())
    tokens = torch.randint(-50, 50, (a, 6), generator=g).to(dtype) if dtype == torch.int8 else \
        torch.randn(a, 6, generator=g).to(dtype)
    scales = torch.rand(a, generator=g)
    for s in (scales, None):
        got = torch_npu.npu_moe_re_routing(tokens.npu(), counts.npu(), per_token_scales=_npu(s),
                                           expert_token_num_type=num_type, idx_type=idx_type)
        expected = ref.moe_re_routing(tokens, counts, s, num_type, idx_type)
        assert torch.equal(got[0].cpu(), expected[0])
        if s is not None:
            assert torch.equal(got[1].cpu(), expected[1])
        assert got[1].shape == (a,) and got[1].dtype == torch.float32
        assert got[2].dtype == torch.int32 and torch.equal(got[2].cpu(), expected[2])
        assert got[3].dtype == torch.int32 and torch.equal(got[3].cpu(), expected[3])


def test_re_routing_meta_errors_device_op():
    tokens, counts = torch.randn(6, 4).half(), torch.tensor([[1, 2], [3, 0]], dtype=torch.int64)
    before = _device_ops("aclnnMoeReRouting")
    torch_npu.npu_moe_re_routing(tokens.npu(), counts.npu())
    assert _device_ops("aclnnMoeReRouting") == before + 1
    m = torch.ops.npu.npu_moe_re_routing(tokens.to("meta"), counts.to("meta"))
    assert m[0].shape == (6, 4) and m[1].shape == (6,) and m[2].dtype == torch.int32 and m[3].dtype == torch.int64
    # Counts that do not add up to the tokens (as upstream's own shape-only test passes): shapes still hold.
    big = torch.full((2, 2), 5, dtype=torch.int64)
    out = torch_npu.npu_moe_re_routing(tokens.npu(), big.npu())
    assert out[0].shape == (6, 4) and torch.equal(out[3].cpu(), torch.tensor([10, 10]))
    with pytest.raises(ValueError, match="tokens_dtype"):
        torch_npu.npu_moe_re_routing(tokens.npu(), counts.npu(), tokens_dtype=290)
    with pytest.raises(ValueError, match="idx_type"):
        torch_npu.npu_moe_re_routing(tokens.npu(), counts.npu(), idx_type=2)
    with pytest.raises(RuntimeError, match="must not be negative"):
        torch_npu.npu_moe_re_routing(tokens.npu(), (-counts).npu())[0].cpu()
