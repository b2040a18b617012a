"""cat / stack, where(cond, a, b) and masked_fill (forward, in-place, out=, backward) on npu vs CPU."""

import pytest
import torch

from ops_util import (assert_device_ops, assert_overlap_error_like_cpu, assert_same, assert_strict_ok,
                      check_out_into_views, check_vs_cpu, device_op_stats, grads_vs_cpu, rand, register_strict,
                      to_npu)

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]


def _t(shape, dtype, noncontig=False):
    return rand(shape, dtype, -9, 9, noncontig=noncontig)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cat(dtype):
    a, b, c = _t((2, 3), dtype), _t((4, 3), dtype), _t((1, 3), dtype)
    check_vs_cpu(lambda *ts: torch.cat(ts), a, b, c)
    check_vs_cpu(lambda *ts: torch.cat(ts, dim=1), _t((2, 3), dtype), _t((2, 5), dtype))
    check_vs_cpu(lambda *ts: torch.cat(ts, dim=-1), _t((2, 3, 1), dtype), _t((2, 3, 2), dtype))
    check_vs_cpu(lambda *ts: torch.cat(ts), a, _t((0, 3), dtype), b)                 # empty piece
    check_vs_cpu(lambda *ts: torch.cat(ts), a, torch.empty(0, dtype=dtype))          # legacy 1-D empty
    check_vs_cpu(lambda *ts: torch.cat(ts), _t((0, 3), dtype), _t((0, 3), dtype))
    check_vs_cpu(lambda t: torch.cat([t]), a)
    check_vs_cpu(lambda *ts: torch.cat(ts, 1), _t((3, 2), dtype, noncontig=True), _t((3, 4), dtype)[:, ::2],
                 _t((3, 1), dtype))
    check_vs_cpu(lambda *ts: torch.cat(ts), _t((5,), dtype), _t((3,), dtype))
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    torch.cat([a, b], out=cpu_out)
    torch.cat([to_npu(a), to_npu(b)], out=npu_out)
    assert_same(npu_out, cpu_out)


def test_cat_mixed_dtypes_and_channels_last():
    check_vs_cpu(lambda *ts: torch.cat(ts), _t((2, 3), torch.int64), _t((1, 3), torch.float16))
    check_vs_cpu(lambda *ts: torch.cat(ts), _t((2, 3), torch.bool), _t((1, 3), torch.int64))
    check_vs_cpu(lambda *ts: torch.cat(ts, 1), _t((2, 3, 4, 5), torch.float32).to(memory_format=torch.channels_last),
                 _t((2, 1, 4, 5), torch.float32).to(memory_format=torch.channels_last))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_stack(dtype):
    a, b = _t((2, 3), dtype), _t((2, 3), dtype)
    for dim in (0, 1, 2, -1):
        check_vs_cpu(lambda *ts: torch.stack(ts, dim), a, b)
    check_vs_cpu(lambda *ts: torch.stack(ts), _t((), dtype), _t((), dtype), _t((), dtype))
    check_vs_cpu(lambda *ts: torch.stack(ts, 1), _t((0, 2), dtype), _t((0, 2), dtype))
    check_vs_cpu(lambda *ts: torch.stack(ts), _t((2, 3), dtype, noncontig=True), a)
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    torch.stack([a, b], 1, out=cpu_out)
    torch.stack([to_npu(a), to_npu(b)], 1, out=npu_out)
    assert_same(npu_out, cpu_out)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_where(dtype):
    for cs, xs, ys in [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (4,)), ((), (2, 3), ()), ((0, 3), (0, 3), (3,))]:
        check_vs_cpu(torch.where, _t(cs, torch.bool), _t(xs, dtype), _t(ys, dtype))
    cond = _t((4, 5), torch.bool, noncontig=True)
    check_vs_cpu(torch.where, cond, _t((4, 5), dtype, noncontig=True), _t((4, 5), dtype))
    fill = True if dtype == torch.bool else 2
    check_vs_cpu(lambda c, x: torch.where(c, x, fill), cond, _t((4, 5), dtype))        # scalar other
    check_vs_cpu(lambda c, y: torch.where(c, fill, y), cond, _t((4, 5), dtype))        # scalar self
    check_vs_cpu(lambda c, x: x.where(c, torch.tensor(0)), cond, _t((4, 5), dtype))    # CPU 0-d other
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    x, y = _t((4, 5), dtype), _t((5,), dtype)
    torch.where(cond, x, y, out=cpu_out)
    torch.where(to_npu(cond), to_npu(x), to_npu(y), out=npu_out)
    assert_same(npu_out, cpu_out)


def test_where_type_promotion_and_uint8_condition():
    c = _t((3, 4), torch.bool)
    check_vs_cpu(torch.where, c, _t((3, 4), torch.int64), _t((3, 4), torch.float16))
    check_vs_cpu(torch.where, c, _t((3, 4), torch.float32), 0.5)
    check_vs_cpu(torch.where, c, 1.5, 2)


def test_out_into_strided_views():
    a, b = _t((2, 3), torch.float32), _t((1, 3), torch.float32)
    check_out_into_views(lambda x, y, out: torch.cat([x, y], out=out), (a, b), (3, 3))
    check_out_into_views(lambda x, y, out: torch.stack([x, y], 1, out=out), (a, a), (2, 2, 3))
    check_out_into_views(torch.where, (_t((2, 3), torch.bool), a, b), (2, 3))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_fill(dtype):
    value = True if dtype == torch.bool else -3
    for xs, ms in [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3, 4), (3, 1)), ((), ()), ((0, 4), (4,))]:
        x, m = _t(xs, dtype), _t(ms, torch.bool)
        check_vs_cpu(lambda t, mm: t.masked_fill(mm, value), x, m)
        check_vs_cpu(lambda t, mm, v: t.masked_fill(mm, v), x, m, torch.tensor(value, dtype=dtype))
    x, m = _t((4, 6), dtype, noncontig=True), _t((4, 6), torch.bool, noncontig=True)
    check_vs_cpu(lambda t, mm: t.masked_fill(mm, value), x, m)
    c, n = x.clone(), to_npu(x)
    c.masked_fill_(m, value)
    n.masked_fill_(to_npu(m), value)
    assert_same(n, c)
    c, n = x.clone(), to_npu(x)
    c[:, 1:].masked_fill_(m[:, 1:], torch.tensor(value))                     # CPU 0-d value into a view
    n[:, 1:].masked_fill_(to_npu(m[:, 1:]), torch.tensor(value))
    assert_same(n, c)
    if dtype.is_floating_point:
        check_vs_cpu(lambda t, mm: t.masked_fill(mm, float("-inf")), x, m)
        check_vs_cpu(lambda t, mm: t.masked_fill(mm, 0.25), x, m)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_backward(dtype):
    grads_vs_cpu(lambda a, b: torch.cat([a, b], 1), [_t((2, 3), dtype), _t((2, 4), dtype)])
    grads_vs_cpu(lambda a, b: torch.stack([a, b], 1), [_t((2, 3), dtype), _t((2, 3), dtype, noncontig=True)])
    cond = _t((3, 4), torch.bool)
    grads_vs_cpu(lambda a, b: torch.where(cond.to(a.device), a, b), [_t((3, 4), dtype), _t((4,), dtype)])
    grads_vs_cpu(lambda a: a.masked_fill(cond.to(a.device), 1.0), [_t((3, 4), dtype)])
    grads_vs_cpu(lambda a, v: a.masked_fill(cond.to(a.device), v), [_t((3, 4), dtype), _t((), dtype)])


def test_errors_match_cpu():
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 1"):
        torch.cat([torch.ones(2, 3, device="npu"), torch.ones(3, 3, device="npu")], 1)
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        torch.stack([torch.ones(2, device="npu"), torch.ones(3, device="npu")])
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor"):
        torch.where(torch.ones(3, device="npu"), torch.ones(3, device="npu"), torch.zeros(3, device="npu"))
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        torch.ones(3, device="npu").masked_fill(torch.ones(3, device="npu"), 1.0)
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor"):
        torch.ones(3, device="npu").masked_fill(torch.ones(3, dtype=torch.bool, device="npu"),
                                                torch.ones(3, device="npu"))
        torch.npu.synchronize()


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_cat_out_overlapping_input_raises_like_cpu():
    # the CPU refuses before writing; the npu error must say the same (not a resize failure)
    def run(device):
        a = torch.ones(3, 3, device=device)
        torch.cat([a, torch.zeros(3, 3, device=device)], out=a)
    assert_overlap_error_like_cpu(run)


def test_named_device_ops_are_used():
    a = torch.randn(2, 3).npu().requires_grad_()
    b = torch.randn(2, 3).npu().requires_grad_()
    cond = torch.tensor([[True, False, True], [False, False, True]]).npu()

    def run():
        torch.cat([a, b], 0).sum().backward()
        torch.stack([a, b]).sum().backward()
        torch.where(cond, a, b).sum().backward()
        a.masked_fill(cond, 2.0)
        a.masked_fill(cond, torch.tensor(3.0, device="npu"))

    assert_device_ops(device_op_stats(run), ["aclnnCat", "aclnnSWhere", "aclnnMaskedFillScalar",
                                             "aclnnMaskedFillTensor"])


register_strict("cat_where", """
    cond = torch.tensor([[True, False, True], [False, False, True]])
    fns = [lambda a, b: torch.cat([a, b], 1), lambda a, b: torch.stack([a, b], 0),
           lambda a, b: torch.where(cond.to(a.device), a, b),
           lambda a, b: a.masked_fill(cond.to(a.device), 2.0) + b,
           lambda a, b: a.masked_fill(cond.to(a.device), b[0, 0].detach()) * b]  # value grad is data-dependent
    for fn in fns:
        cpu_in = [torch.randn(2, 3, requires_grad=True), torch.randn(2, 3, requires_grad=True)]
        npu_in = [npu(t, grad=True) for t in cpu_in]
        co, no = fn(*cpu_in), fn(*npu_in)
        same(no, co)
        g = torch.rand(co.shape)
        co.backward(g)
        no.backward(npu(g))
        for c, n in zip(cpu_in, npu_in):
            same(n.grad, c.grad)
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "cat_where")
