"""torch_npu's bit-mask dropout ops (npu_dropout_gen_mask, npu_dropout_do_mask, npu_dropout_backward,
_npu_dropout) against a CPU reference that decodes the mask bits, their Meta kernels and device ops, and
contrib's NpuCachedDropout / NpuFairseqDropout with masks generated ahead on a side stream."""

import pytest
import torch

import torch_npu
from torch_npu.contrib.module import NpuCachedDropout, NpuFairseqDropout

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def mask_bits(mask, shape):
    """The mask's bits (element i in bit i % 8 of byte i / 8) as a 0/1 float tensor of `shape`."""
    n = torch.Size(shape).numel()
    bits = (mask.cpu().int().unsqueeze(1) >> torch.arange(8)) & 1
    return bits.flatten()[:n].view(shape).float()


def device_ops(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_do_mask_and_its_gradient_match_the_decoded_mask(dtype):
    torch.npu.manual_seed(1)
    mask = torch_npu.npu_dropout_gen_mask([5, 70], 0.25, dtype=dtype, device="npu")
    assert mask.dtype == torch.uint8 and mask.shape == (384 // 8,)  # 350 elements padded to 384 bits
    bits = mask_bits(mask, (5, 70))
    assert 0.6 < bits.mean() < 0.9
    x = torch.randn(5, 70).to(dtype)
    xn = x.npu().requires_grad_(True)
    y, same_mask = torch_npu.npu_dropout_do_mask(xn, mask, 0.25)
    assert same_mask is mask or torch.equal(same_mask.cpu(), mask.cpu())
    expected = x.float() * bits / 0.75
    torch.testing.assert_close(y.detach().cpu().float(), expected, rtol=1e-2, atol=1e-2)
    grad = torch.randn(5, 70).to(dtype)
    y.backward(grad.npu())
    torch.testing.assert_close(xn.grad.cpu().float(), grad.float() * bits / 0.75, rtol=1e-2, atol=1e-2)
    direct = torch_npu.npu_dropout_backward(grad.npu(), mask, 0.25)
    torch.testing.assert_close(direct.cpu(), xn.grad.cpu())


def test_masks_follow_the_npu_generator():
    torch.npu.manual_seed(7)
    a = torch_npu.npu_dropout_gen_mask([1000], 0.5, device="npu")
    b = torch_npu.npu_dropout_gen_mask([1000], 0.5, device="npu")
    torch.npu.manual_seed(7)
    a2 = torch_npu.npu_dropout_gen_mask([1000], 0.5, device="npu")
    assert torch.equal(a.cpu(), a2.cpu()) and not torch.equal(a.cpu(), b.cpu())
    assert mask_bits(torch_npu.npu_dropout_gen_mask([300], 0.0, device="npu"), (300,)).sum() == 300
    assert mask_bits(torch_npu.npu_dropout_gen_mask([300], 1.0, device="npu"), (300,)).sum() == 0


def test_npu_dropout_draws_a_mask_and_applies_it():
    x = torch.randn(3, 8, 9, device="npu", requires_grad=True)
    y, mask = torch_npu._npu_dropout(x, 0.4)
    bits = mask_bits(mask, x.shape)
    torch.testing.assert_close(y.detach().cpu(), x.detach().cpu() * bits / 0.6)
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), bits / 0.6)


def test_meta_kernels_device_ops_and_errors():
    m = torch.ops.npu.npu_dropout_gen_mask([3, 50], 0.1, device="meta")
    assert m.shape == (32,) and m.dtype == torch.uint8
    t = torch.empty(3, 50, device="meta")
    out, mask = torch.ops.npu.npu_dropout_do_mask(t, m, 0.1)
    assert out.shape == t.shape and mask.shape == m.shape
    out, mask = torch.ops.npu._npu_dropout(t, 0.1)
    assert out.shape == t.shape and mask.shape == (32,)
    before = [device_ops("aclnnDropoutGenMaskV2"), device_ops("aclnnDropoutDoMask")]
    torch_npu._npu_dropout(torch.ones(4, device="npu"), 0.5)
    torch.npu.synchronize()
    assert [device_ops("aclnnDropoutGenMaskV2") - before[0], device_ops("aclnnDropoutDoMask") - before[1]] == [1, 1]
    with pytest.raises(ValueError, match="between 0 and 1"):
        torch_npu.npu_dropout_gen_mask([4], 1.5, device="npu")
    with pytest.raises(ValueError, match="too few"):
        torch_npu.npu_dropout_do_mask(torch.ones(2000, device="npu"), torch.zeros(16, dtype=torch.uint8, device="npu"), 0.5)
    with pytest.raises(TypeError, match="torch.uint8"):
        torch_npu.npu_dropout_backward(torch.ones(8, device="npu"), torch.zeros(16, device="npu"), 0.5)
    with pytest.raises(ValueError, match="floating-point"):
        torch_npu._npu_dropout(torch.ones(8, dtype=torch.int32, device="npu"), 0.5)


def test_cached_dropout_drops_scales_and_is_identity_in_eval():
    NpuCachedDropout.task_dict.clear()
    drop = NpuCachedDropout(0.5)
    assert NpuFairseqDropout is NpuCachedDropout
    x = torch.rand(64, 32, device="npu") + 1
    y = drop(x)
    ratio = (y / x).cpu()
    assert set(ratio.unique().tolist()) <= {0.0, 2.0} and 0.3 < (ratio == 0).float().mean() < 0.7
    mask = drop([(64, 32), torch.float32, "npu"])
    assert mask.dtype == torch.uint8 and mask.numel() * 8 >= 64 * 32
    drop.eval()
    assert drop(x) is x
    assert NpuCachedDropout(0.0)(x) is x
    with pytest.raises(TypeError, match="takes a tensor"):
        NpuCachedDropout(0.5)(3)


def test_dropout_ensemble_generates_next_steps_masks_ahead_on_a_side_stream():
    NpuCachedDropout.task_dict.clear()
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), NpuCachedDropout(0.3), torch.nn.Linear(16, 4),
                                NpuCachedDropout(0.3)).npu()
    NpuCachedDropout.enable_dropout_ensemble(model)
    x = torch.randn(8, 16, device="npu")
    model(x).sum().backward()              # first step: generates its masks, then the next step's
    torch.npu.synchronize()
    pools = list(NpuCachedDropout.task_dict.values())
    assert sorted(len(p.masks) for p in pools) == [1, 1]
    queued = [p.masks[0].cpu() for p in pools]
    before = device_ops("aclnnDropoutGenMaskV2")
    out = model[1](model[0](x))            # the pool's queued mask is the one used
    torch.npu.synchronize()
    assert device_ops("aclnnDropoutGenMaskV2") == before
    pool = NpuCachedDropout.task_dict[((8, 16), torch.float32, x.device, 0.3)]
    expected = model[0](x).detach().cpu() * mask_bits(queued[pools.index(pool)], (8, 16)) / 0.7
    torch.testing.assert_close(out.detach().cpu(), expected, rtol=1e-5, atol=1e-5)
