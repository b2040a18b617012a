"""Matrix products (mm, bmm, addmm, baddbmm, and matmul / linear / @ built on them) on npu vs CPU."""

import pytest
import torch
import torch.nn.functional as F

from ops_util import (assert_device_ops, assert_same, assert_strict_ok, check_out_into_views, check_vs_cpu,
                      device_op_stats, grads_vs_cpu, rand, register_strict, to_npu)

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64]
# half-precision products of length-k dot products differ by more than one ulp when the
# accumulation order changes; scale the per-dtype tolerance
SCALE = 8


def _in(shape, dtype, noncontig=False):
    lo, hi = (-4, 5) if not dtype.is_floating_point else (-1, 1)
    return rand(shape, dtype, lo, hi, noncontig=noncontig)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mm(dtype):
    for (m, k, n) in [(3, 4, 5), (1, 7, 1), (0, 3, 4), (3, 0, 4), (4, 3, 0)]:
        check_vs_cpu(torch.mm, _in((m, k), dtype), _in((k, n), dtype), scale=SCALE)
    check_vs_cpu(torch.mm, _in((3, 4), dtype, noncontig=True), _in((4, 5), dtype, noncontig=True), scale=SCALE)
    check_vs_cpu(torch.mm, _in((3, 8), dtype)[:, ::2], _in((4, 5), dtype), scale=SCALE)
    a, b = _in((3, 4), dtype), _in((4, 5), dtype)
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    torch.mm(a, b, out=cpu_out)
    torch.mm(to_npu(a), to_npu(b), out=npu_out)
    assert_same(npu_out, cpu_out, scale=SCALE)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bmm(dtype):
    for (bs, m, k, n) in [(2, 3, 4, 5), (1, 1, 3, 1), (0, 2, 3, 4), (2, 3, 0, 4)]:
        check_vs_cpu(torch.bmm, _in((bs, m, k), dtype), _in((bs, k, n), dtype), scale=SCALE)
    check_vs_cpu(torch.bmm, _in((2, 3, 4), dtype, noncontig=True), _in((2, 4, 5), dtype), scale=SCALE)
    check_vs_cpu(torch.bmm, _in((3, 2, 4), dtype).transpose(0, 1), _in((2, 4, 5), dtype, noncontig=True),
                 scale=SCALE)
    a, b = _in((2, 3, 4), dtype), _in((2, 4, 5), dtype)
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    torch.bmm(a, b, out=cpu_out)
    torch.bmm(to_npu(a), to_npu(b), out=npu_out)
    assert_same(npu_out, cpu_out, scale=SCALE)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_addmm_and_baddbmm(dtype):
    floating = dtype.is_floating_point
    beta, alpha = (0.5, 2.0) if floating else (2, 3)
    a, b = _in((3, 4), dtype), _in((4, 5), dtype)
    for bias in (_in((3, 5), dtype), _in((5,), dtype), _in((1, 5), dtype), _in((), dtype)):
        check_vs_cpu(torch.addmm, bias, a, b, scale=SCALE)
        check_vs_cpu(lambda c, x, y: torch.addmm(c, x, y, beta=beta, alpha=alpha), bias, a, b, scale=SCALE)
    check_vs_cpu(lambda c, x, y: torch.addmm(c, x, y, beta=0), _in((3, 5), dtype), a, b, scale=SCALE)
    check_vs_cpu(torch.addmm, _in((3, 5), dtype, noncontig=True), _in((3, 4), dtype, noncontig=True), b,
                 scale=SCALE)
    ba, bb = _in((2, 3, 4), dtype), _in((2, 4, 5), dtype)
    for bias in (_in((2, 3, 5), dtype), _in((5,), dtype), _in((3, 1), dtype)):
        check_vs_cpu(torch.baddbmm, bias, ba, bb, scale=SCALE)
        check_vs_cpu(lambda c, x, y: torch.baddbmm(c, x, y, beta=beta, alpha=alpha), bias, ba, bb, scale=SCALE)
    check_vs_cpu(torch.baddbmm, _in((2, 3, 5), dtype), _in((2, 3, 0), dtype),
                 _in((2, 0, 5), dtype), scale=SCALE)   # k == 0: beta * input only


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_in_place_and_out_of_addmm_baddbmm(dtype):
    c, a, b = _in((3, 5), dtype), _in((3, 4), dtype), _in((4, 5), dtype)
    nc = to_npu(c)
    c.addmm_(a, b, beta=0.5, alpha=-1.0)
    nc.addmm_(to_npu(a), to_npu(b), beta=0.5, alpha=-1.0)
    assert_same(nc, c, scale=SCALE)
    c, a, b = _in((2, 3, 5), dtype), _in((2, 3, 4), dtype), _in((2, 4, 5), dtype)
    nc = to_npu(c)
    c.baddbmm_(a, b, alpha=0.25)
    nc.baddbmm_(to_npu(a), to_npu(b), alpha=0.25)
    assert_same(nc, c, scale=SCALE)
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    torch.baddbmm(c, a, b, out=cpu_out)
    torch.baddbmm(to_npu(c), to_npu(a), to_npu(b), out=npu_out)
    assert_same(npu_out, cpu_out, scale=SCALE)
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    torch.addmm(c[0], a[0], b[0], out=cpu_out)
    torch.addmm(to_npu(c[0]), to_npu(a[0]), to_npu(b[0]), out=npu_out)
    assert_same(npu_out, cpu_out, scale=SCALE)


def test_out_into_strided_views():
    a, b, c = _in((3, 4), torch.float32), _in((4, 5), torch.float32), _in((5,), torch.float32)
    check_out_into_views(torch.mm, (a, b), (3, 5), scale=SCALE)
    check_out_into_views(torch.addmm, (c, a, b), (3, 5), scale=SCALE)
    check_out_into_views(torch.bmm, (_in((2, 3, 4), torch.float32), _in((2, 4, 5), torch.float32)), (2, 3, 5),
                         scale=SCALE)


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((2, 3, 4), (4, 5)),
                                   ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_matmul_and_operator(sa, sb, dtype):
    check_vs_cpu(torch.matmul, _in(sa, dtype), _in(sb, dtype), scale=SCALE)
    check_vs_cpu(lambda x, y: x @ y, _in(sa, dtype), _in(sb, dtype), scale=SCALE)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_linear(dtype):
    w, bias = _in((5, 4), dtype), _in((5,), dtype)
    for x in (_in((3, 4), dtype), _in((2, 3, 4), dtype), _in((4,), dtype), _in((0, 4), dtype)):
        check_vs_cpu(F.linear, x, w, bias, scale=SCALE)
        check_vs_cpu(F.linear, x, w, scale=SCALE)


@pytest.mark.parametrize("name,fn,shapes", [
    ("mm", torch.mm, [(3, 4), (4, 5)]),
    ("bmm", torch.bmm, [(2, 3, 4), (2, 4, 5)]),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), [(5,), (3, 4), (4, 5)]),
    ("baddbmm", lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2.0), [(2, 3, 5), (2, 3, 4), (2, 4, 5)]),
    ("matmul_3d_2d", torch.matmul, [(2, 3, 4), (4, 5)]),
    ("linear", F.linear, [(2, 3, 4), (5, 4), (5,)]),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_backward(name, fn, shapes, dtype):
    grads_vs_cpu(fn, [_in(s, dtype) for s in shapes], scale=SCALE)
    grads_vs_cpu(fn, [_in(s, dtype, noncontig=len(s) >= 2) for s in shapes], scale=SCALE)


def test_errors_match_cpu():
    a, b = torch.ones(2, 3, device="npu"), torch.ones(4, 5, device="npu")
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        torch.mm(a, b)
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="batch1 and batch2 must have same number of batches|Expected size"):
        torch.bmm(torch.ones(2, 3, 4, device="npu"), torch.ones(3, 4, 5, device="npu"))
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="must be a matrix|2D"):
        torch.mm(torch.ones(3, device="npu"), torch.ones(3, 2, device="npu"))
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="expected (m1 and m2|mat1 and mat2) to have the same dtype"):
        torch.mm(torch.ones(2, 3, device="npu"), torch.ones(3, 2, dtype=torch.float64, device="npu"))
        torch.npu.synchronize()


def test_float16_operands_mix_with_float32_ones():
    # As NPU cube units take them (a float32 nn.Linear on float16 activations): float32 accumulation,
    # one rounding into the output's dtype.
    g = torch.Generator().manual_seed(0)
    a, w = torch.randn(6, 5, generator=g).half(), torch.randn(5, 4, generator=g)
    expected = (a.float() @ w).half()
    out = torch.mm(a.npu(), w.npu())
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.cpu(), expected)
    torch.testing.assert_close(torch.bmm(a.npu()[None], w.npu()[None]).cpu()[0].float(), a.float() @ w,
                               rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(torch.nn.functional.linear(a.npu(), w.t().npu()).cpu().float(), a.float() @ w,
                               rtol=1e-3, atol=1e-3)
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(torch.ones(2, 3, device="npu"), torch.ones(3, 2))


def test_named_device_ops_are_used():
    a = torch.randn(3, 4).npu().requires_grad_()
    b = torch.randn(4, 5).npu().requires_grad_()
    ba = torch.randn(2, 3, 4).npu().requires_grad_()
    bb = torch.randn(2, 4, 5).npu().requires_grad_()
    bias = torch.randn(5).npu()

    def run():
        torch.mm(a, b).sum().backward()
        torch.bmm(ba, bb).sum().backward()
        torch.addmm(bias, a, b)
        torch.baddbmm(bias, ba, bb)

    assert_device_ops(device_op_stats(run), ["aclnnMm", "aclnnBatchMatMul", "aclnnAddmm", "aclnnBaddbmm"])


register_strict("matmul", """
    shapes = {"mm": [(3, 4), (4, 5)], "bmm": [(2, 3, 4), (2, 4, 5)], "addmm": [(5,), (3, 4), (4, 5)],
              "baddbmm": [(2, 3, 5), (2, 3, 4), (2, 4, 5)], "linear": [(2, 3, 4), (5, 4), (5,)],
              "matmul": [(2, 3, 4), (4, 5)]}
    fns = {"mm": torch.mm, "bmm": torch.bmm, "addmm": lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
           "baddbmm": torch.baddbmm, "linear": F.linear, "matmul": lambda a, b: a @ b}
    for name, fn in fns.items():
        cpu_in = [torch.randn(s, requires_grad=True) for s in shapes[name]]
        npu_in = [npu(t, grad=True) for t in cpu_in]
        co, no = fn(*cpu_in), fn(*npu_in)
        same(no, co, atol=1e-5, rtol=1e-4)
        g = torch.rand(co.shape)
        co.backward(g)
        no.backward(npu(g))
        for c, n in zip(cpu_in, npu_in):
            same(n.grad, c.grad, atol=1e-5, rtol=1e-4)
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "matmul")
