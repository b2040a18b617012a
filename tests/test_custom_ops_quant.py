"""Quantized inference matmuls against CPU references written from their definitions
(custom_op_refs.py): npu_trans_quant_param's int64 packing (truncated and rounded FP19 scales, offsets),
npu_quant_matmul (int8 / int4 operands, per-tensor / per-channel / packed scales, int32 and float bias,
per-token scales, int8 / float16 / bfloat16 / int32 outputs, batch broadcasting),
npu_weight_quant_batchmatmul (per-tensor / per-channel / per-group, offsets, packed scales, int4 weights,
int8 requantisation); Meta shapes, torch.compile, the contrib Linear*Quant modules, clear errors."""

import warnings

import pytest
import torch

import custom_op_refs as ref
import torch_npu


def _int8(shape, g):
    return torch.randint(-8, 8, shape, generator=g, dtype=torch.int8)


def test_trans_quant_param_packs_scale_and_offset():
    g = torch.Generator().manual_seed(0)
    scale = torch.rand(16, generator=g) * 0.1 + 1e-3
    offset = torch.randn(16, generator=g) * 300  # clamped to [-256, 255]
    for args in ((scale,), (scale, offset), (scale.reshape(1, 16), offset.reshape(1, 16)), (scale[:1], offset)):
        for mode in (0, 1):
            got = torch_npu.npu_trans_quant_param(*(a.npu() for a in args), round_mode=mode)
            assert got.dtype == torch.int64
            assert torch.equal(got.cpu(), ref.trans_quant_param(*args, round_mode=mode)), (args[0].shape, mode)
    packed = torch_npu.npu_trans_quant_param(scale.npu(), offset.npu()).cpu()
    back, off = ref.unpack_quant_scale(packed)
    assert torch.allclose(back, scale, rtol=2 ** -10) and (back <= scale).all()  # truncation to FP19
    assert torch.equal(off, offset.round().clamp(-256, 255))
    with pytest.raises(TypeError, match="float32"):
        torch_npu.npu_trans_quant_param(scale.half().npu())


@pytest.mark.parametrize("out_dtype", [None, torch.float16, torch.bfloat16, torch.int32])
def test_quant_matmul_outputs(out_dtype):
    g = torch.Generator().manual_seed(1)
    x1, x2 = _int8((2, 5, 32), g), _int8((32, 24), g)
    scale = torch.rand(24, generator=g) * 0.05
    bias = torch.randint(-50, 50, (24,), generator=g, dtype=torch.int32)
    offset = (torch.randn(24, generator=g) * 3) if out_dtype is None else None  # int8 outputs take one
    got = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), bias=bias.npu(), output_dtype=out_dtype,
                                     offset=offset.npu() if offset is not None else None)
    expected = ref.quant_matmul(x1, x2, scale, offset=offset, bias=bias, output_dtype=out_dtype or torch.int8)
    assert got.shape == (2, 5, 24) and got.dtype == (out_dtype or torch.int8)
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-2, atol=1e-2)
    else:
        assert (got.cpu().int() - expected.int()).abs().max() <= (0 if out_dtype == torch.int32 else 1)


def test_quant_matmul_pertoken_float_bias_packed_scale_int4_and_broadcast():
    g = torch.Generator().manual_seed(2)
    x1, x2 = _int8((7, 16), g), _int8((16, 8), g)
    pertoken, scale = torch.rand(7, generator=g), torch.rand(8, generator=g) * 0.1
    bias = torch.randn(8, generator=g).bfloat16()
    got = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), pertoken_scale=pertoken.npu(), bias=bias.npu(),
                                     output_dtype=torch.bfloat16)
    torch.testing.assert_close(got.cpu(), ref.quant_matmul(x1, x2, scale, pertoken_scale=pertoken, bias=bias,
                                                           output_dtype=torch.bfloat16), rtol=1e-2, atol=1e-2)
    # An int64 (trans_quant_param) scale carries the offset; per-tensor scale of shape (1,).
    packed = torch_npu.npu_trans_quant_param(scale.npu(), (torch.randn(8, generator=g) * 5).npu())
    got = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), packed)
    assert torch.equal(got.cpu(), ref.quant_matmul(x1, x2, packed.cpu()))
    one = torch.tensor([0.03])
    assert torch.equal(torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), one.npu()).cpu(), ref.quant_matmul(x1, x2, one))
    # int4 operands, 8 per int32 along the last dimension.
    a4 = torch.randint(-2 ** 31, 2 ** 31 - 1, (3, 2), generator=g, dtype=torch.int32)  # (3, 16) int4
    b4 = torch.randint(-2 ** 31, 2 ** 31 - 1, (16, 1), generator=g, dtype=torch.int32)  # (16, 8) int4
    got = torch_npu.npu_quant_matmul(a4.npu(), b4.npu(), scale.npu(), output_dtype=torch.float16)
    torch.testing.assert_close(got.cpu(), ref.quant_matmul(ref.unpack_int4(a4), ref.unpack_int4(b4), scale,
                                                           output_dtype=torch.float16), rtol=1e-2, atol=1e-2)
    # Batch dimensions broadcast.
    xb, wb = _int8((3, 1, 4, 16), g), _int8((2, 16, 8), g)
    got = torch_npu.npu_quant_matmul(xb.npu(), wb.npu(), scale.npu(), output_dtype=torch.float16)
    assert got.shape == (3, 2, 4, 8)
    torch.testing.assert_close(got.cpu(), ref.quant_matmul(xb, wb, scale, output_dtype=torch.float16), rtol=1e-2,
                               atol=1e-2)


def test_quant_matmul_errors():
    x1, x2, s = torch.ones(4, 8, dtype=torch.int8), torch.ones(8, 3, dtype=torch.int8), torch.ones(3)
    with pytest.raises(ValueError, match="do not multiply"):
        torch_npu.npu_quant_matmul(x1.npu(), x1.npu(), s.npu())
    with pytest.raises(TypeError, match="int8"):
        torch_npu.npu_quant_matmul(x1.float().npu(), x2.npu(), s.npu())
    with pytest.raises(ValueError, match="output_dtype must be"):
        torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), s.npu(), output_dtype=torch.float32)
    with pytest.raises(ValueError, match="x1_dtype selects a chip number format"):
        torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), s.npu(), x1_dtype=1)
    with pytest.raises(RuntimeError, match="scale must have shape"):
        torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), torch.ones(5).npu())
        torch.npu.synchronize()


@pytest.mark.parametrize("mode", ["tensor", "channel", "group", "offset", "packed", "int4", "requant"])
def test_weight_quant_batchmatmul(mode):
    g = torch.Generator().manual_seed(3)
    m, k, n = 5, 64, 24
    x = (torch.randn(m, k, generator=g) * 0.5).half()
    w = _int8((k, n), g)
    scale = (torch.rand(n, generator=g) * 0.05).half()
    kwargs, expected_kwargs = {}, {}
    offset = None
    if mode == "tensor":
        scale = scale[:1]
    elif mode == "group":
        scale = (torch.rand(2, n, generator=g) * 0.05).half()
        kwargs["antiquant_group_size"] = expected_kwargs["antiquant_group_size"] = 32
    elif mode == "offset":
        offset = torch.randn(n, generator=g).half()
    elif mode == "packed":
        scale = torch_npu.npu_trans_quant_param(scale.float().npu()).cpu()
        offset = torch.randint(-4, 4, (n,), generator=g, dtype=torch.int32)
    elif mode == "int4":
        w = torch.randint(-2 ** 31, 2 ** 31 - 1, (k, n // 8), generator=g, dtype=torch.int32)
    bias = torch.randn(n, generator=g).half()
    quant = {}
    if mode == "requant":
        quant = dict(quant_scale=torch.rand(n, generator=g) * 4, quant_offset=torch.randn(n, generator=g))
    got = torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.npu(), scale.npu(),
                                                 offset.npu() if offset is not None else None,
                                                 *(quant[k_].npu() for k_ in ("quant_scale", "quant_offset") if quant),
                                                 bias=bias.npu(), **kwargs)
    expected = ref.weight_quant_batchmatmul(x, w, scale, offset, bias=bias, **quant, **expected_kwargs)
    assert got.shape == (m, n) and got.dtype == expected.dtype
    if mode == "requant":
        assert (got.cpu().int() - expected.int()).abs().max() <= 1
    else:
        torch.testing.assert_close(got.cpu().float(), expected.float(), rtol=1e-2, atol=2e-2)


def test_weight_quant_batchmatmul_errors_and_meta():
    x, w, s = torch.randn(4, 64).half(), torch.ones(64, 8, dtype=torch.int8), torch.ones(8).half()
    with pytest.raises(ValueError, match="do not multiply"):
        torch_npu.npu_weight_quant_batchmatmul(x.npu(), torch.ones(32, 8, dtype=torch.int8).npu(), s.npu())
    with pytest.raises(TypeError, match="int8"):
        torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.half().npu(), s.npu())
    with pytest.raises(ValueError, match="weight_dtype selects a chip number format"):
        torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.npu(), s.npu(), weight_dtype=1)
    with pytest.raises(RuntimeError, match="multiple of 32"):
        torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.npu(), torch.ones(3, 8).half().npu(), antiquant_group_size=20)
        torch.npu.synchronize()
    meta = torch_npu.npu_weight_quant_batchmatmul(x.to("meta"), torch.ones(64, 2, dtype=torch.int32, device="meta"),
                                                  s.to("meta"), quant_scale=torch.ones(16, device="meta"))
    assert meta.shape == (4, 16) and meta.dtype == torch.int8
    meta = torch_npu.npu_quant_matmul(torch.ones(2, 3, 8, dtype=torch.int8, device="meta"),
                                      torch.ones(8, 5, dtype=torch.int8, device="meta"), torch.ones(5, device="meta"),
                                      output_dtype=torch.bfloat16)
    assert meta.shape == (2, 3, 5) and meta.dtype == torch.bfloat16


def test_quant_ops_compile_with_fullgraph():
    g = torch.Generator().manual_seed(4)
    x1, x2, s = _int8((4, 16), g), _int8((16, 8), g), torch.rand(8, generator=g) * 0.1

    def f(a, b, scale):
        packed = torch_npu.npu_trans_quant_param(scale)
        return torch_npu.npu_quant_matmul(a, b, packed, output_dtype=torch.float16) * 2

    got = torch.compile(f, backend="npu", fullgraph=True)(x1.npu(), x2.npu(), s.npu())
    torch.testing.assert_close(got.cpu(), f(x1.npu(), x2.npu(), s.npu()).cpu())


def test_linear_quant_modules_match_their_ops():
    from torch_npu.contrib import LinearA8W8Quant, LinearQuant, LinearWeightQuant

    g = torch.Generator().manual_seed(5)
    x, w = _int8((3, 32), g), _int8((16, 32), g)
    scale, bias = torch.rand(16, generator=g) * 0.05, torch.randint(-9, 9, (16,), generator=g, dtype=torch.int32)
    lin = LinearQuant(32, 16, output_dtype=torch.float16).npu()
    lin.weight.data, lin.scale.data, lin.bias.data = w.npu(), scale.npu(), bias.npu()
    # float16 output: the float32 scale is packed to FP19 first, as upstream's module does.
    packed = ref.trans_quant_param(scale)
    torch.testing.assert_close(lin(x.npu()).cpu(), ref.quant_matmul(x, w.t(), packed, bias=bias,
                                                                    output_dtype=torch.float16), rtol=1e-2, atol=1e-2)
    with pytest.warns(FutureWarning, match="LinearQuant"):
        old = LinearA8W8Quant(32, 16, bias=False).npu()
    old.weight.data, old.scale.data = w.npu(), scale.npu()
    assert torch.equal(old(x.npu()).cpu(), ref.quant_matmul(x, w.t(), ref.trans_quant_param(scale)))
    with pytest.raises(ValueError, match="must both be torch.int8"):
        lin(x.float().npu())

    xf = torch.randn(3, 32, generator=g).half()
    wq = LinearWeightQuant(32, 16, antiquant_offset=True).npu()
    a_scale, a_off = (torch.rand(16, generator=g) * 0.05).half(), torch.randn(16, generator=g).half()
    fbias = torch.randn(16, generator=g).half()
    wq.weight.data, wq.antiquant_scale.data, wq.antiquant_offset.data, wq.bias.data = \
        w.npu(), a_scale.npu(), a_off.npu(), fbias.npu()
    torch.testing.assert_close(wq(xf.npu()).cpu().float(),
                               ref.weight_quant_batchmatmul(xf, w.t(), a_scale, a_off, bias=fbias).float(),
                               rtol=1e-2, atol=2e-2)
