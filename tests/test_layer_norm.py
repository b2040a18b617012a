"""layer_norm on npu (opslib's own aclnnLayerNorm kernel) against PyTorch's CPU kernel: dtypes,
mixed-precision parameters, affine or not, non-contiguous input, multi-dim normalized shapes,
rows large enough to run on the thread pool, and the statistics autograd uses."""

import pytest
import torch
import torch.nn.functional as F

TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-12, 1e-12),
       torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)}


def _inputs(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 3 + 1.5).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape, normalized", [((4, 6), (6,)), ((2, 3, 40), (3, 40)),
                                               ((512, 1024), (1024,)), ((3, 0), (0,)), ((5,), (5,))])
@pytest.mark.parametrize("affine", [True, False])
def test_matches_cpu(dtype, shape, normalized, affine):
    x = _inputs(shape, dtype)
    w = _inputs(normalized, dtype, 1) if affine else None
    b = _inputs(normalized, dtype, 2) if affine else None
    expected = F.layer_norm(x, normalized, w, b, eps=1e-5)
    actual = F.layer_norm(x.npu(), normalized, w.npu() if affine else None, b.npu() if affine else None,
                          eps=1e-5)
    assert actual.dtype == dtype and actual.shape == expected.shape
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol)


def test_statistics_match_cpu():
    x = _inputs((64, 300), torch.float32)
    w, b = _inputs((300,), torch.float32, 1), _inputs((300,), torch.float32, 2)
    out, mean, rstd = torch.native_layer_norm(x, [300], w, b, 1e-3)
    out_n, mean_n, rstd_n = torch.native_layer_norm(x.npu(), [300], w.npu(), b.npu(), 1e-3)
    for a, e in ((out_n, out), (mean_n, mean), (rstd_n, rstd)):
        assert a.shape == e.shape and a.dtype == e.dtype
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-5)


def test_mixed_precision_parameters():
    # Half input with float weight and bias: statistics in float, as on the CPU.
    x = _inputs((8, 96), torch.float16)
    w, b = _inputs((96,), torch.float32, 1), _inputs((96,), torch.float32, 2)
    out, mean, rstd = torch.native_layer_norm(x, [96], w, b, 1e-5)
    out_n, mean_n, rstd_n = torch.native_layer_norm(x.npu(), [96], w.npu(), b.npu(), 1e-5)
    assert out_n.dtype == torch.float16 and mean_n.dtype == mean.dtype == torch.float32
    torch.testing.assert_close(out_n.cpu(), out, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(rstd_n.cpu(), rstd, rtol=1e-4, atol=1e-4)


def test_non_contiguous_input_and_large_mean():
    # A transposed view, and values far from zero (a naive sum of squares would lose them).
    base = _inputs((96, 40), torch.float32) + 1000.0
    x = base.t()
    expected = F.layer_norm(x, (96,))
    actual = F.layer_norm(base.npu().t(), (96,))
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_backward_through_own_forward():
    x = _inputs((16, 32), torch.float32).requires_grad_()
    w = _inputs((32,), torch.float32, 1).requires_grad_()
    xn = x.detach().npu().requires_grad_()
    wn = w.detach().npu().requires_grad_()
    F.layer_norm(x, (32,), w).square().sum().backward()
    F.layer_norm(xn, (32,), wn).square().sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wn.grad.cpu(), w.grad, rtol=1e-4, atol=1e-4)


def test_runs_as_a_device_op():
    torch.npu.op_stats(reset=True)
    F.layer_norm(torch.randn(4, 8, device="npu"), (8,))
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnLayerNorm"]["device_op"] == 1
