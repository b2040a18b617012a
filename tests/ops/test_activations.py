"""Activations gelu, silu, sigmoid, tanh, relu: forward, in-place, out= and backward on npu vs CPU."""

import pytest
import torch
import torch.nn.functional as F

from ops_util import (FLOATS, assert_device_ops, assert_same, assert_strict_ok, check_out_into_views, check_vs_cpu,
                      device_op_stats, grads_vs_cpu, rand, register_strict, to_npu)

ACTS = {
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "relu": torch.relu,
}
SHAPES = [(3, 7), (2, 3, 4), (), (0, 5)]
SCALE = 2


@pytest.mark.parametrize("name", ACTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_forward(name, dtype):
    fn = ACTS[name]
    for shape in SHAPES:
        check_vs_cpu(fn, rand(shape, dtype, -6, 6), scale=SCALE)
    check_vs_cpu(fn, rand((4, 6), dtype, -6, 6, noncontig=True), scale=SCALE)
    check_vs_cpu(fn, rand((5,), dtype, -6, 6, noncontig=True), scale=SCALE)
    special = torch.tensor([0.0, -0.0, 30.0, -30.0, float("inf"), -float("inf"), float("nan")]).to(dtype)
    check_vs_cpu(fn, special, scale=SCALE)


def test_relu_integer():
    check_vs_cpu(torch.relu, rand((3, 4), torch.int64, -5, 5))


@pytest.mark.parametrize("name", ["silu", "sigmoid", "tanh", "relu", "gelu"])
def test_in_place_and_out(name):
    x = rand((4, 6), lo=-4, hi=4)
    in_place = {"silu": lambda t: F.silu(t, inplace=True), "sigmoid": torch.sigmoid_, "tanh": torch.tanh_,
                "relu": lambda t: F.relu(t, inplace=True), "gelu": None}[name]
    if in_place is not None:
        c, n = x.clone(), to_npu(x)
        in_place(c)
        in_place(n)
        assert_same(n, c)
        c, n = x.clone().t(), to_npu(x).t()      # in place on a transposed view
        in_place(c[1:])
        in_place(n[1:])
        assert_same(n, c)
    out_fn = {"silu": torch._C._nn.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": None,
              "gelu": torch._C._nn.gelu}[name]
    if out_fn is not None:
        cpu_out, npu_out = torch.empty(0), torch.empty(0, device="npu")
        out_fn(x, out=cpu_out)
        out_fn(to_npu(x), out=npu_out)
        assert_same(npu_out, cpu_out)


def test_out_into_strided_views():
    x = rand((3, 4), lo=-3, hi=3)
    for fn in (torch.sigmoid, torch.tanh, torch._C._nn.gelu, torch._C._nn.silu):
        check_out_into_views(fn, (x,), (3, 4))


@pytest.mark.parametrize("name", ACTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_backward(name, dtype):
    grads_vs_cpu(ACTS[name], [rand((3, 7), dtype, -4, 4)], scale=SCALE)
    grads_vs_cpu(ACTS[name], [rand((4, 5), dtype, -4, 4, noncontig=True)], scale=SCALE)
    grads_vs_cpu(ACTS[name], [rand((), dtype, -4, 4)], scale=SCALE)


def test_relu_backward_at_zero_and_threshold():
    x = torch.tensor([-1.0, 0.0, 1.0, -0.0, 2.0])
    grads_vs_cpu(torch.relu, [x])
    grads_vs_cpu(lambda t: F.threshold(t, 0.5, -1.0), [x])
    grads_vs_cpu(F.relu6, [torch.tensor([-1.0, 0.0, 3.0, 6.0, 7.0])])


def test_backward_ops_directly():
    g, x = rand((3, 4)), rand((3, 4), lo=-3, hi=3)
    y = torch.sigmoid(x)
    check_vs_cpu(torch.ops.aten.sigmoid_backward, g, y)
    check_vs_cpu(torch.ops.aten.tanh_backward, g, torch.tanh(x))
    check_vs_cpu(lambda a, b: torch.ops.aten.threshold_backward(a, b, 0.0), g, x)
    check_vs_cpu(lambda a, b: torch.ops.aten.gelu_backward(a, b, approximate="tanh"), g, x)
    check_vs_cpu(torch.ops.aten.silu_backward, g, x)


def test_errors_match_cpu():
    with pytest.raises((NotImplementedError, RuntimeError), match="not implemented for 'Long'"):
        F.gelu(torch.ones(3, dtype=torch.long, device="npu"))
        torch.npu.synchronize()
    with pytest.raises((NotImplementedError, RuntimeError), match="not implemented for 'Long'"):
        F.silu(torch.ones(3, dtype=torch.long, device="npu"))
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        F.gelu(torch.ones(3, device="npu"), approximate="erf")
        torch.npu.synchronize()


def test_named_device_ops_are_used():
    x = torch.randn(3, 4).npu().requires_grad_()

    def run():
        for fn in (F.gelu, F.silu, torch.sigmoid, torch.tanh, torch.relu):
            fn(x).sum().backward()

    assert_device_ops(device_op_stats(run), ["aclnnGelu", "aclnnGeluBackward", "aclnnSilu", "aclnnSiluBackward",
                                             "aclnnSigmoid", "aclnnSigmoidBackward", "aclnnTanh",
                                             "aclnnTanhBackward", "aclnnRelu", "aclnnThresholdBackward"])


register_strict("activations", """
    for fn in (F.gelu, lambda t: F.gelu(t, approximate="tanh"), F.silu, torch.sigmoid, torch.tanh, torch.relu):
        cx = torch.randn(3, 4, requires_grad=True)
        nx = npu(cx, grad=True)
        co, no = fn(cx), fn(nx)
        same(no, co)
        g = torch.rand(co.shape)
        co.backward(g)
        no.backward(npu(g))
        same(nx.grad, cx.grad)
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "activations")
