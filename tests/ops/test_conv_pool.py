"""conv2d (forward / backward) and 2-D pooling (max, avg, adaptive avg) on npu vs CPU."""

import pytest
import torch
import torch.nn.functional as F

from ops_util import (FLOATS, assert_device_ops, assert_strict_ok, check_vs_cpu, device_op_stats, distinct,
                      grads_vs_cpu, rand, register_strict)

CONV_CASES = {
    "plain": dict(x=(2, 3, 6, 6), w=(4, 3, 3, 3), kw={}),
    "stride_pad": dict(x=(1, 2, 7, 5), w=(3, 2, 3, 2), kw=dict(stride=2, padding=1)),
    "dilation": dict(x=(1, 2, 7, 7), w=(2, 2, 3, 3), kw=dict(dilation=2, padding=(2, 1))),
    "groups": dict(x=(2, 4, 5, 5), w=(6, 2, 3, 3), kw=dict(groups=2, padding="same")),
    "depthwise": dict(x=(1, 3, 5, 5), w=(3, 1, 3, 3), kw=dict(groups=3)),
    "1x1": dict(x=(2, 3, 4, 4), w=(5, 3, 1, 1), kw={}),
    "unbatched": dict(x=(3, 5, 5), w=(2, 3, 2, 2), kw=dict(stride=(1, 2))),
}
SCALE = 8   # sums of products: half dtypes may differ by a few ulps with another accumulation order


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_conv2d(case, dtype):
    c = CONV_CASES[case]
    x, w, b = rand(c["x"], dtype, -1, 1), rand(c["w"], dtype, -1, 1), rand((c["w"][0],), dtype, -1, 1)
    check_vs_cpu(lambda *a: F.conv2d(*a, **c["kw"]), x, w, b, scale=SCALE)
    check_vs_cpu(lambda *a: F.conv2d(*a, **c["kw"]), x, w, scale=SCALE)


def test_conv2d_layouts_and_empty_batch():
    x, w = rand((2, 3, 6, 6)), rand((4, 3, 3, 3))
    check_vs_cpu(F.conv2d, x.to(memory_format=torch.channels_last), w)
    check_vs_cpu(F.conv2d, x, w.to(memory_format=torch.channels_last))
    check_vs_cpu(F.conv2d, rand((2, 3, 6, 8))[..., ::2][..., :3].transpose(-1, -2), w)  # strided view
    check_vs_cpu(F.conv2d, rand((0, 3, 6, 6)), w)


LAYOUT_FNS = {
    "conv2d": lambda t: F.conv2d(t, torch.ones(4, 3, 3, 3, device=t.device)),
    "max_pool2d": lambda t: F.max_pool2d(t, 2),
    "avg_pool2d": lambda t: F.avg_pool2d(t, 2),
    "adaptive_avg_pool2d": lambda t: F.adaptive_avg_pool2d(t, (2, 3)),
}


@pytest.mark.parametrize("name", LAYOUT_FNS)
def test_channels_last_output_layout_follows_cpu(name):
    # a layout change is visible to users (strides, .view()), so the npu result keeps the CPU's
    x = rand((2, 3, 6, 6)).to(memory_format=torch.channels_last)
    npu_out, cpu_out = check_vs_cpu(LAYOUT_FNS[name], x, scale=4)
    assert npu_out.stride() == cpu_out.stride(), f"npu strides {npu_out.stride()} != CPU {cpu_out.stride()}"


@pytest.mark.parametrize("case", ["plain", "stride_pad", "groups", "unbatched"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_conv2d_backward(case, dtype):
    c = CONV_CASES[case]
    x, w, b = rand(c["x"], dtype, -1, 1), rand(c["w"], dtype, -1, 1), rand((c["w"][0],), dtype, -1, 1)
    grads_vs_cpu(lambda *a: F.conv2d(*a, **c["kw"]), [x, w, b], scale=SCALE)
    grads_vs_cpu(lambda *a: F.conv2d(*a, **c["kw"]), [x, w], scale=SCALE)


MAXPOOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), ceil_mode=True),
    dict(kernel_size=2, dilation=2),
]


@pytest.mark.parametrize("kw", MAXPOOL_CASES, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64], ids=str)
def test_max_pool2d(kw, dtype):
    for shape in [(2, 3, 6, 7), (3, 5, 5)]:
        if dtype == torch.int64 and len(shape) == 3:
            continue
        x = distinct(shape, dtype)   # no ties: the indices are unambiguous
        check_vs_cpu(lambda t: F.max_pool2d(t, **kw), x)
        check_vs_cpu(lambda t: F.max_pool2d(t, return_indices=True, **kw), x)


def test_max_pool2d_channels_last_non_contiguous_and_nan():
    x = distinct((2, 3, 6, 6))
    check_vs_cpu(lambda t: F.max_pool2d(t, 2, return_indices=True), x.to(memory_format=torch.channels_last))
    check_vs_cpu(lambda t: F.max_pool2d(t, 2, return_indices=True), x.transpose(-1, -2))
    x[0, 0, 1, 1] = float("nan")
    check_vs_cpu(lambda t: F.max_pool2d(t, 2, return_indices=True), x)


AVGPOOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(2, 1), ceil_mode=True),
    dict(kernel_size=2, divisor_override=3),
]


@pytest.mark.parametrize("kw", AVGPOOL_CASES, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_avg_pool2d(kw, dtype):
    check_vs_cpu(lambda t: F.avg_pool2d(t, **kw), rand((2, 3, 6, 7), dtype), scale=4)
    check_vs_cpu(lambda t: F.avg_pool2d(t, **kw), rand((3, 5, 6), dtype, noncontig=True), scale=4)


@pytest.mark.parametrize("out_size", [(2, 3), (3, 3), (1, 1), (4, 2), (5, 7)])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_adaptive_avg_pool2d(out_size, dtype):
    check_vs_cpu(lambda t: F.adaptive_avg_pool2d(t, out_size), rand((2, 3, 5, 7), dtype), scale=4)
    check_vs_cpu(lambda t: F.adaptive_avg_pool2d(t, out_size), rand((3, 6, 7), dtype, noncontig=True), scale=4)
    check_vs_cpu(lambda t: F.adaptive_avg_pool2d(t, out_size),
                 rand((2, 3, 5, 7), dtype).to(memory_format=torch.channels_last), scale=4)


POOL_FNS = {
    "max": lambda t: F.max_pool2d(t, 3, stride=2, padding=1),
    "max_overlap_ceil": lambda t: F.max_pool2d(t, (2, 3), stride=1, ceil_mode=True),
    "avg": lambda t: F.avg_pool2d(t, 3, stride=2, padding=1),
    "avg_no_pad_count": lambda t: F.avg_pool2d(t, 2, stride=1, padding=1, count_include_pad=False),
    "adaptive": lambda t: F.adaptive_avg_pool2d(t, (2, 3)),
    "adaptive_uneven": lambda t: F.adaptive_avg_pool2d(t, (4, 5)),
}


@pytest.mark.parametrize("name", POOL_FNS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_pool_backward(name, dtype):
    shape = (2, 3, 6, 7)
    x = distinct(shape, dtype)
    grads_vs_cpu(POOL_FNS[name], [x], scale=4)
    grads_vs_cpu(POOL_FNS[name], [x.transpose(-1, -2)], scale=4)


def test_errors_match_cpu():
    x, w = torch.ones(1, 4, 5, 5, device="npu"), torch.ones(2, 3, 3, 3, device="npu")
    with pytest.raises(RuntimeError, match="expected input.*to have 3 channels, but got 4 channels"):
        F.conv2d(x, w)
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size|too small"):
        F.conv2d(torch.ones(1, 3, 2, 2, device="npu"), w)
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.max_pool2d(torch.ones(1, 1, 2, 2, device="npu"), 3)
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="pad should be (at most|smaller than or equal to) half"):
        F.avg_pool2d(torch.ones(1, 1, 4, 4, device="npu"), 2, padding=2)
        torch.npu.synchronize()


def test_named_device_ops_are_used():
    x = torch.randn(2, 3, 6, 6).npu().requires_grad_()
    w = torch.randn(4, 3, 3, 3).npu().requires_grad_()

    def run():
        F.conv2d(x, w, padding=1).sum().backward()
        F.max_pool2d(x, 2).sum().backward()
        F.avg_pool2d(x, 2).sum().backward()
        F.adaptive_avg_pool2d(x, (2, 3)).sum().backward()

    assert_device_ops(device_op_stats(run), [
        "aclnnConvolution", "aclnnConvolutionBackward", "aclnnMaxPool2dWithIndices",
        "aclnnMaxPool2dWithIndicesBackward", "aclnnAvgPool2d", "aclnnAvgPool2dBackward",
        "aclnnAdaptiveAvgPool2d", "aclnnAdaptiveAvgPool2dBackward"])


register_strict("conv_pool", """
    fns = [lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1),
           lambda x, w, b: F.max_pool2d(F.conv2d(x, w, b), 2),
           lambda x, w, b: F.avg_pool2d(x * 1.0, 3, stride=2, padding=1) + 0 * w.sum() + 0 * b.sum(),
           lambda x, w, b: F.adaptive_avg_pool2d(F.conv2d(x, w, b), (2, 3))]
    for fn in fns:
        cpu_in = [torch.randn(2, 3, 6, 7), torch.randn(4, 3, 3, 3), torch.randn(4)]
        cpu_in = [t.requires_grad_() for t in cpu_in]
        npu_in = [npu(t, grad=True) for t in cpu_in]
        co, no = fn(*cpu_in), fn(*npu_in)
        same(no, co, atol=1e-4, rtol=1e-4)
        g = torch.rand(co.shape)
        co.backward(g)
        no.backward(npu(g))
        for c, n in zip(cpu_in, npu_in):
            same(n.grad, c.grad, atol=1e-4, rtol=1e-4)
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "conv_pool")
