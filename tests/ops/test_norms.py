"""batch_norm (training / eval, running statistics) and layer_norm, forward and backward, npu vs CPU."""

import pytest
import torch
import torch.nn.functional as F

from ops_util import (FLOATS, assert_device_ops, assert_same, assert_strict_ok, check_vs_cpu, device_op_stats,
                      grads_vs_cpu, rand, register_strict, to_npu)

BN_SHAPES = [(4, 3), (2, 3, 5), (2, 3, 4, 5)]
SCALE = 8   # means and variances are sums: allow for another summation order


def _bn(training, affine, momentum=0.1):
    def fn(x, rm, rv, *wb):
        w, b = wb if affine else (None, None)
        return F.batch_norm(x, rm, rv, w, b, training=training, momentum=momentum, eps=1e-5)
    return fn


@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm_forward_and_running_stats(shape, dtype, training):
    c = shape[1]
    x = rand(shape, dtype, -2, 3)
    rm, rv = rand((c,), torch.float32, -1, 1), rand((c,), torch.float32, 0.5, 2)
    w, b = rand((c,), torch.float32), rand((c,), torch.float32)
    if dtype != torch.float32 and not training:
        rm, rv, w, b = rm.to(dtype), rv.to(dtype), w.to(dtype), b.to(dtype)
    for affine in (True, False):
        cpu_rm, cpu_rv = rm.clone(), rv.clone()
        npu_rm, npu_rv = to_npu(rm), to_npu(rv)
        args = (w, b) if affine else ()
        cpu_out = _bn(training, affine)(x, cpu_rm, cpu_rv, *args)
        npu_out = _bn(training, affine)(to_npu(x), npu_rm, npu_rv, *to_npu(args))
        assert_same(npu_out, cpu_out, scale=SCALE)
        assert_same(npu_rm, cpu_rm, scale=SCALE)    # updated in training mode, untouched in eval mode
        assert_same(npu_rv, cpu_rv, scale=SCALE)
    if training:   # without running statistics
        check_vs_cpu(lambda t: F.batch_norm(t, None, None, training=True), x, scale=SCALE)


def test_batch_norm_module_momentum_non_contiguous_and_channels_last():
    torch.manual_seed(0)
    cpu_bn = torch.nn.BatchNorm2d(3, momentum=0.3)
    npu_bn = torch.nn.BatchNorm2d(3, momentum=0.3).npu()
    npu_bn.load_state_dict(cpu_bn.state_dict())
    for x in (rand((2, 3, 4, 5)), rand((2, 3, 5, 4)).transpose(-1, -2),
              rand((2, 3, 4, 5)).to(memory_format=torch.channels_last)):
        assert_same(npu_bn(to_npu(x)), cpu_bn(x), scale=SCALE)
    assert npu_bn.num_batches_tracked.item() == cpu_bn.num_batches_tracked.item() == 3
    assert_same(npu_bn.running_mean, cpu_bn.running_mean, scale=SCALE)
    assert_same(npu_bn.running_var, cpu_bn.running_var, scale=SCALE)
    cpu_bn.eval(), npu_bn.eval()
    x = rand((2, 3, 4, 5))
    assert_same(npu_bn(to_npu(x)), cpu_bn(x), scale=SCALE)


@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm_backward(shape, training):
    c = shape[1]
    rm, rv = rand((c,), lo=-1, hi=1), rand((c,), lo=0.5, hi=2)
    fn = lambda x, w, b: F.batch_norm(x, rm.to(x.device), rv.to(x.device), w, b, training=training)  # noqa: E731
    grads_vs_cpu(fn, [rand(shape, lo=-2, hi=3), rand((c,)), rand((c,))], scale=SCALE)
    fn = lambda x: F.batch_norm(x, None, None, training=True)  # noqa: E731
    grads_vs_cpu(fn, [rand(shape, lo=-2, hi=3)], scale=SCALE)


@pytest.mark.parametrize("shape,norm", [((3, 8), (8,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((5,), (5,)),
                                         ((0, 4), (4,))], ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_layer_norm(shape, norm, dtype):
    x = rand(shape, dtype, -2, 3)
    w, b = rand(norm, dtype), rand(norm, dtype)
    check_vs_cpu(lambda t, ww, bb: F.layer_norm(t, norm, ww, bb, eps=1e-5), x, w, b, scale=SCALE)
    check_vs_cpu(lambda t: F.layer_norm(t, norm), x, scale=SCALE)
    check_vs_cpu(lambda t, ww: F.layer_norm(t, norm, ww), x, w, scale=SCALE)


def test_layer_norm_non_contiguous_and_module():
    x = rand((3, 6, 5)).transpose(1, 2)
    check_vs_cpu(lambda t: F.layer_norm(t, (6,)), x, scale=SCALE)
    check_vs_cpu(lambda t: F.layer_norm(t, (5, 6)), x, scale=SCALE)
    cpu_ln = torch.nn.LayerNorm(6)
    with torch.no_grad():
        cpu_ln.weight.uniform_(0.5, 1.5)
        cpu_ln.bias.uniform_(-1, 1)
    npu_ln = torch.nn.LayerNorm(6).npu()
    npu_ln.load_state_dict(cpu_ln.state_dict())
    assert_same(npu_ln(to_npu(x)), cpu_ln(x), scale=SCALE)
    # native_layer_norm also returns mean and rstd
    check_vs_cpu(lambda t: torch.native_layer_norm(t, (6,), None, None, 1e-5), x, scale=SCALE)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_layer_norm_half_input_float_params(dtype):
    # mixed precision (half activations, float32 LayerNorm parameters): the CPU returns the input
    # dtype for the output and float32 mean / rstd
    x, w, b = rand((3, 4, 6), dtype, -2, 3), rand((6,)), rand((6,))
    check_vs_cpu(lambda t, ww, bb: F.layer_norm(t, (6,), ww, bb), x, w, b, scale=SCALE)
    check_vs_cpu(lambda t, ww, bb: torch.native_layer_norm(t, (6,), ww, bb, 1e-5), x, w, b, scale=SCALE)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_batch_norm_half_input_float_params(dtype):
    x = rand((4, 3, 5), dtype, -2, 3)
    rm, rv, w, b = rand((3,), lo=-1, hi=1), rand((3,), lo=0.5, hi=2), rand((3,)), rand((3,))
    for training in (True, False):
        check_vs_cpu(lambda t, m, v, ww, bb: F.batch_norm(t, m, v, ww, bb, training=training),
                     x, rm.clone(), rv.clone(), w, b, scale=SCALE)


@pytest.mark.parametrize("shape,norm", [((3, 8), (8,)), ((2, 3, 4), (3, 4))], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_layer_norm_backward(shape, norm, dtype):
    grads_vs_cpu(lambda t, w, b: F.layer_norm(t, norm, w, b), [rand(shape, dtype, -2, 3), rand(norm, dtype),
                                                             rand(norm, dtype)], scale=SCALE)
    grads_vs_cpu(lambda t: F.layer_norm(t, norm), [rand(shape, dtype, -2, 3, noncontig=True)], scale=SCALE)


def test_errors_match_cpu():
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(torch.ones(2, 3, device="npu"), (4,))
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(torch.ones(2, 3, device="npu"), torch.zeros(4, device="npu"), torch.ones(4, device="npu"))
        torch.npu.synchronize()
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        F.batch_norm(torch.ones(1, 3, device="npu"), None, None, training=True)


def test_named_device_ops_are_used():
    x = torch.randn(2, 3, 4, 5).npu().requires_grad_()
    w, b = torch.randn(3).npu().requires_grad_(), torch.randn(3).npu().requires_grad_()
    rm, rv = torch.zeros(3).npu(), torch.ones(3).npu()
    lw, lb = torch.randn(5).npu().requires_grad_(), torch.randn(5).npu().requires_grad_()

    def run():
        F.batch_norm(x, rm, rv, w, b, training=True).sum().backward()
        F.layer_norm(x, (5,), lw, lb).sum().backward()

    assert_device_ops(device_op_stats(run), ["aclnnBatchNorm", "aclnnBatchNormBackward", "aclnnLayerNorm",
                                             "aclnnLayerNormBackward"])


register_strict("norms", """
    x = torch.randn(2, 3, 4, 5) * 2 + 1
    for training in (True, False):
        rm, rv = torch.randn(3), torch.rand(3) + 0.5
        nrm, nrv = npu(rm), npu(rv)
        cpu_in = [x.clone().requires_grad_(), torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)]
        npu_in = [npu(t, grad=True) for t in cpu_in]
        co = F.batch_norm(cpu_in[0], rm, rv, cpu_in[1], cpu_in[2], training=training)
        no = F.batch_norm(npu_in[0], nrm, nrv, npu_in[1], npu_in[2], training=training)
        same(no, co, atol=1e-4, rtol=1e-4)
        same(nrm, rm)
        same(nrv, rv)
        g = torch.rand(co.shape)
        co.backward(g)
        no.backward(npu(g))
        for c, n in zip(cpu_in, npu_in):
            same(n.grad, c.grad, atol=1e-4, rtol=1e-4)
    cpu_in = [x.clone().requires_grad_(), torch.randn(4, 5, requires_grad=True), torch.randn(4, 5, requires_grad=True)]
    npu_in = [npu(t, grad=True) for t in cpu_in]
    co = F.layer_norm(cpu_in[0], (4, 5), cpu_in[1], cpu_in[2])
    no = F.layer_norm(npu_in[0], (4, 5), npu_in[1], npu_in[2])
    same(no, co, atol=1e-4, rtol=1e-4)
    g = torch.rand(co.shape)
    co.backward(g)
    no.backward(npu(g))
    for c, n in zip(cpu_in, npu_in):
        same(n.grad, c.grad, atol=1e-4, rtol=1e-4)
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "norms")
