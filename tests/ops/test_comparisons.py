"""Comparison and logical ops (eq/ne/lt/le/gt/ge, logical_and/or/not) on npu vs CPU."""

import pytest
import torch

from ops_util import (assert_device_ops, assert_strict_ok, check_out_into_views, check_vs_cpu, device_op_stats,
                      rand, register_strict, to_npu)

CMP = ["eq", "ne", "lt", "le", "gt", "ge"]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]
SHAPE_PAIRS = {
    "same": ((3, 4), (3, 4)),
    "broadcast": ((2, 1, 4), (3, 1)),
    "zero_dim": ((), ()),
    "tensor_vs_0d": ((3, 4), ()),
    "empty": ((0, 3), (0, 3)),
}


def _small(shape, dtype, noncontig=False):
    # few distinct values so that equal elements occur often
    return rand(shape, torch.int64, 0, 3, noncontig=noncontig).to(dtype) if dtype != torch.bool \
        else rand(shape, torch.bool, noncontig=noncontig)


@pytest.mark.parametrize("op", CMP)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_compare_tensor(op, dtype):
    fn = getattr(torch, op)
    for name, (sa, sb) in SHAPE_PAIRS.items():
        a, b = _small(sa, dtype), _small(sb, dtype)
        npu_out, _ = check_vs_cpu(fn, a, b)
        assert npu_out.dtype == torch.bool, name


@pytest.mark.parametrize("op", CMP)
def test_compare_scalar_and_mixed_dtypes(op):
    fn = getattr(torch, op)
    x = _small((4, 5), torch.float32) - 0.5
    check_vs_cpu(lambda t: fn(t, 1.5), x)
    check_vs_cpu(lambda t: fn(t, 1), _small((4, 5), torch.int64))
    check_vs_cpu(lambda t: fn(t, 0.5), _small((4, 5), torch.int64))       # int tensor vs float scalar
    check_vs_cpu(lambda t: fn(t, True), _small((6,), torch.bool))
    check_vs_cpu(fn, _small((4, 5), torch.int64), x)                        # int vs float tensors
    check_vs_cpu(fn, _small((4, 5), torch.float16), x)                      # half vs float
    check_vs_cpu(fn, x, torch.tensor(1.0))                                  # CPU 0-d other is allowed
    check_vs_cpu(lambda t: fn(t, float("nan")), x)


@pytest.mark.parametrize("op", CMP)
def test_compare_non_contiguous_in_place_and_out(op):
    fn = getattr(torch, op)
    a, b = _small((4, 6), torch.float32, noncontig=True), _small((4, 6), torch.float32, noncontig=True)
    check_vs_cpu(fn, a, b)
    check_vs_cpu(fn, a[:, ::2], b[:, 1::2])
    # in place keeps the dtype of self
    ca, na = a.clone(), to_npu(a.clone())
    getattr(ca, op + "_")(b)
    getattr(na, op + "_")(to_npu(b))
    assert na.dtype == torch.float32
    torch.testing.assert_close(na.cpu(), ca)
    # out= resizes an empty bool tensor; and may be a float tensor
    for out_dtype in (torch.bool, torch.float32):
        cpu_out = torch.empty(0, dtype=out_dtype)
        npu_out = torch.empty(0, dtype=out_dtype, device="npu")
        fn(a, b, out=cpu_out)
        fn(to_npu(a), to_npu(b), out=npu_out)
        assert npu_out.shape == cpu_out.shape
        torch.testing.assert_close(npu_out.cpu(), cpu_out)
    check_vs_cpu(lambda t: fn(t, 1.0, out=torch.empty(t.shape, dtype=torch.bool, device=t.device)), a)


def test_out_into_strided_views():
    a, b = _small((3, 4), torch.float32), _small((3, 4), torch.float32)
    check_out_into_views(torch.eq, (a, b), (3, 4), torch.bool)
    check_out_into_views(torch.gt, (a, 1.0), (3, 4), torch.bool)
    check_out_into_views(torch.logical_and, (a, b), (3, 4), torch.bool)


def test_operators_and_nan():
    x = torch.tensor([1.0, float("nan"), -float("inf"), 0.0, -0.0])
    y = torch.tensor([1.0, float("nan"), -float("inf"), -0.0, 1.0])
    for fn in (lambda a, b: a == b, lambda a, b: a != b, lambda a, b: a < b, lambda a, b: a <= b,
               lambda a, b: a > b, lambda a, b: a >= b):
        check_vs_cpu(fn, x, y)


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_not"])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.float16, torch.int64], ids=str)
def test_logical_ops(op, dtype):
    fn = getattr(torch, op)
    if op == "logical_not":
        for shape in [(3, 4), (), (0, 2)]:
            check_vs_cpu(fn, _small(shape, dtype))
        check_vs_cpu(fn, _small((4, 6), dtype, noncontig=True))
        return
    for sa, sb in SHAPE_PAIRS.values():
        check_vs_cpu(fn, _small(sa, dtype), _small(sb, dtype))
    check_vs_cpu(fn, _small((4, 6), dtype, noncontig=True), _small((4, 6), torch.bool))  # mixed dtypes


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_not"])
def test_logical_in_place_and_out(op):
    args = (_small((3, 4), torch.float32),) if op == "logical_not" else \
        (_small((3, 4), torch.float32), _small((3, 4), torch.bool))
    cpu_self = args[0].clone()
    npu_self = to_npu(args[0].clone())
    getattr(cpu_self, op + "_")(*args[1:])
    getattr(npu_self, op + "_")(*to_npu(args[1:]))
    assert npu_self.dtype == torch.float32
    torch.testing.assert_close(npu_self.cpu(), cpu_self)
    for out_dtype in (torch.bool, torch.int64, torch.float16):
        cpu_out = torch.empty(0, dtype=out_dtype)
        npu_out = torch.empty(0, dtype=out_dtype, device="npu")
        getattr(torch, op)(*args, out=cpu_out)
        getattr(torch, op)(*to_npu(args), out=npu_out)
        assert npu_out.dtype == out_dtype
        torch.testing.assert_close(npu_out.cpu(), cpu_out)


def test_errors_match_cpu():
    a, b = torch.ones(3, 4), torch.ones(5)
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.eq(a, b)
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.eq(a.npu(), b.npu())
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.ones(4, device="npu").lt_(torch.ones(3, 4, device="npu"))
    with pytest.raises(RuntimeError, match="same device"):
        torch.eq(torch.ones(3, device="npu"), torch.ones(3))


def test_named_device_ops_are_used():
    a, b = torch.randn(4, 5).npu(), torch.randn(4, 5).npu()

    def run():
        for op in CMP:
            getattr(torch, op)(a, b)
            getattr(torch, op)(a, 0.25)
        torch.logical_and(a > 0, b > 0)
        torch.logical_or(a > 0, b > 0)
        torch.logical_not(a > 0)

    stats = device_op_stats(run)
    names = [f"aclnn{op.capitalize()}Tensor" for op in CMP] + [f"aclnn{op.capitalize()}Scalar" for op in CMP]
    assert_device_ops(stats, names + ["aclnnLogicalAnd", "aclnnLogicalOr", "aclnnLogicalNot"])


register_strict("comparisons", """
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    b[0] = a[0]
    na, nb = npu(a), npu(b)
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        same(getattr(torch, op)(na, nb), getattr(torch, op)(a, b))
        same(getattr(torch, op)(na, 0.25), getattr(torch, op)(a, 0.25))
    same(torch.logical_and(na > 0, nb > 0), torch.logical_and(a > 0, b > 0))
    same(torch.logical_or(na > 0, nb > 0), torch.logical_or(a > 0, b > 0))
    same(torch.logical_not(na > 0), torch.logical_not(a > 0))
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "comparisons")
