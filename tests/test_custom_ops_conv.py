"""torch_npu's convolution entry points (npu_convolution, npu_conv2d, npu_conv3d, npu_convolution_transpose,
npu_conv_transpose2d) against torch.nn.functional's CPU convolutions: outputs and gradients of input, weight
and bias, Meta shapes, torch.compile, and clear errors."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu


def _pair(cpu_fn, npu_fn, *tensors, atol=1e-4):
    cpu = [t.clone().requires_grad_() if t is not None else None for t in tensors]
    dev = [t.npu().requires_grad_() if t is not None else None for t in tensors]
    expect = cpu_fn(*cpu)
    got = npu_fn(*dev)
    assert got.shape == expect.shape
    torch.testing.assert_close(got.cpu(), expect, atol=atol, rtol=1e-4)
    grad = torch.randn(expect.shape, generator=torch.Generator().manual_seed(7))
    expect.backward(grad)
    got.backward(grad.npu())
    for c, d in zip(cpu, dev):
        if c is not None:
            torch.testing.assert_close(d.grad.cpu(), c.grad, atol=atol * 10, rtol=1e-3)


@pytest.mark.parametrize("groups,bias", [(1, True), (2, False)])
def test_conv2d_and_convolution(groups, bias):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 9, 7, generator=g)
    w = torch.randn(6, 4 // groups, 3, 3, generator=g)
    b = torch.randn(6, generator=g) if bias else None
    ref = lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=groups)
    _pair(ref, lambda x, w, b: torch_npu.npu_conv2d(x, w, b, [2, 1], [1, 2], [1, 2], groups), x, w, b)
    _pair(ref, lambda x, w, b: torch_npu.npu_convolution(x, w, b, [2, 1], [1, 2], [1, 2], groups), x, w, b)


def test_conv3d_and_1d_convolution():
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(1, 2, 5, 6, 6, generator=g), torch.randn(3, 2, 2, 3, 3, generator=g), torch.randn(3, generator=g)
    _pair(lambda x, w, b: F.conv3d(x, w, b, stride=1, padding=1),
          lambda x, w, b: torch_npu.npu_conv3d(x, w, b, [1, 1, 1], [1, 1, 1], [1, 1, 1], 1), x, w, b)
    x1, w1 = torch.randn(2, 3, 10, generator=g), torch.randn(5, 3, 3, generator=g)
    _pair(lambda x, w: F.conv1d(x, w, None, stride=2), lambda x, w: torch_npu.npu_convolution(x, w, None, [2], [0], [1], 1),
          x1, w1)


@pytest.mark.parametrize("name", ["npu_conv_transpose2d", "npu_convolution_transpose"])
def test_transposed(name):
    g = torch.Generator().manual_seed(2)
    x, w, b = torch.randn(2, 4, 5, 6, generator=g), torch.randn(4, 3, 3, 3, generator=g), torch.randn(6, generator=g)
    op = getattr(torch_npu, name)
    _pair(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
          lambda x, w, b: op(x, w, b, [1, 1], [1, 1], [2, 2], [1, 1], 2), x, w[:, :3], b)


def test_meta_compile_errors_and_device_op():
    meta = torch.ops.npu.npu_conv_transpose2d(torch.empty(2, 4, 5, 6, device="meta"),
                                              torch.empty(4, 3, 3, 3, device="meta"), None, [1, 1], [1, 1], [2, 2],
                                              [1, 1], 1)
    assert meta.shape == (2, 3, 10, 12)
    x, w = torch.randn(1, 3, 8, 8).npu(), torch.randn(2, 3, 3, 3).npu()
    f = torch.compile(lambda a, b: torch_npu.npu_conv2d(a, b, None, [1, 1], [1, 1], [1, 1], 1) * 2, backend="eager",
                      fullgraph=True)
    torch.testing.assert_close(f(x, w).cpu(), F.conv2d(x.cpu(), w.cpu(), padding=1) * 2, atol=1e-4, rtol=1e-4)
    before = torch.npu.op_stats().get("aclnnConvolution", {}).get("device_op", 0)
    torch_npu.npu_convolution(x, w, None, [1, 1], [0, 0], [1, 1], 1)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnConvolution"]["device_op"] == before + 1
    with pytest.raises(ValueError, match=r"input must be \(N, C, D, H, W\)"):
        torch_npu.npu_conv3d(x, w, None, [1, 1, 1], [0, 0, 0], [1, 1, 1], 1)
    with pytest.raises(ValueError, match="channels"):
        torch_npu.npu_conv2d(x, torch.randn(2, 4, 3, 3).npu(), None, [1, 1], [0, 0], [1, 1], 1)
    with pytest.raises(ValueError, match="bias"):
        torch_npu.npu_conv2d(x, w, torch.randn(3).npu(), [1, 1], [0, 0], [1, 1], 1)
    with pytest.raises(ValueError, match="stride"):
        torch_npu.npu_conv2d(x, w, None, [1, 1, 1], [0, 0], [1, 1], 1)
