"""npu_swiglu_group_quant (swiglu, row weights, dynamic hifloat8 per token group) against a CPU reference with
en_dtypes' hifloat8 (op_refs/mx_quant.py), and npu_swiglu_group_quant_backward against torch autograd of the same
swiglu; Meta shapes, device-op counters and errors."""

import pytest
import torch

import torch_npu
from op_refs import mx_quant as ref

FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def device_op_count(name):
    torch.npu.synchronize()
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def inputs(dtype, rows=8, h=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(rows, 2 * h, generator=g) * 2).to(dtype)
    weight = torch.randn(rows, 1, generator=g).to(dtype)
    return x, weight


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("counts", [None, [3, 5], [2, 3], [6, 9], [0, 4, 4]])
def test_swiglu_group_quant(dtype, counts):
    x, weight = inputs(dtype)
    group_index = None if counts is None else torch.tensor(counts)
    expected_y, expected_scale, expected_origin = ref.swiglu_group_quant(x, weight, counts, clamp_limit=1.5,
                                                                         dst_type_max=15.0)
    before = device_op_count("aclnnSwigluGroupQuant")
    y, scale, origin = torch_npu.npu_swiglu_group_quant(
        x.npu(), weight=weight.npu(), group_index=None if group_index is None else group_index.npu(), quant_mode=3,
        clamp_limit=1.5, dst_type_max=15.0, output_origin=True)
    assert device_op_count("aclnnSwigluGroupQuant") == before + 1
    assert y.dtype == torch.uint8 and y.shape == (8, 16)
    assert scale.dtype == torch.float32 and scale.shape == (1 if counts is None else len(counts),)
    torch.testing.assert_close(scale.cpu(), expected_scale, rtol=1e-6, atol=0)
    torch.testing.assert_close(origin.cpu(), expected_origin)
    # Codes equal, but for a value the float32 division may put across a rounding boundary.
    assert (y.cpu() != expected_y).float().mean().item() <= 0.01


def test_swiglu_group_quant_without_weight_clamp_or_origin_3d():
    x = torch.randn(2, 3, 64) * 3
    expected_y, expected_scale, _ = ref.swiglu_group_quant(x, dst_type_max=448.0)
    y, scale, origin = torch_npu.npu_swiglu_group_quant(x.npu(), quant_mode=3, dst_type_max=448.0)
    assert y.shape == (2, 3, 32) and origin.shape == (0,)
    torch.testing.assert_close(scale.cpu(), expected_scale, rtol=1e-6, atol=0)
    assert (y.cpu() != expected_y).float().mean().item() <= 0.01
    decoded = torch_npu.npu_dtype_cast(y, torch.float32, torch_npu.hifloat8).cpu() * scale.cpu()
    # hifloat8 keeps one mantissa bit above 2^8 (here values reach 448): within a fifth of the value.
    torch.testing.assert_close(decoded, ref.swiglu(x).reshape(2, 3, 32), rtol=0.21, atol=1e-3)


def test_swiglu_group_quant_meta_and_errors():
    x = torch.randn(4, 8)
    y, scale, origin = torch.ops.npu.npu_swiglu_group_quant(x.to("meta"), group_index=torch.empty(3, dtype=torch.int64,
                                                                                                  device="meta"),
                                                            quant_mode=3, output_origin=True)
    assert y.shape == (4, 4) and y.dtype == torch.uint8 and scale.shape == (3,) and origin.shape == (4, 4)
    with pytest.raises(ValueError, match="quant_mode must be 3"):
        torch_npu.npu_swiglu_group_quant(x.npu())
    with pytest.raises(ValueError, match="round_scale is not provided"):
        torch_npu.npu_swiglu_group_quant(x.npu(), quant_mode=3, round_scale=True)
    with pytest.raises(ValueError, match="last dimension must be even"):
        torch_npu.npu_swiglu_group_quant(torch.randn(4, 7).npu(), quant_mode=3)
    with pytest.raises(ValueError, match="one value per row"):
        torch_npu.npu_swiglu_group_quant(x.npu(), weight=torch.ones(3).npu(), quant_mode=3)


# --- npu_swiglu_group_quant_backward ----------------------------------------------------------------------------

def autograd_reference(grad_y, x, weight, clamp_limit, counts=None):
    """grad_x, grad_weight of y = swiglu(x) * weight by torch autograd; rows after the groups get zeros."""
    xr = x.float().clone().requires_grad_()
    wr = None if weight is None else weight.float().clone().requires_grad_()
    y = ref.swiglu(xr, wr, clamp_limit)
    keep = torch.ones(y.shape[0], 1)
    if counts is not None:
        keep = (torch.arange(y.shape[0]) < sum(counts)).float().unsqueeze(1)
    (y * grad_y.float() * keep).sum().backward()
    return xr.grad, None if wr is None else wr.grad


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("clamp_limit", [0.0, 1.0])
@pytest.mark.parametrize("counts", [None, [2, 3]])
def test_swiglu_group_quant_backward(dtype, clamp_limit, counts):
    x, weight = inputs(dtype, seed=3)
    g = torch.Generator().manual_seed(4)
    grad_y = torch.randn(8, 16, generator=g).to(dtype)
    # y_origin as the unweighted swiglu: sum(grad_y * y_origin) is then weight's true gradient.
    origin = ref.swiglu(x, None, clamp_limit).to(dtype)
    expected_gx, expected_gw = autograd_reference(grad_y, x, weight, clamp_limit, counts)
    before = device_op_count("aclnnSwigluGroupQuantGrad")
    gx, gw = torch_npu.npu_swiglu_group_quant_backward(
        grad_y.npu(), x.npu(), weight=weight.npu(), y_origin=origin.npu(),
        group_index=None if counts is None else torch.tensor(counts).npu(), clamp_limit=clamp_limit)
    assert device_op_count("aclnnSwigluGroupQuantGrad") == before + 1
    assert gx.dtype == dtype and gx.shape == x.shape and gw.shape == weight.shape
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(gx.cpu().float(), expected_gx.to(dtype).float(), rtol=tol, atol=tol)
    # grad_weight reads the forward's output, held in x's dtype.
    keep = torch.ones(8, 1) if counts is None else (torch.arange(8) < sum(counts)).float().unsqueeze(1)
    expected_from_origin = (grad_y.float() * origin.float()).sum(-1, keepdim=True) * keep
    torch.testing.assert_close(gw.cpu().float(), expected_from_origin.to(dtype).float(), rtol=tol, atol=tol)
    torch.testing.assert_close(gw.cpu().float(), expected_gw, rtol=5 * tol, atol=5 * tol)


def test_swiglu_group_quant_backward_without_weight_meta_and_errors():
    x = torch.randn(2, 3, 8)
    grad_y = torch.randn(2, 3, 4)
    gx, gw = torch_npu.npu_swiglu_group_quant_backward(grad_y.npu(), x.npu())
    expected_gx, _ = autograd_reference(grad_y.reshape(6, 4), x.reshape(6, 8), None, 0.0)
    torch.testing.assert_close(gx.cpu(), expected_gx.reshape(2, 3, 8), rtol=1e-5, atol=1e-6)
    assert gw.shape == (0,)
    gx, gw = torch.ops.npu.npu_swiglu_group_quant_backward(grad_y.to("meta"), x.to("meta"),
                                                           weight=torch.empty(6, 1, device="meta"),
                                                           y_origin=torch.empty(2, 3, 4, device="meta"))
    assert gx.shape == (2, 3, 8) and gw.shape == (6, 1)
    with pytest.raises(ValueError, match="y_origin .* is needed"):
        torch_npu.npu_swiglu_group_quant_backward(grad_y.npu(), x.npu(), weight=torch.ones(6, 1).npu())
    with pytest.raises(ValueError, match="grad_y must have x's rows"):
        torch_npu.npu_swiglu_group_quant_backward(torch.randn(2, 3, 5).npu(), x.npu())
