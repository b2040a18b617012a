"""MoE grouped matmuls against the CPU references in custom_op_refs.py: npu_grouped_matmul (x[i] @ weight[i], x's rows
split over the experts, k split; group_list as cumulative ends / sizes / [expert, size] rows or as a list; every
split_item; bias; weight-only int8 / int4, A8W8, A4W4, A8W4 with per-token scales; activations; float32 / float16 /
bfloat16) and its gradients, npu_grouped_matmul_finalize_routing, npu_grouped_matmul_add(_); Meta shapes, device
ops, clear errors."""

import pytest
import torch

import custom_op_refs as shared_ref
from op_refs import grouped_matmul as ref
import torch_npu

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def _randn(g, *shape, dtype=torch.float32, scale=0.5):
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _int8(g, *shape, low=-8, high=8):
    return torch.randint(low, high, shape, generator=g, dtype=torch.int8)


def _int4_packed(g, *shape):
    """int32 words carrying 8 random int4 values each."""
    return torch.randint(-2 ** 31, 2 ** 31 - 1, shape, generator=g, dtype=torch.int32)


def _npu(tensors):
    return None if tensors is None else [t.npu() for t in tensors]


def _bias_dtype(dtype):
    return torch.float32 if dtype == torch.bfloat16 else dtype  # as torch_npu pairs them


def _assert_outputs(got, expected, tol):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
        if e.dtype.is_floating_point:
            torch.testing.assert_close(g.cpu().float(), e.float(), **tol)
        else:  # int8 outputs may round the other way at .5
            assert (g.cpu().int() - e.int()).abs().max().item() <= (0 if e.dtype == torch.int32 else 1)


def _run_both(x, weight, tol, **kw):
    """npu_grouped_matmul on npu copies of the inputs against the reference on the CPU ones."""
    lists = ("bias", "scale", "offset", "antiquant_scale", "antiquant_offset", "per_token_scale")
    npu_kw = {k: (_npu(v) if k in lists else v.npu() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    got = torch_npu.npu_grouped_matmul(_npu(x), _npu(weight), **npu_kw)
    expected = ref.grouped_matmul(x, weight, **kw)
    _assert_outputs(got, expected, tol)
    return got


@pytest.mark.parametrize("dtype", FLOATS)
def test_pairs_any_rank(dtype):
    g = torch.Generator().manual_seed(0)
    x = [_randn(g, 5, 16, dtype=dtype), _randn(g, 2, 3, 8, dtype=dtype)]
    w = [_randn(g, 16, 6, dtype=dtype), _randn(g, 8, 4, dtype=dtype)]
    b = [_randn(g, 6, dtype=_bias_dtype(dtype)), _randn(g, 4, dtype=_bias_dtype(dtype))]
    got = _run_both(x, w, TOL[dtype], bias=b, split_item=0, group_type=-1)
    assert got[1].shape == (2, 3, 4)
    # Several x, one output: their rows follow each other (group_type 0 with or without a matching group_list).
    x2 = [_randn(g, 3, 16, dtype=dtype), _randn(g, 4, 16, dtype=dtype)]
    w2 = [_randn(g, 16, 6, dtype=dtype), _randn(g, 16, 6, dtype=dtype)]
    _run_both(x2, w2, TOL[dtype], split_item=2, group_type=0)
    _run_both(x2, w2, TOL[dtype], split_item=3, group_type=0, group_list=torch.tensor([3, 7]))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("list_type", [0, 1, 2])
@pytest.mark.parametrize("single_weight", [True, False])
def test_split_rows_over_experts(dtype, list_type, single_weight):
    g = torch.Generator().manual_seed(1)
    x = _randn(g, 12, 8, dtype=dtype)
    w3 = _randn(g, 3, 8, 5, dtype=dtype)
    b2 = _randn(g, 3, 5, dtype=_bias_dtype(dtype))
    weight, bias = ([w3], [b2]) if single_weight else (list(w3.unbind(0)), list(b2.unbind(0)))
    # sizes 4, 0, 6: an empty group, and 2 rows past the groups (zero in the single output)
    gl = {0: torch.tensor([4, 4, 10]), 1: torch.tensor([4, 0, 6]), 2: torch.tensor([[2, 4], [0, 0], [1, 6]])}[list_type]
    for split_item in (3, 0):
        got = _run_both([x], weight, TOL[dtype], bias=bias, group_list=gl, split_item=split_item, group_type=0,
                        group_list_type=list_type)
        if split_item == 3:
            assert got[0].shape == (12, 5) and not got[0][10:].cpu().any()
        else:
            assert [t.shape[0] for t in got] == [4, 0, 6]


@pytest.mark.parametrize("dtype", FLOATS)
def test_split_k(dtype):
    g = torch.Generator().manual_seed(2)
    x = _randn(g, 10, 6, dtype=dtype).t()  # [m, k] as torch_npu takes it: a transposed view
    w = _randn(g, 10, 4, dtype=dtype)
    for list_type, gl in ((0, torch.tensor([2, 5, 5, 10])), (1, torch.tensor([2, 3, 0, 5]))):
        got = _run_both([x], [w], TOL[dtype], group_list=gl, split_item=3, group_type=2, group_list_type=list_type)
        assert got[0].shape == (4, 6, 4)
    # One output per weight, k split by the weights' rows.
    ws = [_randn(g, 3, 4, dtype=dtype), _randn(g, 7, 2, dtype=dtype)]
    got = _run_both([x], ws, TOL[dtype], split_item=0, group_type=2)
    assert [t.shape for t in got] == [(6, 4), (6, 2)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_group_list_as_list(dtype):
    """The .List overload: cumulative row ends on the host (aclnnGroupedMatmul)."""
    g = torch.Generator().manual_seed(3)
    x = _randn(g, 10, 8, dtype=dtype)
    w = [_randn(g, 8, 5, dtype=dtype), _randn(g, 8, 3, dtype=dtype)]
    b = [_randn(g, 5, dtype=_bias_dtype(dtype)), _randn(g, 3, dtype=_bias_dtype(dtype))]
    got = torch.ops.npu.npu_grouped_matmul.List([x.npu()], _npu(w), bias=_npu(b), group_list=[4, 9], split_item=0)
    _assert_outputs(got, ref.grouped_matmul([x], w, bias=b, group_list=[4, 9], split_item=0, group_type=0),
                    TOL[dtype])
    assert [t.shape for t in got] == [(4, 5), (5, 3)]
    w2 = [w[0], _randn(g, 8, 5, dtype=dtype)]
    got = torch.ops.npu.npu_grouped_matmul.List([x.npu()], _npu(w2), group_list=[4, 9], split_item=3)
    _assert_outputs(got, ref.grouped_matmul([x], w2, group_list=[4, 9], split_item=3, group_type=0), TOL[dtype])


def test_torch_npu_function_picks_the_overload_by_group_list():
    """torch_npu.npu_grouped_matmul takes group_list as a list too (the .List overload)."""
    g = torch.Generator().manual_seed(4)
    x = _randn(g, 6, 4, dtype=torch.float16)
    w = [_randn(g, 4, 3, dtype=torch.float16), _randn(g, 4, 3, dtype=torch.float16)]
    before = torch.npu.op_stats().get("aclnnGroupedMatmul", {}).get("device_op", 0)
    got = torch_npu.npu_grouped_matmul([x.npu()], _npu(w), group_list=[2, 6], split_item=3)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnGroupedMatmul"]["device_op"] == before + 1
    _assert_outputs(got, ref.grouped_matmul([x], w, group_list=[2, 6], split_item=3, group_type=0),
                    TOL[torch.float16])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_weight_only_int8_and_int4(dtype):
    g = torch.Generator().manual_seed(5)
    x = _randn(g, 9, 32, dtype=dtype)
    gl = torch.tensor([4, 9])
    bias = [_randn(g, 2, 16, dtype=_bias_dtype(dtype))]
    # int8, per channel, with offsets: y = x @ ((w + offset) * scale) + b
    w8 = [_int8(g, 2, 32, 16)]
    scale = [(torch.rand(2, 16, generator=g) * 0.05).to(dtype)]
    offset = [_randn(g, 2, 16, dtype=dtype)]
    _run_both([x], w8, TOL[dtype], bias=bias, antiquant_scale=scale, antiquant_offset=offset, group_list=gl,
              split_item=3, group_type=0)
    # int4 (8 per int32 along n), per group of k: scale [experts, G, n]
    w4 = [_int4_packed(g, 2, 32, 2)]
    scale4 = [(torch.rand(2, 4, 16, generator=g) * 0.05).to(dtype)]
    _run_both([x], w4, TOL[dtype], bias=bias, antiquant_scale=scale4, group_list=gl, split_item=3, group_type=0)
    # x[i] @ weight[i] with per-weight scales
    xs = [_randn(g, 3, 32, dtype=dtype), _randn(g, 5, 16, dtype=dtype)]
    ws = [_int8(g, 32, 8), _int8(g, 16, 4)]
    scales = [(torch.rand(8, generator=g) * 0.05).to(dtype), (torch.rand(4, generator=g) * 0.05).to(dtype)]
    _run_both(xs, ws, TOL[dtype], antiquant_scale=scales, split_item=0, group_type=-1)


@pytest.mark.parametrize("scale_dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("out_dtype", [None, torch.float16, torch.bfloat16])
def test_a8w8(scale_dtype, out_dtype):
    g = torch.Generator().manual_seed(6)
    x = _int8(g, 12, 32)
    w = [_int8(g, 32, 8) for _ in range(3)]
    bias = [torch.randint(-50, 50, (8,), generator=g, dtype=torch.int32) for _ in range(3)]
    scales = [torch.rand(8, generator=g) * 0.05 + 0.01 for _ in range(3)]
    if scale_dtype == torch.int64:
        scales = [shared_ref.trans_quant_param(s) for s in scales]
    else:
        scales = [s.to(scale_dtype) for s in scales]
    _run_both([x], w, dict(rtol=1e-2, atol=1e-2), bias=bias, scale=scales, group_list=torch.tensor([3, 8, 12]),
              split_item=3, group_type=0, output_dtype=out_dtype)


def test_a8w8_per_token_float_bias_int32_output_and_int8_offset():
    g = torch.Generator().manual_seed(7)
    x, w = _int8(g, 10, 16), [_int8(g, 2, 16, 8)]
    gl = torch.tensor([6, 4])
    scale, pertoken = [torch.rand(2, 8, generator=g) * 0.05], [torch.rand(10, generator=g)]
    fbias = [_randn(g, 2, 8, dtype=torch.bfloat16)]
    _run_both([x], w, dict(rtol=1e-2, atol=1e-2), bias=fbias, scale=scale, per_token_scale=pertoken, group_list=gl,
              split_item=3, group_type=0, group_list_type=1, output_dtype=torch.bfloat16)
    ibias = [torch.randint(-50, 50, (2, 8), generator=g, dtype=torch.int32)]
    _run_both([x], w, {}, bias=ibias, group_list=gl, split_item=3, group_type=0, group_list_type=1,
              output_dtype=torch.int32)
    offset = [torch.randn(2, 8, generator=g) * 4]
    _run_both([x], w, {}, scale=scale, offset=offset, group_list=gl, split_item=3, group_type=0, group_list_type=1)


def test_a4w4_and_a8w4():
    g = torch.Generator().manual_seed(8)
    gl = torch.tensor([2, 4])
    pertoken = [torch.rand(6, generator=g)]
    # A4W4: int4 x and weights, int64 per-group scales (2 groups of k).
    x4, w4 = _int4_packed(g, 6, 2), [_int4_packed(g, 2, 16, 1)]
    scale4 = [shared_ref.trans_quant_param(torch.rand(2, 2, 8, generator=g) * 0.05)]
    _run_both([x4], w4, dict(rtol=1e-2, atol=1e-2), scale=scale4, per_token_scale=pertoken, group_list=gl,
              split_item=3, group_type=0, group_list_type=1, output_dtype=torch.float16)
    # A8W4: ((x - 8) @ (w * scale) + bias) * per_token, bias = 8 * sum_k(w * scale) offline: then y = x @ (w * scale).
    x8 = _int8(g, 6, 16)
    s = torch.rand(2, 2, 8, generator=g) * 0.05
    bits = (s.view(torch.int32).to(torch.int64) & 0xFFFFFFFF)  # float32 bits in bits 0-31, as torch_npu packs them
    wf = shared_ref.unpack_int4(w4[0]).double() * s.double().repeat_interleave(8, dim=1)
    bias = [(8 * wf.sum(1)).float()]
    got = _run_both([x8], w4, dict(rtol=1e-2, atol=1e-2), scale=[bits], bias=bias, per_token_scale=pertoken,
                    group_list=gl, split_item=3, group_type=0, group_list_type=1, output_dtype=torch.bfloat16)
    plain = torch.cat([x8[:2].double() @ wf[0], x8[2:].double() @ wf[1]]) * pertoken[0].double().unsqueeze(1)
    torch.testing.assert_close(got[0].cpu().double(), plain, rtol=2e-2, atol=2e-2)
    offset = [torch.randn(2, 1, 8, generator=g) * 0.1]
    _run_both([x8], w4, dict(rtol=1e-2, atol=1e-2), scale=[bits], bias=bias, offset=offset, per_token_scale=pertoken,
              group_list=gl, split_item=3, group_type=0, group_list_type=1, output_dtype=torch.float16)


@pytest.mark.parametrize("act_type", [1, 2, 4, 5])
def test_activations(act_type):
    g = torch.Generator().manual_seed(9)
    x, w = _randn(g, 7, 8, dtype=torch.float16), [_randn(g, 2, 8, 6, dtype=torch.float16)]
    _run_both([x], w, TOL[torch.float16], group_list=torch.tensor([3, 7]), split_item=3, group_type=0,
              act_type=act_type)


# Gradient cases: (x shapes, x given transposed, weight shapes, bias shapes, group_list, kwargs).
GRAD_CASES = {
    "pairs": ([(5, 8), (2, 3, 6)], False, [(8, 4), (6, 3)], [(4,), (3,)], None, dict(split_item=0, group_type=-1)),
    "rows_one_output": ([(10, 6)], False, [(3, 6, 4)], [(3, 4)], torch.tensor([3, 3, 8]),
                        dict(split_item=3, group_type=0)),
    "rows_per_group": ([(10, 6)], False, [(6, 4)] * 3, [(4,)] * 3, torch.tensor([3, 0, 5]),
                       dict(split_item=0, group_type=0, group_list_type=1)),
    "rows_expert_pairs": ([(10, 6)], False, [(3, 6, 4)], None, torch.tensor([[2, 3], [0, 5]]),
                          dict(split_item=3, group_type=0, group_list_type=2)),
    "several_x_one_output": ([(3, 6), (4, 6)], False, [(6, 4), (6, 4)], [(2, 4)], None,
                             dict(split_item=2, group_type=0)),
    "split_k": ([(9, 5)], True, [(9, 3)], None, torch.tensor([2, 2, 9]), dict(split_item=3, group_type=2)),
    "split_k_per_weight": ([(9, 5)], True, [(4, 3), (5, 3)], None, None, dict(split_item=0, group_type=2)),
    "split_k_per_group": ([(9, 5)], True, [(9, 3)], None, torch.tensor([2, 3]),
                          dict(split_item=0, group_type=2, group_list_type=1)),
    "list_form": ([(10, 6)], False, [(6, 4), (6, 4)], [(4,), (4,)], [4, 10], dict(split_item=0)),
}


def _gmm_call(x, w, b, gl, kw, on_npu):
    if not on_npu:
        return ref.grouped_matmul(x, w, bias=b, group_list=gl, **{"group_type": 0, **kw})
    if isinstance(gl, list):
        return torch.ops.npu.npu_grouped_matmul.List(x, w, bias=b, group_list=gl, **kw)
    return torch_npu.npu_grouped_matmul(x, w, bias=b, group_list=gl.npu() if gl is not None else None, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_gradients(case, dtype):
    x_shapes, transposed, w_shapes, b_shapes, gl, kw = GRAD_CASES[case]
    g = torch.Generator().manual_seed(10)
    xs = [_randn(g, *s, dtype=dtype) for s in x_shapes]
    ws = [_randn(g, *s, dtype=dtype) for s in w_shapes]
    bs = [_randn(g, *s, dtype=dtype) for s in b_shapes] if b_shapes else []
    leaves_cpu = [t.clone().requires_grad_() for t in xs + ws + bs]
    leaves_npu = [t.npu().requires_grad_() for t in xs + ws + bs]

    def split(leaves):
        x = leaves[:len(xs)]
        x = [t.t() for t in x] if transposed else x
        return x, leaves[len(xs):len(xs) + len(ws)], (leaves[len(xs) + len(ws):] or None)

    expected = _gmm_call(*split(leaves_cpu), gl, kw, on_npu=False)
    got = _gmm_call(*split(leaves_npu), gl, kw, on_npu=True)
    dys = [_randn(g, *e.shape, dtype=dtype) for e in expected]
    torch.autograd.backward(expected, dys)
    torch.autograd.backward(got, [d.npu() for d in dys])
    for c, n in zip(leaves_cpu, leaves_npu):
        assert n.grad is not None and n.grad.shape == c.shape and n.grad.dtype == c.dtype
        torch.testing.assert_close(n.grad.cpu().float(), c.grad.float(), **TOL[dtype])


def test_gradient_errors_outside_the_float_path():
    g = torch.Generator().manual_seed(11)
    x = _randn(g, 4, 8, dtype=torch.float16).npu().requires_grad_()
    out = torch_npu.npu_grouped_matmul([x], [_int8(g, 8, 4).npu()], antiquant_scale=[torch.ones(4).half().npu()],
                                       split_item=0, group_type=-1)
    with pytest.raises(ValueError, match="gradients exist for float x and weight"):
        out[0].sum().backward()


def test_meta_shapes():
    def meta(*shape, dtype=torch.float16):
        return torch.empty(*shape, dtype=dtype, device="meta")

    out = torch.ops.npu.npu_grouped_matmul([meta(12, 8)], [meta(3, 8, 5)], group_list=meta(3, dtype=torch.int64),
                                           split_item=3, group_type=0)
    assert [t.shape for t in out] == [(12, 5)] and out[0].device.type == "meta"
    out = torch.ops.npu.npu_grouped_matmul([meta(2, 3, 8), meta(4, 6)], [meta(8, 5), meta(6, 2)], split_item=0,
                                           group_type=-1)
    assert [t.shape for t in out] == [(2, 3, 5), (4, 2)]
    out = torch.ops.npu.npu_grouped_matmul([meta(6, 10)], [meta(10, 4)], group_list=meta(4, dtype=torch.int64),
                                           split_item=3, group_type=2)
    assert [t.shape for t in out] == [(4, 6, 4)]
    out = torch.ops.npu.npu_grouped_matmul([meta(6, 16, dtype=torch.int8)], [meta(2, 16, 1, dtype=torch.int32)],
                                           group_list=meta(2, dtype=torch.int64), split_item=3, group_type=0,
                                           output_dtype=torch.bfloat16)
    assert out[0].shape == (6, 8) and out[0].dtype == torch.bfloat16  # int4 weights: n = 8 per int32
    out = torch.ops.npu.npu_grouped_matmul.List([meta(10, 8)], [meta(8, 5), meta(8, 3)], group_list=[4, 9],
                                                split_item=0)
    assert [t.shape for t in out] == [(4, 5), (5, 3)]
    with pytest.raises(ValueError, match="cannot read them"):
        torch.ops.npu.npu_grouped_matmul([meta(12, 8)], [meta(3, 8, 5)], group_list=meta(3, dtype=torch.int64),
                                         split_item=0, group_type=0)


def test_device_ops_counted():
    g = torch.Generator().manual_seed(12)
    x = _randn(g, 6, 4).npu().requires_grad_()
    w = _randn(g, 2, 4, 3).npu().requires_grad_()

    def count():
        torch.npu.synchronize()
        return torch.npu.op_stats().get("aclnnGroupedMatmulV5", {}).get("device_op", 0)

    before = count()
    out = torch_npu.npu_grouped_matmul([x], [w], group_list=torch.tensor([2, 6]).npu(), split_item=3, group_type=0)
    assert count() == before + 1
    out[0].sum().backward()  # dx and dw are grouped matmuls themselves
    assert count() == before + 3


def test_errors():
    x, w = [torch.randn(4, 8).npu()], [torch.randn(8, 3).npu()]
    # RuntimeErrors with torch_npu's wording (its tests match them)
    with pytest.raises(RuntimeError, match="Requires manual passing group_type"):
        torch_npu.npu_grouped_matmul(x, w)
    with pytest.raises(RuntimeError, match="The group type must be"):
        torch_npu.npu_grouped_matmul(x, w, group_type=1)
    with pytest.raises(ValueError, match="do not multiply"):
        torch_npu.npu_grouped_matmul(x, [torch.randn(5, 3).npu()], group_type=-1)
    with pytest.raises(ValueError, match="chip number format"):
        torch_npu.npu_grouped_matmul(x, w, group_type=-1, x_dtype=1)
    with pytest.raises(ValueError, match="needs a group_list"):
        torch_npu.npu_grouped_matmul(x, [torch.randn(2, 8, 3).npu()], split_item=3, group_type=0)
    with pytest.raises(ValueError, match="takes no group_list"):
        torch_npu.npu_grouped_matmul(x, w, group_type=-1, group_list=torch.tensor([4]).npu())
    with pytest.raises(TypeError, match="must be float32, float16, bfloat16, int8 or int32"):
        torch_npu.npu_grouped_matmul([torch.randn(4, 8).double().npu()], w, group_type=-1)
    with pytest.raises(ValueError, match="per_token_scale needs group_list as a tensor"):
        torch.ops.npu.npu_grouped_matmul.List(x, w, per_token_scale=[torch.ones(4).npu()])
    with pytest.raises(RuntimeError, match="need antiquant_scale"):
        torch_npu.npu_grouped_matmul([torch.randn(4, 8).half().npu()], [torch.ones(8, 3, dtype=torch.int8).npu()],
                                     group_type=-1)
    with pytest.raises(RuntimeError, match="covers"):  # group sizes are read when the kernel runs
        torch_npu.npu_grouped_matmul(x, [torch.randn(2, 8, 3).npu()], group_list=torch.tensor([3, 9]).npu(),
                                     split_item=3, group_type=0)
        torch.npu.synchronize()


# ---- npu_grouped_matmul_finalize_routing ----

def _routing(g, batch, experts, topk):
    """Token-major routing as MoE dispatch leaves it: logits of each row, the token each row goes back to."""
    scores = torch.randn(batch, experts, generator=g)
    routing = torch.argsort(scores, dim=1)[:, -topk:]
    logit = torch.softmax(scores.gather(1, routing), dim=1).reshape(-1)
    order = torch.argsort(routing.reshape(-1), stable=True)
    counts = torch.bincount(routing.reshape(-1), minlength=experts)
    return logit[order].contiguous(), (order // topk).to(torch.int64), counts


@pytest.mark.parametrize("list_type", [0, 1])
def test_finalize_routing_a8w8(list_type):
    g = torch.Generator().manual_seed(13)
    batch, experts, topk, k, n = 6, 4, 2, 32, 16
    m = batch * topk
    x, w = _int8(g, m, k), _int8(g, experts, k, n)
    scale, pertoken = torch.rand(experts, n, generator=g) * 0.01, torch.rand(m, generator=g) * 0.1
    logit, row_index, counts = _routing(g, batch, experts, topk)
    gl = counts if list_type == 1 else torch.cumsum(counts, 0)
    shared = _randn(g, 3, n, dtype=torch.bfloat16)
    kw = dict(scale=scale, pertoken_scale=pertoken, shared_input=shared, logit=logit, row_index=row_index,
              shared_input_weight=0.5, shared_input_offset=2, output_bs=batch, group_list_type=list_type)
    got = torch_npu.npu_grouped_matmul_finalize_routing(
        x.npu(), w.npu(), gl.npu(), **{k_: v.npu() if isinstance(v, torch.Tensor) else v for k_, v in kw.items()})
    expected = ref.grouped_matmul_finalize_routing(x, w, gl, **kw)
    assert got.shape == (batch, n) and got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_finalize_routing_without_routing_and_a8w4():
    g = torch.Generator().manual_seed(14)
    x, w = _int8(g, 10, 16), _int8(g, 2, 16, 8)
    gl = torch.tensor([3, 4])  # 7 of 10 rows: the rest reach no output row
    scale = torch.rand(2, 8, generator=g) * 0.01
    got = torch_npu.npu_grouped_matmul_finalize_routing(x.npu(), w.npu(), gl.npu(), scale=scale.npu())
    expected = ref.grouped_matmul_finalize_routing(x, w, gl, scale=scale)
    assert got.shape == (10, 8) and not got[7:].cpu().any()
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-4)
    # int4 weights: int64 scale [e, 1, n] (float32 bits), offline bias [e, n] and offset [e, 1, n]
    w4 = _int4_packed(g, 2, 16, 1)
    s = torch.rand(2, 1, 8, generator=g) * 0.05
    bits = s.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    bias = torch.randn(2, 8, generator=g)
    offset = torch.randn(2, 1, 8, generator=g) * 0.1
    pertoken = torch.rand(10, generator=g)
    kw = dict(scale=bits, bias=bias, offset=offset, pertoken_scale=pertoken, group_list_type=0,
              logit=torch.rand(10, generator=g), row_index=torch.randint(0, 4, (10,), generator=g), output_bs=4)
    got = torch_npu.npu_grouped_matmul_finalize_routing(
        x.npu(), w4.npu(), torch.tensor([3, 7]).npu(), **{k: v.npu() if isinstance(v, torch.Tensor) else v
                                                          for k, v in kw.items()})
    expected = ref.grouped_matmul_finalize_routing(x, w4, torch.tensor([3, 7]), **kw)
    assert got.shape == (4, 8)
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-3, atol=1e-3)


def test_finalize_routing_meta_device_op_and_errors():
    meta = torch.ops.npu.npu_grouped_matmul_finalize_routing(
        torch.empty(12, 32, dtype=torch.int8, device="meta"), torch.empty(4, 32, 2, dtype=torch.int32, device="meta"),
        torch.empty(4, dtype=torch.int64, device="meta"), output_bs=6)
    assert meta.shape == (6, 16) and meta.dtype == torch.float32
    x, w = torch.ones(4, 8, dtype=torch.int8).npu(), torch.ones(2, 8, 3, dtype=torch.int8).npu()
    gl = torch.tensor([2, 2]).npu()
    before = torch.npu.op_stats().get("aclnnGroupedMatmulFinalizeRoutingV3", {}).get("device_op", 0)
    torch_npu.npu_grouped_matmul_finalize_routing(x, w, gl)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnGroupedMatmulFinalizeRoutingV3"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="dtype must be torch.float32"):
        torch_npu.npu_grouped_matmul_finalize_routing(x, w, gl, dtype=torch.float16)
    with pytest.raises(TypeError, match="x must be int8"):
        torch_npu.npu_grouped_matmul_finalize_routing(x.float(), w, gl)
    with pytest.raises(ValueError, match="shared_input must be"):
        torch_npu.npu_grouped_matmul_finalize_routing(x, w, gl, shared_input=torch.ones(3, 3).npu(),
                                                      shared_input_offset=2)
    with pytest.raises(ValueError, match="chip number format"):
        torch_npu.npu_grouped_matmul_finalize_routing(x, w, gl, x_dtype=1)
    with pytest.raises(RuntimeError, match="row_index values must be in"):
        torch_npu.npu_grouped_matmul_finalize_routing(x, w, gl, row_index=torch.tensor([0, 1, 2, 9]).npu())
        torch.npu.synchronize()


# ---- npu_grouped_matmul_add_ / npu_grouped_matmul_add ----

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_grouped_matmul_add(dtype):
    g = torch.Generator().manual_seed(15)
    x, w = _randn(g, 12, 4, dtype=dtype), _randn(g, 12, 3, dtype=dtype)  # [k, m], [k, n]
    gl = torch.tensor([4, 4, 12])  # an empty group
    y = torch.randn(3 * 4, 3, generator=g)
    expected = ref.grouped_matmul_add(y, x, w, gl)
    y_npu = y.npu()
    res = torch_npu.npu_grouped_matmul_add_(y_npu, x.npu(), w.npu(), gl.npu())
    assert res.data_ptr() == y_npu.data_ptr()
    torch.testing.assert_close(y_npu.cpu(), expected, rtol=1e-4, atol=1e-4)
    # The functional form leaves self as it was; here with x [m, k], weight [n, k], sizes and a 3-D y.
    y3 = y.reshape(3, 4, 3).npu()
    out = torch_npu.npu_grouped_matmul_add(y3, x.t().contiguous().npu(), w.t().contiguous().npu(),
                                           torch.tensor([4, 0, 8]).npu(), transpose_x=False, transpose_weight=True,
                                           group_list_type=1)
    torch.testing.assert_close(out.cpu(), expected.reshape(3, 4, 3), rtol=1e-4, atol=1e-4)
    assert torch.equal(y3.cpu(), y.reshape(3, 4, 3))


def test_grouped_matmul_add_meta_device_op_and_errors():
    y = torch.empty(8, 3, device="meta")
    x, w, gl = (torch.empty(6, 4, dtype=torch.float16, device="meta"),
                torch.empty(6, 3, dtype=torch.float16, device="meta"), torch.empty(2, dtype=torch.int64, device="meta"))
    assert torch.ops.npu.npu_grouped_matmul_add(y, x, w, gl).shape == (8, 3)
    assert torch.ops.npu.npu_grouped_matmul_add_(y, x, w, gl) is y
    yn, gln = torch.zeros(8, 3).npu(), torch.tensor([2, 6]).npu()
    xn, wn = torch.ones(6, 4).half().npu(), torch.ones(6, 3).half().npu()
    before = torch.npu.op_stats().get("aclnnGroupedMatmulAddV2", {}).get("device_op", 0)
    torch_npu.npu_grouped_matmul_add_(yn, xn, wn, gln)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnGroupedMatmulAddV2"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="only group_type 2"):
        torch_npu.npu_grouped_matmul_add_(yn, xn, wn, gln, group_type=0)
    with pytest.raises(TypeError, match="accumulates in float32"):
        torch_npu.npu_grouped_matmul_add_(yn.half(), xn, wn, gln)
    with pytest.raises(ValueError, match="must hold 2 groups"):
        torch_npu.npu_grouped_matmul_add_(torch.zeros(6, 3).npu(), xn, wn, gln)
