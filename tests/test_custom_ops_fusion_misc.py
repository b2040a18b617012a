"""Tests of the miscellaneous fused ops: byte-mask dropout, mHC sinkhorn / post, the vocabulary-parallel cross
entropy pair (online max-sum, loss with max-sum) and ifmr, against CPU references."""
import pytest
import torch
import torch_npu

from op_refs import rnn_misc as ref

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [0.2, 0.6])
def test_dropout_with_byte_mask_values(dtype, p):
    x = torch.randn(7, 33).to(dtype)
    out, mask = torch.ops.npu._dropout_with_byte_mask(x.npu(), p)
    out, mask = out.cpu(), mask.cpu()
    assert out.dtype == dtype and out.shape == x.shape
    assert mask.dtype == torch.uint8 and mask.shape == x.shape
    assert set(mask.unique().tolist()) <= {0, 1}
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(out.float(), ref.dropout_with_byte_mask(x, mask, p), atol=tol, rtol=tol)


def test_dropout_with_byte_mask_keep_rate_and_seed():
    x = torch.ones(64, 256).npu()
    torch.npu.manual_seed(5)
    _, mask1 = torch.ops.npu._dropout_with_byte_mask(x, 0.3)
    _, mask2 = torch.ops.npu._dropout_with_byte_mask(x, 0.3)
    torch.npu.manual_seed(5)
    _, mask3 = torch.ops.npu._dropout_with_byte_mask(x, 0.3)
    kept = mask1.cpu().float().mean().item()
    assert abs(kept - 0.7) < 0.03
    assert torch.equal(mask1.cpu(), mask3.cpu())
    assert not torch.equal(mask1.cpu(), mask2.cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_dropout_with_byte_mask_backward(dtype):
    x = torch.randn(5, 40).to(dtype).npu().requires_grad_()
    out, mask = torch.ops.npu._dropout_with_byte_mask(x, 0.4)
    grad = torch.randn(5, 40).to(dtype)
    out.backward(grad.npu())
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(x.grad.cpu().float(), ref.dropout_with_byte_mask(grad, mask.cpu(), 0.4),
                               atol=tol, rtol=tol)
    direct = torch.ops.npu._dropout_with_byte_mask_backward(grad.npu(), mask, 0.4)
    torch.testing.assert_close(direct.cpu(), x.grad.cpu())


def test_dropout_with_byte_mask_composite():
    x = torch.randn(6, 20)
    same = torch.ops.npu.dropout_with_byte_mask(x.npu(), 0.5, False)
    torch.testing.assert_close(same.cpu(), x)
    torch.testing.assert_close(torch.ops.npu.dropout_with_byte_mask(x.npu(), 0.0, True).cpu(), x)
    torch.testing.assert_close(torch.ops.npu.dropout_with_byte_mask(x.npu(), 1.0, True).cpu(), torch.zeros_like(x))
    out = torch.ops.npu.dropout_with_byte_mask(x.npu(), 0.5, True).cpu()
    kept = out != 0
    torch.testing.assert_close(out[kept], x[kept] * 2)


def test_dropout_with_byte_mask_meta_and_device_op():
    out, mask = torch.ops.npu._dropout_with_byte_mask(torch.empty(3, 9, device="meta"), 0.1)
    assert out.shape == (3, 9) and mask.shape == (3, 9) and mask.dtype == torch.uint8
    before = torch.npu.op_stats().get("aclnnDropoutGenMaskV3", {}).get("device_op", 0)
    torch.ops.npu._dropout_with_byte_mask(torch.randn(3, 9).npu(), 0.1)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnDropoutGenMaskV3"]["device_op"] == before + 1


def test_dropout_with_byte_mask_errors():
    with pytest.raises(ValueError, match="_dropout_with_byte_mask: dropout probability"):
        torch.ops.npu._dropout_with_byte_mask(torch.randn(4).npu(), 1.5)
    with pytest.raises(TypeError, match="_dropout_with_byte_mask: dropout only supports floating-point"):
        torch.ops.npu._dropout_with_byte_mask(torch.arange(4).npu(), 0.5)
    with pytest.raises(TypeError, match="_dropout_with_byte_mask_backward: mask should be torch.uint8"):
        torch.ops.npu._dropout_with_byte_mask_backward(torch.randn(4).npu(), torch.ones(4).npu(), 0.5)


# ---- npu_mhc_sinkhorn ----

@pytest.mark.parametrize("shape", [(5, 4, 4), (2, 3, 6, 6), (1, 7, 8, 8)])
@pytest.mark.parametrize("out_flag", [0, 1])
def test_mhc_sinkhorn_forward(shape, out_flag):
    x = torch.randn(shape)
    y, norm, sum_ = torch_npu.npu_mhc_sinkhorn(x.npu(), eps=1e-6, num_iters=7, out_flag=out_flag)
    torch.testing.assert_close(y.cpu(), ref.mhc_sinkhorn(x, 1e-6, 7), atol=1e-5, rtol=1e-5)
    matrices = shape[0] * (shape[1] if len(shape) == 4 else 1)
    expected_steps = 2 * 7 * matrices if out_flag else 0
    assert norm.numel() == expected_steps * shape[-1] * 8 and sum_.numel() == expected_steps * 8
    # doubly stochastic: rows and columns sum to about one
    torch.testing.assert_close(y.cpu().sum(-2), torch.ones(shape[:-1]), atol=1e-3, rtol=0)


def test_mhc_sinkhorn_backward():
    x = torch.randn(2, 5, 4, 4)
    grad = torch.randn(2, 5, 4, 4)
    x_cpu = x.clone().requires_grad_()
    ref.mhc_sinkhorn(x_cpu, 1e-6, 4).backward(grad)
    x_npu = x.npu().requires_grad_()
    y, _, _ = torch_npu.npu_mhc_sinkhorn(x_npu, eps=1e-6, num_iters=4, out_flag=1)
    y.backward(grad.npu())
    torch.testing.assert_close(x_npu.grad.cpu(), x_cpu.grad, atol=1e-5, rtol=1e-4)


def test_mhc_sinkhorn_meta_and_device_op():
    y, norm, sum_ = torch.ops.npu.npu_mhc_sinkhorn(torch.empty(3, 6, 6, device="meta"), num_iters=2, out_flag=1)
    assert y.shape == (3, 6, 6) and norm.shape == (2 * 2 * 3 * 6 * 8,) and sum_.shape == (2 * 2 * 3 * 8,)
    before = torch.npu.op_stats().get("aclnnMhcSinkhorn", {}).get("device_op", 0)
    torch_npu.npu_mhc_sinkhorn(torch.randn(3, 4, 4).npu())
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnMhcSinkhorn"]["device_op"] == before + 1


def test_mhc_sinkhorn_errors():
    with pytest.raises(TypeError, match="npu_mhc_sinkhorn: x must be float32"):
        torch_npu.npu_mhc_sinkhorn(torch.randn(3, 4, 4).half().npu())
    with pytest.raises(ValueError, match="npu_mhc_sinkhorn: x must be a non-empty"):
        torch_npu.npu_mhc_sinkhorn(torch.randn(3, 4, 5).npu())
    with pytest.raises(ValueError, match="npu_mhc_sinkhorn_backward: norm and sum must be the saved steps"):
        torch.ops.npu.npu_mhc_sinkhorn_backward(torch.randn(3, 4, 4).npu(), torch.empty(0).npu(),
                                                torch.empty(0).npu())


# ---- npu_mhc_post ----

def make_mhc_post(shape, dtype, with_res=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    *lead, n, d = shape
    x = torch.randn(shape, generator=g).to(dtype)
    h_res = torch.rand(*lead, n, n, generator=g) if with_res else None
    h_out = torch.randn(*lead, d, generator=g).to(dtype)
    h_post = torch.rand(*lead, n, generator=g)
    return x, h_res, h_out, h_post


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 4, 32), (1, 3, 4, 16)])
@pytest.mark.parametrize("with_res", [True, False])
def test_mhc_post_forward(dtype, shape, with_res):
    x, h_res, h_out, h_post = make_mhc_post(shape, dtype, with_res)
    y = torch_npu.npu_mhc_post(x.npu(), None if h_res is None else h_res.npu(), h_out.npu(), h_post.npu())
    assert y.dtype == dtype and y.shape == x.shape
    want = ref.mhc_post(x, h_res, h_out, h_post)
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(y.cpu().float(), want.to(dtype).float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mhc_post_backward(dtype):
    x, h_res, h_out, h_post = make_mhc_post((2, 3, 4, 8), dtype)
    grad = torch.randn(x.shape).to(dtype)
    cpu = [t.clone().float().requires_grad_() for t in (x, h_res, h_out, h_post)]
    ref.mhc_post(*cpu).backward(grad.float())
    npu = [t.npu().requires_grad_() for t in (x, h_res, h_out, h_post)]
    torch_npu.npu_mhc_post(*npu).backward(grad.npu())
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    for leaf_npu, leaf_cpu in zip(npu, cpu):
        torch.testing.assert_close(leaf_npu.grad.cpu().float(), leaf_cpu.grad, atol=tol, rtol=tol)


def test_mhc_post_meta_and_device_op():
    x, h_res, h_out, h_post = make_mhc_post((5, 4, 8), torch.float16)
    y = torch.ops.npu.npu_mhc_post(*[t.to("meta") for t in (x, h_res, h_out, h_post)])
    assert y.shape == (5, 4, 8) and y.dtype == torch.float16
    grads = torch.ops.npu.npu_mhc_post_backward(x.to("meta"), x.to("meta"), None, h_out.to("meta"), h_post.to("meta"))
    assert [tuple(t.shape) for t in grads] == [(5, 4, 8), (5, 4, 4), (5, 8), (5, 4)]
    before = torch.npu.op_stats().get("aclnnMhcPost", {}).get("device_op", 0)
    torch_npu.npu_mhc_post(x.npu(), h_res.npu(), h_out.npu(), h_post.npu())
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnMhcPost"]["device_op"] == before + 1


def test_mhc_post_errors():
    x, h_res, h_out, h_post = make_mhc_post((5, 4, 8), torch.float16)
    with pytest.raises(ValueError, match="npu_mhc_post: h_out must be"):
        torch_npu.npu_mhc_post(x.npu(), h_res.npu(), h_out[:, :4].npu(), h_post.npu())
    with pytest.raises(TypeError, match="npu_mhc_post: h_post and h_res must be float32"):
        torch_npu.npu_mhc_post(x.npu(), h_res.half().npu(), h_out.npu(), h_post.npu())


# ---- npu_fused_cross_entropy_loss_with_max_sum ----

def max_sum_statistics(logits):
    """The all-reduced statistics a single rank holding the whole vocabulary would produce."""
    target = torch.randint(0, logits.shape[1], (logits.shape[0],))
    logits_max = logits.float().max(-1).values
    sum_exp = (logits.float() - logits_max.unsqueeze(-1)).exp().sum(-1)
    predicted = logits.float().gather(1, target.unsqueeze(1)).squeeze(1) - logits_max
    return logits_max, sum_exp, predicted, target


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_loss_with_max_sum(dtype):
    logits = torch.randn(6, 40).to(dtype)
    logits_max, sum_exp, predicted, target = max_sum_statistics(logits)
    loss, softmax = torch_npu.npu_fused_cross_entropy_loss_with_max_sum(
        logits_max.npu(), sum_exp.npu(), predicted.npu(), label_smoothing=0.0, vocab_parallel_logits=logits.npu())
    want_loss, want_softmax = ref.cross_entropy_loss_with_max_sum(logits_max, sum_exp, predicted, logits)
    assert loss.dtype == torch.float32 and softmax.dtype == torch.float32 and softmax.shape == logits.shape
    torch.testing.assert_close(loss.cpu(), want_loss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(softmax.cpu(), want_softmax, atol=1e-6, rtol=1e-5)
    # with the whole vocabulary on one rank it is the ordinary cross entropy
    torch.testing.assert_close(loss.cpu(), torch.nn.functional.cross_entropy(logits.float(), target, reduction="none"),
                               atol=1e-5, rtol=1e-5)


def test_cross_entropy_loss_with_max_sum_without_logits():
    logits_max, sum_exp, predicted, _ = max_sum_statistics(torch.randn(9, 16))
    loss, softmax = torch_npu.npu_fused_cross_entropy_loss_with_max_sum(logits_max.npu(), sum_exp.npu(),
                                                                        predicted.npu())
    assert softmax is None
    torch.testing.assert_close(loss.cpu(), ref.cross_entropy_loss_with_max_sum(logits_max, sum_exp, predicted)[0])


def test_cross_entropy_loss_with_max_sum_meta_and_device_op():
    meta = torch.empty(5, device="meta")
    loss, softmax = torch.ops.npu.npu_fused_cross_entropy_loss_with_max_sum(
        meta, meta, meta, vocab_parallel_logits=torch.empty(5, 12, dtype=torch.float16, device="meta"))
    assert loss.shape == (5,) and softmax.shape == (5, 12) and softmax.dtype == torch.float32
    before = torch.npu.op_stats().get("aclnnFusedCrossEntropyLossWithMaxSum", {}).get("device_op", 0)
    stats = [t.npu() for t in max_sum_statistics(torch.randn(5, 12))[:3]]
    torch_npu.npu_fused_cross_entropy_loss_with_max_sum(*stats)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnFusedCrossEntropyLossWithMaxSum"]["device_op"] == before + 1


def test_cross_entropy_loss_with_max_sum_errors():
    stats = [t.npu() for t in max_sum_statistics(torch.randn(5, 12))[:3]]
    with pytest.raises(ValueError, match="npu_fused_cross_entropy_loss_with_max_sum: only label_smoothing=0.0"):
        torch_npu.npu_fused_cross_entropy_loss_with_max_sum(*stats, label_smoothing=0.1)
    with pytest.raises(TypeError, match="npu_fused_cross_entropy_loss_with_max_sum: logits_max, sum_exp_logits"):
        torch_npu.npu_fused_cross_entropy_loss_with_max_sum(stats[0].half(), stats[1], stats[2])
    with pytest.raises(ValueError, match="vocab_parallel_logits must be 2-D"):
        torch_npu.npu_fused_cross_entropy_loss_with_max_sum(*stats, vocab_parallel_logits=torch.randn(4, 12).npu())


# ---- npu_fused_linear_online_max_sum ----

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target_dtype", [torch.int32, torch.int64])
def test_fused_linear_online_max_sum(dtype, target_dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(13, 16, generator=g).to(dtype)
    weight = torch.randn(24, 16, generator=g).to(dtype)
    target = torch.randint(0, 64, (13,), generator=g).to(target_dtype)
    out = torch_npu.npu_fused_linear_online_max_sum(x.npu(), weight.npu(), target.npu(), 20, 43, return_logits=True)
    want = ref.fused_linear_online_max_sum(x, weight, target, 20, 43)
    assert out[3].shape == (2,) and out[3].dtype == torch.uint8 and out[4].dtype == target_dtype
    assert out[5].dtype == dtype and out[5].shape == (13, 24)
    tol = 1e-4 if dtype == torch.float32 else 1e-3
    for got, exp in zip(out[:3], want[:3]):
        torch.testing.assert_close(got.cpu(), exp, atol=tol, rtol=tol)
    assert torch.equal(out[3].cpu(), want[3]) and torch.equal(out[4].cpu(), want[4])
    torch.testing.assert_close(out[5].cpu(), want[5].to(dtype))


def test_fused_linear_online_max_sum_then_loss_is_cross_entropy():
    # one shard holding the whole vocabulary: the two ops together give the ordinary cross entropy
    x, weight = torch.randn(9, 8), torch.randn(30, 8)
    target = torch.randint(0, 30, (9,))
    logits_max, sum_exp, predicted, _, _, logits = torch_npu.npu_fused_linear_online_max_sum(
        x.npu(), weight.npu(), target.npu(), 0, 29)
    assert logits is None
    loss, _ = torch_npu.npu_fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp, predicted)
    torch.testing.assert_close(loss.cpu(), torch.nn.functional.cross_entropy(x @ weight.t(), target, reduction="none"),
                               atol=1e-4, rtol=1e-4)


def test_fused_linear_online_max_sum_meta_and_device_op():
    x, weight, target = torch.randn(5, 4), torch.randn(7, 4), torch.randint(0, 7, (5,))
    out = torch.ops.npu.npu_fused_linear_online_max_sum(x.to("meta"), weight.to("meta"), target.to("meta"), 0, 6, True)
    assert [tuple(t.shape) for t in out] == [(5,), (5,), (5,), (1,), (5,), (5, 7)]
    before = torch.npu.op_stats().get("aclnnFusedLinearOnlineMaxSum", {}).get("device_op", 0)
    torch_npu.npu_fused_linear_online_max_sum(x.npu(), weight.npu(), target.npu(), 0, 6)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnFusedLinearOnlineMaxSum"]["device_op"] == before + 1


def test_fused_linear_online_max_sum_errors():
    x, weight, target = torch.randn(5, 4).npu(), torch.randn(7, 4).npu(), torch.randint(0, 7, (5,)).npu()
    with pytest.raises(ValueError, match="npu_fused_linear_online_max_sum: need 0 <= vocab_start_index"):
        torch_npu.npu_fused_linear_online_max_sum(x, weight, target, 3, 12)
    with pytest.raises(TypeError, match="npu_fused_linear_online_max_sum: target must be int32 or int64"):
        torch_npu.npu_fused_linear_online_max_sum(x, weight, target.float(), 0, 6)
    with pytest.raises(TypeError, match="npu_fused_linear_online_max_sum: weight must have input's dtype"):
        torch_npu.npu_fused_linear_online_max_sum(x, weight.half(), target, 0, 6)


# ---- npu_ifmr ----

def ifmr_inputs(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(shape, generator=g) * 2 - 1).to(dtype)
    lo, hi = x.float().min().reshape(1), x.float().max().reshape(1)
    cumsum = torch.cumsum(torch.histc(x.float(), bins=128, min=lo.item(), max=hi.item()), 0).int()
    return x, lo.to(dtype), hi.to(dtype), cumsum


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(2, 2, 3, 4), (5, 5), (30, 17)])
@pytest.mark.parametrize("with_offset", [True, False])
def test_ifmr(dtype, shape, with_offset):
    x, lo, hi, cumsum = ifmr_inputs(shape, dtype)
    args = (0.999999, 0.999999, 0.7, 1.3, 0.01, with_offset)
    scale, offset = torch_npu.npu_ifmr(x.npu(), lo.npu(), hi.npu(), cumsum.npu(), *args)
    want_scale, want_offset = ref.ifmr(x, lo, hi, cumsum, *args)
    assert scale.shape == (1,) and scale.dtype == dtype and offset.dtype == dtype
    torch.testing.assert_close(scale.cpu().float()[0], want_scale.to(dtype).float(), rtol=1e-4, atol=0)
    assert offset.cpu().float()[0].item() == want_offset.item()


def test_ifmr_meta_and_device_op():
    x, lo, hi, cumsum = ifmr_inputs((4, 8))
    scale, offset = torch.ops.npu.npu_ifmr(x.to("meta"), lo.to("meta"), hi.to("meta"), cumsum.to("meta"),
                                           0.999, 0.999, 0.7, 1.3, 0.01, True)
    assert scale.shape == (1,) and offset.shape == (1,)
    before = torch.npu.op_stats().get("aclnnIfmr", {}).get("device_op", 0)
    torch_npu.npu_ifmr(x.npu(), lo.npu(), hi.npu(), cumsum.npu(), 0.999, 0.999, 0.7, 1.3, 0.01, True)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnIfmr"]["device_op"] == before + 1


def test_ifmr_errors():
    x, lo, hi, cumsum = (t.npu() for t in ifmr_inputs((4, 8)))
    with pytest.raises(TypeError, match="npu_ifmr: cumsum must be int32"):
        torch_npu.npu_ifmr(x, lo, hi, cumsum.float(), 0.999, 0.999, 0.7, 1.3, 0.01, True)
    with pytest.raises(ValueError, match="npu_ifmr: need 0 < search_start < search_end"):
        torch_npu.npu_ifmr(x, lo, hi, cumsum, 0.999, 0.999, 1.3, 0.7, 0.01, True)
