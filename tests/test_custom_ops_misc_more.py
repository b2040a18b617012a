"""npu_quant_conv2d, npu_fused_attention_layernorm_qkv_fwd and npu_hans_encode / npu_hans_decode against CPU
references written from their documented definitions, with Meta kernels, device-op counters and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import misc_more as ref


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


# ---- npu_quant_conv2d ----

def conv_inputs(n=2, c=4, h=6, w=5, co=6, k=3, groups=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-128, 128, (n, c, h, w), generator=g, dtype=torch.int8)
    weight = torch.randint(-128, 128, (co, c // groups, k, k), generator=g, dtype=torch.int8)
    # Scales truncated to FP19 (as upstream's golden does), so that the packed int64 form holds them exactly.
    scale = ((torch.rand(co, generator=g) + 1) * 1e-3).view(torch.int32).bitwise_and(-8192).view(torch.float32)
    bias = torch.randint(-1000, 1000, (co,), generator=g, dtype=torch.int32)
    return x, weight, scale, bias


@pytest.mark.parametrize("output_dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("with_bias", [False, True])
def test_quant_conv2d_matches_reference(output_dtype, with_bias):
    x, w, scale, bias = conv_inputs()
    bias = bias if with_bias else None
    got = torch_npu.npu_quant_conv2d(x.npu(), w.npu(), scale.npu(), output_dtype=output_dtype,
                                     bias=None if bias is None else bias.npu()).cpu()
    expected = ref.quant_conv2d(x, w, scale, output_dtype=output_dtype, bias=bias)
    assert got.dtype == output_dtype and got.shape == (2, 6, 4, 3)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_quant_conv2d_stride_pad_dilation_groups_offset_x():
    x, w, scale, bias = conv_inputs(c=4, h=9, w=8, co=6, groups=2)
    args = dict(strides=(2, 1), pads=(1, 2), dilations=(1, 2), groups=2, offset_x=-3)
    got = torch_npu.npu_quant_conv2d(x.npu(), w.npu(), scale.npu(), **args, output_dtype=torch.float32,
                                     bias=bias.npu()).cpu()
    expected = ref.quant_conv2d(x, w, scale, output_dtype=torch.float32, bias=bias, **args)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_quant_conv2d_packed_int64_scale_and_upstream_golden():
    x, w, scale, _ = conv_inputs()
    packed = scale.view(torch.int32).to(torch.int64).bitwise_and(0xFFFFFFFF).bitwise_or(1 << 46)
    got = torch_npu.npu_quant_conv2d(x.npu(), w.npu(), packed.npu(), output_dtype=torch.float16).cpu()
    # upstream's golden: int32 convolution times the float32 scale, then float16
    golden = (torch.nn.functional.conv2d(x.to(torch.int32), w.to(torch.int32)) * scale.view(1, -1, 1, 1)).half()
    torch.testing.assert_close(got, golden, rtol=0, atol=0)


def test_quant_conv2d_meta_and_device_op():
    x, w, scale, bias = conv_inputs()
    meta = torch.ops.npu.npu_quant_conv2d(x.to("meta"), w.to("meta"), scale.to("meta"), pads=(1, 1),
                                          output_dtype=torch.bfloat16, bias=bias.to("meta"))
    assert meta.shape == (2, 6, 6, 5) and meta.dtype == torch.bfloat16
    before = device_op_count("aclnnQuantConvolution")
    torch_npu.npu_quant_conv2d(x.npu(), w.npu(), scale.npu(), output_dtype=torch.float16)
    torch.npu.synchronize()
    assert device_op_count("aclnnQuantConvolution") == before + 1


def test_quant_conv2d_bad_inputs():
    x, w, scale, bias = conv_inputs()
    xn, wn, sn = x.npu(), w.npu(), scale.npu()
    with pytest.raises(ValueError, match="output_dtype can not be None"):
        torch_npu.npu_quant_conv2d(xn, wn, sn)
    with pytest.raises(TypeError, match="output_dtype must be"):
        torch_npu.npu_quant_conv2d(xn, wn, sn, output_dtype=torch.int8)
    with pytest.raises(TypeError, match="input and weight must be int8"):
        torch_npu.npu_quant_conv2d(xn.float(), wn, sn, output_dtype=torch.float16)
    with pytest.raises(TypeError, match="chip number format"):
        torch_npu.npu_quant_conv2d(xn, wn, sn, output_dtype=torch.float16, input_dtype=290, weight_dtype=290)
    with pytest.raises(ValueError, match="scale must have shape"):
        torch_npu.npu_quant_conv2d(xn, wn, sn[:4], output_dtype=torch.float16)
    with pytest.raises(ValueError, match="offset must be None"):
        torch_npu.npu_quant_conv2d(xn, wn, sn, output_dtype=torch.float16, offset=sn)
    with pytest.raises(ValueError, match="output would be empty"):
        torch_npu.npu_quant_conv2d(xn[:, :, :2], wn, sn, output_dtype=torch.float16)
    with pytest.raises(ValueError, match="groups"):
        torch_npu.npu_quant_conv2d(xn, wn, sn, groups=3, output_dtype=torch.float16)
    with pytest.raises(ValueError, match="offset_x must be in"):
        torch_npu.npu_quant_conv2d(xn, wn, sn, offset_x=200, output_dtype=torch.float16)


# ---- npu_fused_attention_layernorm_qkv_fwd ----

def ln_qkv_inputs(dtype, batch=2, seq_len=4, hidden=16, seed=0, bias=True):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(batch * seq_len, hidden, generator=g) * 12 - 6).to(dtype)
    kernels = [((torch.rand(hidden, hidden, generator=g) - 0.5) * 0.2).to(dtype) for _ in range(3)]
    gamma, beta = torch.rand(hidden, generator=g).to(dtype), torch.rand(hidden, generator=g).to(dtype)
    biases = [torch.rand(hidden, generator=g).to(dtype) if bias else None for _ in range(3)]
    return x, kernels, gamma, beta, biases


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
def test_ln_qkv_matches_reference(dtype, bias):
    x, ks, gamma, beta, bs = ln_qkv_inputs(dtype, bias=bias)
    npu = lambda t: None if t is None else t.npu()  # noqa: E731
    got = torch_npu.npu_fused_attention_layernorm_qkv_fwd(x.npu(), *[npu(k) for k in ks], gamma.npu(), beta.npu(),
                                                          *[npu(b) for b in bs], seq_len=4, num_heads=2)
    expected = ref.fused_attention_layernorm_qkv_fwd(x, *ks, gamma, beta, *bs, seq_len=4, num_heads=2)
    assert len(got) == 6
    tol = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]
    for g_t, e_t in zip(got, expected):
        assert g_t.shape == e_t.shape and g_t.dtype == e_t.dtype
        torch.testing.assert_close(g_t.cpu(), e_t, rtol=tol, atol=tol)


def test_ln_qkv_statistics_match_native_layer_norm():
    x, ks, gamma, beta, bs = ln_qkv_inputs(torch.float32)
    norm, _, _, _, mean, var = torch_npu.npu_fused_attention_layernorm_qkv_fwd(
        x.npu(), *[k.npu() for k in ks], gamma.npu(), beta.npu(), seq_len=4, num_heads=2, eps=1e-5)
    n_ref, m_ref, rstd_ref = torch.native_layer_norm(x, (16,), gamma, beta, 1e-5)
    torch.testing.assert_close(norm.cpu(), n_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mean.cpu(), m_ref.view(-1), rtol=1e-5, atol=1e-5)
    # variance is the biased variance (rstd = 1 / sqrt(variance + eps))
    torch.testing.assert_close(torch.rsqrt(var.cpu() + 1e-5), rstd_ref.view(-1), rtol=1e-4, atol=1e-4)


def test_ln_qkv_meta_and_device_op():
    x, ks, gamma, beta, bs = ln_qkv_inputs(torch.float16)
    meta = torch.ops.npu.npu_fused_attention_layernorm_qkv_fwd(
        x.to("meta"), *[k.to("meta") for k in ks], gamma.to("meta"), beta.to("meta"), *[b.to("meta") for b in bs],
        seq_len=4, num_heads=2)
    shapes = [tuple(t.shape) for t in meta]
    assert shapes == [(8, 16), (2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8), (8,), (8,)]
    assert all(t.dtype == torch.float16 for t in meta)
    before = device_op_count("aclnnAttentionLnQKV")
    torch_npu.npu_fused_attention_layernorm_qkv_fwd(x.npu(), *[k.npu() for k in ks], gamma.npu(), beta.npu(),
                                                    seq_len=4, num_heads=2)
    torch.npu.synchronize()
    assert device_op_count("aclnnAttentionLnQKV") == before + 1


def test_ln_qkv_bad_inputs():
    x, ks, gamma, beta, _ = ln_qkv_inputs(torch.float16)
    xn, kn, gn, bn = x.npu(), [k.npu() for k in ks], gamma.npu(), beta.npu()
    f = torch_npu.npu_fused_attention_layernorm_qkv_fwd
    with pytest.raises(ValueError, match="divisible by seq_len"):
        f(xn, *kn, gn, bn, seq_len=3, num_heads=2)
    with pytest.raises(ValueError, match="seq_len and num_heads must be positive"):
        f(xn, *kn, gn, bn, seq_len=0, num_heads=2)
    with pytest.raises(ValueError, match="kernel_key must be"):
        f(xn, kn[0], kn[1][:8], kn[2], gn, bn, seq_len=4, num_heads=2)
    with pytest.raises(TypeError, match="gamma must have x's dtype"):
        f(xn, *kn, gn.float(), bn, seq_len=4, num_heads=2)
    with pytest.raises(ValueError, match="x must be 2-D"):
        f(xn.view(2, 4, 16), *kn, gn, bn, seq_len=4, num_heads=2)
    with pytest.raises(TypeError, match="x must be float16"):
        f(xn.int(), *kn, gn, bn, seq_len=4, num_heads=2)


# ---- npu_hans_encode / npu_hans_decode ----

N_HANS = 32768  # upstream's minimum element count


def hans_input(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, N_HANS // 64, generator=g).to(dtype)
    flat = x.view(-1)
    flat[:4] = torch.tensor([0.0, -0.0, float("inf"), float("-inf")]).to(dtype)
    flat[4] = float("nan")
    flat[5:9] = torch.tensor([1e-30, -1e-30, 6e-8, 3e38]).to(dtype)  # subnormals / extremes of each format
    return x


def encode(x, statistic=True, reshuff=False, pdf=None, **sizes):
    bufs = [t.npu() for t in ref.hans_buffers(x, reshuff=reshuff, **sizes)]
    if pdf is not None:
        bufs[0] = pdf.clone().npu()
    # torch_npu's calling form: the written buffers as one out= tuple, returned as they were given.
    outs = torch_npu.npu_hans_encode(x.npu(), statistic, reshuff, out=tuple(bufs))
    assert all(o.data_ptr() == b.data_ptr() for o, b in zip(outs, bufs))
    return outs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reshuff", [False, True])
def test_hans_round_trip_bit_exact(dtype, reshuff):
    x = hans_input(dtype)
    pdf, man, fix, var = encode(x, reshuff=reshuff)
    torch.testing.assert_close(pdf.cpu(), ref.hans_pdf(x), rtol=0, atol=0)
    recover = torch.zeros_like(x).npu()
    out = torch_npu.npu_hans_decode(man, fix, var, pdf, reshuff, out=recover)
    assert out.data_ptr() == recover.data_ptr()
    int_t = torch.int32 if dtype == torch.float32 else torch.int16
    assert torch.equal(recover.cpu().view(int_t), x.view(int_t))


def test_hans_stream_spills_into_var_and_given_pdf_is_kept():
    x = hans_input(torch.float32, seed=1)
    stats = ref.hans_pdf(x)
    # statistic=False codes against the pdf given (here a stale one from other data) and leaves it unchanged.
    stale = ref.hans_pdf(hans_input(torch.float32, seed=2))
    n = x.numel()
    pdf, man, fix, var = encode(x, statistic=False, pdf=stale, fixed_bytes=1024, var_bytes=n + n // 64 + 8448)
    assert torch.equal(pdf.cpu(), stale) and not torch.equal(stale, stats)
    assert var.cpu().view(torch.uint8).any()  # the stream continued in var
    recover = torch.zeros_like(x).npu()
    torch_npu.npu_hans_decode(man, fix, var, pdf, False, out=recover)
    assert torch.equal(recover.cpu().view(torch.int32), x.view(torch.int32))


def test_hans_compresses_and_mantissa_is_the_low_bytes():
    x = hans_input(torch.bfloat16)
    pdf, man, fix, var = encode(x, reshuff=True)
    bits = x.view(torch.int16).to(torch.int32) & 0xFFFF
    expected_man = (((bits >> 15) << 7) | (bits & 0x7F)).to(torch.uint8)
    assert torch.equal(man.cpu().view(torch.uint8), expected_man.view(-1))
    # randn's exponents take few values: the coded exponents need well under a byte each. The header records the
    # stream's length (int64 at byte 16); with reshuff it lies wholly in fixed, after the 512-byte header.
    fixed_bytes = fix.cpu().view(torch.uint8)
    stream_bytes = int(fixed_bytes[16:24].view(torch.int64))
    assert 0 < stream_bytes < x.numel() // 2
    assert fixed_bytes[512 + stream_bytes:].sum() == 0
    assert not var.cpu().view(torch.uint8).any()


def test_hans_meta_and_device_ops():
    x = hans_input(torch.float16)
    bufs = [t.to("meta") for t in ref.hans_buffers(x)]
    outs = torch.ops.npu.npu_hans_encode.out(x.to("meta"), True, False, pdf=bufs[0], mantissa=bufs[1],
                                             fixed=bufs[2], var=bufs[3])
    assert [tuple(o.shape) for o in outs] == [tuple(b.shape) for b in bufs]
    rec = torch.ops.npu.npu_hans_decode.out(bufs[1], bufs[2], bufs[3], bufs[0], False, out=x.to("meta"))
    assert rec.shape == x.shape and rec.dtype == torch.float16
    enc0, dec0 = device_op_count("aclnnHansEncode"), device_op_count("aclnnHansDecode")
    pdf, man, fix, var = encode(x)
    torch_npu.npu_hans_decode(man, fix, var, pdf, False, out=torch.zeros_like(x).npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnHansEncode") == enc0 + 1 and device_op_count("aclnnHansDecode") == dec0 + 1


def test_hans_bad_inputs():
    x = hans_input(torch.float16)
    pdf, man, fix, var = [t.npu() for t in ref.hans_buffers(x)]
    xn = x.npu()
    enc = torch_npu.npu_hans_encode
    with pytest.raises(ValueError, match="multiple of 64 elements"):
        enc(xn.view(-1)[:32736], True, False, pdf=pdf, mantissa=man, fixed=fix, var=var)
    with pytest.raises(TypeError, match="must be float16, float32 or bfloat16"):
        enc(xn.int(), True, False, pdf=pdf, mantissa=man.int(), fixed=fix.int(), var=var.int())
    with pytest.raises(ValueError, match="mantissa must hold"):
        enc(xn, True, False, pdf=pdf, mantissa=man[:-1], fixed=fix, var=var)
    with pytest.raises(ValueError, match="compression bound"):
        enc(xn, True, False, pdf=pdf, mantissa=man, fixed=fix, var=var[:10])
    with pytest.raises(ValueError, match="reshuff=True fixed alone"):
        enc(xn, True, True, pdf=pdf, mantissa=man, fixed=fix, var=var)
    with pytest.raises(ValueError, match="pdf must have shape"):
        enc(xn, True, False, pdf=pdf[:, :128], mantissa=man, fixed=fix, var=var)
    with pytest.raises(TypeError, match="pdf must be int32"):
        enc(xn, True, False, pdf=pdf.float(), mantissa=man, fixed=fix, var=var)
    # decode checks what the encoder recorded: reshuff and pdf must be the ones used to encode
    pdf, man, fix, var = encode(x)
    out = torch.zeros_like(x).npu()
    with pytest.raises(RuntimeError, match="reshuff"):
        torch_npu.npu_hans_decode(man, fix, var, pdf, True, out=out)
        torch.npu.synchronize()
    wrong = pdf.clone()
    wrong[0, 0] += 1
    with pytest.raises(RuntimeError, match="pdf is not the one"):
        torch_npu.npu_hans_decode(man, fix, var, wrong, False, out=out)
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="no npu_hans_encode result"):
        torch_npu.npu_hans_decode(man, torch.zeros_like(fix), var, pdf, False, out=out)
        torch.npu.synchronize()
