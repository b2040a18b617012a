"""Reductions (sum, mean, max/min with and without dim, argmax/argmin, var/std) on npu vs CPU."""

import pytest
import torch

from ops_util import (assert_device_ops, assert_overlap_error_like_cpu, assert_same, assert_strict_ok,
                      check_out_into_views, check_vs_cpu, device_op_stats, distinct, grads_vs_cpu, rand,
                      register_strict, to_npu)

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64]
# (shape, dim) pairs: plain, middle dim, negative dim, several dims, 0-d
CASES = [((3, 5), 1), ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), (0, 2)), ((), None)]


def _input(shape, dtype, noncontig=False):
    if dtype.is_floating_point:
        return rand(shape, dtype, -2, 2, noncontig=noncontig)
    return rand(shape, dtype, -20, 20, noncontig=noncontig)


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool], ids=str)
def test_sum(dtype):
    for shape, dim in CASES:
        x = _input(shape, dtype)
        check_vs_cpu(torch.sum, x, scale=4)
        if dim is not None:
            check_vs_cpu(lambda t: torch.sum(t, dim), x, scale=4)
            check_vs_cpu(lambda t: torch.sum(t, dim, keepdim=True), x, scale=4)
    x = _input((4, 6), dtype, noncontig=True)
    check_vs_cpu(lambda t: t.sum(0), x, scale=4)
    check_vs_cpu(lambda t: t.sum(dtype=torch.float32), x, scale=4)
    check_vs_cpu(lambda t: t.sum(-1, dtype=torch.float64), x)
    check_vs_cpu(lambda t: t.sum(0), _input((0, 3), dtype))   # empty: zeros
    check_vs_cpu(lambda t: t.sum(), _input((0, 3), dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_mean(dtype):
    for shape, dim in CASES:
        x = _input(shape, dtype)
        check_vs_cpu(torch.mean, x, scale=4)
        if dim is not None:
            check_vs_cpu(lambda t: t.mean(dim, keepdim=True), x, scale=4)
    check_vs_cpu(lambda t: t.mean(1), _input((4, 6), dtype, noncontig=True), scale=4)
    check_vs_cpu(lambda t: t.mean(1), _input((3, 0), dtype))      # mean of nothing is NaN
    check_vs_cpu(lambda t: t.mean(dtype=torch.float32), _input((3, 4), dtype))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_max_min(op, dtype):
    fn = getattr(torch, op)
    for shape in [(3, 5), (2, 3, 4), ()]:
        x = distinct(shape, dtype)
        check_vs_cpu(fn, x)                                       # full reduction
        for dim in range(-len(shape), len(shape)) if shape else [0]:
            check_vs_cpu(lambda t: tuple(fn(t, dim)), x)          # (values, indices)
            check_vs_cpu(lambda t: tuple(fn(t, dim, keepdim=True)), x)
    check_vs_cpu(lambda t: tuple(fn(t, 0)), distinct((4, 6), dtype, noncontig=True))
    check_vs_cpu(lambda t: tuple(fn(t, 1)), _input((0, 3), dtype))   # empty along a kept dim
    if dtype.is_floating_point:   # NaN propagates
        x = distinct((3, 4), dtype)
        x[1, 2] = float("nan")
        check_vs_cpu(fn, x)
        check_vs_cpu(lambda t: tuple(fn(t, 1)), x)


def test_max_min_bool_and_out():
    b = rand((3, 5), torch.bool)
    for fn in (torch.max, torch.min):
        check_vs_cpu(fn, b)
        check_vs_cpu(lambda t: tuple(fn(t, 1)), b)
        x = distinct((3, 5))
        cpu_v, cpu_i = torch.empty(0), torch.empty(0, dtype=torch.long)
        npu_v, npu_i = torch.empty(0, device="npu"), torch.empty(0, dtype=torch.long, device="npu")
        fn(x, 1, out=(cpu_v, cpu_i))
        fn(to_npu(x), 1, out=(npu_v, npu_i))
        assert_same(npu_v, cpu_v)
        assert_same(npu_i, cpu_i)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_argmax_argmin(op, dtype):
    fn = getattr(torch, op)
    for shape in [(3, 5), (2, 3, 4), ()]:
        x = distinct(shape, dtype)
        check_vs_cpu(fn, x)
        check_vs_cpu(lambda t: fn(t, 0, keepdim=True), x)
        check_vs_cpu(lambda t: fn(t, -1), x)
    check_vs_cpu(lambda t: fn(t, 1), distinct((4, 6), dtype, noncontig=True))
    ties = torch.tensor([[1, 3, 3, 0], [2, 2, 2, 2]]).to(dtype)          # first occurrence wins
    check_vs_cpu(lambda t: fn(t, 1), ties)
    cpu_out, npu_out = torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long, device="npu")
    fn(ties, 0, out=cpu_out)
    fn(to_npu(ties), 0, out=npu_out)
    assert_same(npu_out, cpu_out)


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")
@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_var_std(op, dtype):
    fn = getattr(torch, op)
    x = _input((3, 6), dtype)
    check_vs_cpu(fn, x, scale=4)
    check_vs_cpu(lambda t: fn(t, 1), x, scale=4)
    check_vs_cpu(lambda t: fn(t, 0, unbiased=False, keepdim=True), x, scale=4)
    check_vs_cpu(lambda t: fn(t, (0, 1), correction=0), x, scale=4)
    check_vs_cpu(lambda t: fn(t, -1, correction=2), _input((2, 3, 5), dtype), scale=4)
    check_vs_cpu(lambda t: fn(t, 0), _input((4, 6), dtype, noncontig=True), scale=4)
    check_vs_cpu(lambda t: fn(t, 0), _input((1, 4), dtype))              # one sample: NaN like CPU
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    fn(x, 1, out=cpu_out)
    fn(to_npu(x), 1, out=npu_out)
    assert_same(npu_out, cpu_out, scale=4)


def test_out_into_strided_views():
    x = distinct((3, 4, 5))
    check_out_into_views(lambda t, out: torch.sum(t, 1, out=out), (x,), (3, 5), scale=4)
    check_out_into_views(lambda t, out: torch.mean(t, 2, out=out), (x,), (3, 4), scale=4)
    check_out_into_views(lambda t, out: torch.max(t, 0, out=out), (x,), (4, 5), n_outs=2,
                         out_dtypes=[torch.float32, torch.long])
    check_out_into_views(lambda t, out: torch.argmin(t, 1, out=out), (x,), (3, 5), torch.long)
    check_out_into_views(lambda t, out: torch.var(t, 1, out=out), (x,), (3, 5), scale=4)


def test_sum_mean_out_and_dtype():
    x = _input((3, 4), torch.float32)
    for fn in (torch.sum, torch.mean):
        cpu_out, npu_out = torch.empty(0), torch.empty(0, device="npu")
        fn(x, 1, out=cpu_out)
        fn(to_npu(x), 1, out=npu_out)
        assert_same(npu_out, cpu_out)
    i = _input((3, 4), torch.int64)
    cpu_out, npu_out = torch.empty(0), torch.empty(0, device="npu")   # resized, float out of an int sum
    torch.sum(i, 0, dtype=torch.float32, out=cpu_out)
    torch.sum(to_npu(i), 0, dtype=torch.float32, out=npu_out)
    assert_same(npu_out, cpu_out)


@pytest.mark.parametrize("name,fn", [
    ("sum", lambda t: t.sum()),
    ("sum_dim", lambda t: t.sum(1)),
    ("mean", lambda t: t.mean((0, 2), keepdim=True)),
    ("max_dim", lambda t: t.max(1)[0]),
    ("min_dim", lambda t: t.min(-1)[0]),
    ("max", lambda t: t.max()),
    ("var", lambda t: t.var(1)),
    ("std", lambda t: t.std(0, correction=0)),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_backward(name, fn, dtype):
    x = distinct((3, 4, 5), torch.float32) / 8
    grads_vs_cpu(fn, [x.to(dtype)], scale=4)
    grads_vs_cpu(fn, [x.transpose(0, 2).contiguous().transpose(0, 2).to(dtype)], scale=4)


@pytest.mark.parametrize("op", ["max", "min"])
def test_full_max_min_of_empty_raises_like_cpu(op):
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified for input.numel"):
        getattr(torch, op)(torch.empty(0, 3))
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified for input.numel"):
        getattr(torch, op)(torch.empty(0, 3, device="npu"))
        torch.npu.synchronize()


def test_errors_match_cpu():
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.sum(torch.ones(2, 3, device="npu"), 2)
    with pytest.raises(RuntimeError, match="mean.*(Long|floating point)"):
        torch.mean(torch.ones(3, dtype=torch.long, device="npu"))
        torch.npu.synchronize()
    with pytest.raises((IndexError, RuntimeError), match="(cannot perform reduction|Expected reduction dim)"):
        torch.argmax(torch.empty(0, device="npu"))
        torch.npu.synchronize()


def test_out_overlapping_input_raises_like_cpu():
    def run(device):
        a = torch.ones(3, 3, device=device)
        torch.max(a, 1, out=(a[0], torch.empty(3, dtype=torch.long, device=device)))
    assert_overlap_error_like_cpu(run)


def test_named_device_ops_are_used():
    x = torch.randn(3, 4, 5).npu().requires_grad_()

    def run():
        for out in (x.sum(), x.sum(1).sum(), x.mean(), x.max(1)[0].sum(), x.min(1)[0].sum(), x.var(1).sum(),
                    x.std(1).sum()):
            out.backward()
        x.max(), x.min(), x.argmax(), x.argmin(1)

    stats = device_op_stats(run)
    assert_device_ops(stats, ["aclnnReduceSum", "aclnnMean", "aclnnMaxDim", "aclnnMinDim", "aclnnMax", "aclnnMin",
                              "aclnnArgMax", "aclnnArgMin", "aclnnVar", "aclnnStd"])


register_strict("reductions", """
    x = torch.randn(3, 4, 5)
    nx = npu(x, grad=True)
    cx = x.clone().requires_grad_()
    for fn in (lambda t: t.sum(), lambda t: t.sum(1), lambda t: t.mean(2), lambda t: t.max(1)[0],
               lambda t: t.min(0)[0], lambda t: t.var(1), lambda t: t.std(2)):
        no, co = fn(nx), fn(cx)
        same(no, co, atol=1e-5, rtol=1e-4)
        g = torch.rand(co.shape)
        no.backward(npu(g))
        co.backward(g)
    same(nx.grad, cx.grad, atol=1e-5, rtol=1e-4)
    same(nx.max(), x.max())
    same(nx.min(), x.min())
    same(nx.argmax(), x.argmax())
    same(nx.argmin(1), x.argmin(1))
    same(nx.max(2)[1], x.max(2)[1])
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "reductions")
