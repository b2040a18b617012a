"""torch_npu's dtype codes (torch_npu.float16 = aclDataType + 256, torch_npu.hifloat8, ...): their values, the
ops' `int` dtype arguments taking them beside torch dtypes (npu_dtype_cast, npu_quant_matmul, npu_grouped_matmul),
ScalarType arguments of the Python functions turning them into torch dtypes instead of wrapping them round, chip
formats refused by name, and ONNX export of npu_dtype_cast with a code."""

import io

import onnx
import pytest
import torch

import custom_op_refs as ref
import torch_npu

ACL = {"float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7, "uint32": 8,
       "int64": 9, "uint64": 10, "float64": 11, "bool": 12, "string": 13, "complex64": 16, "complex128": 17,
       "bfloat16": 27, "int4": 29, "uint1": 30, "complex32": 33, "hifloat8": 34, "float8_e5m2": 35,
       "float8_e4m3fn": 36, "float8_e8m0fnu": 37, "float6_e3m2": 38, "float6_e2m3": 39, "float4_e2m1fn_x2": 40,
       "float4_e1m2fn_x2": 41}
CHIP_ONLY = ["int4", "float6_e3m2", "float6_e2m3", "float4_e1m2fn_x2"]  # hifloat8: test_hifloat8.py


@pytest.mark.parametrize("name", sorted(ACL))
def test_codes_are_acl_data_type_plus_256(name):
    assert getattr(torch_npu, name) == ACL[name] + 256
    assert getattr(torch_npu._C._cd.DType, name) == ACL[name] + 256
    assert type(getattr(torch_npu, name)) is int


def test_scalar_type_indices_name_torch_dtypes_in_c10_order():
    from torch_npu._dtypes import _SCALAR_TYPES, to_torch_dtype

    # The C++ side reads an index as c10::ScalarType: casting a meta tensor to index i gives c10's dtype i.
    checked = 0
    for index in range(len(_SCALAR_TYPES)):
        try:
            c10_dtype = torch.ops.npu.npu_dtype_cast(torch.empty(2, device="meta"), index).dtype
        except (RuntimeError, NotImplementedError):  # types a cast cannot produce (quantized, bits)
            continue
        assert to_torch_dtype(index) == c10_dtype, index
        checked += 1
    assert checked >= 20


def test_bool_code_does_not_shadow_the_builtin_for_torch_npu():
    assert torch_npu.bool == 268
    x = torch.tensor([1.0, 2.0]).npu()
    assert torch_npu.copy_memory_(torch.empty(2).npu(), x).cpu().tolist() == [1.0, 2.0]


@pytest.mark.parametrize("name, torch_dtype", [("float16", torch.float16), ("bfloat16", torch.bfloat16),
                                               ("int8", torch.int8), ("int32", torch.int32),
                                               ("float64", torch.float64), ("bool", torch.bool),
                                               ("float8_e4m3fn", torch.float8_e4m3fn),
                                               ("float8_e5m2", torch.float8_e5m2)])
def test_dtype_cast_takes_torch_npu_codes_and_torch_dtypes(name, torch_dtype):
    x = torch.randn(4, 6) * 20
    expected = x.to(torch_dtype)
    for dtype in (getattr(torch_npu, name), torch_dtype):
        got = torch_npu.npu_dtype_cast(x.npu(), dtype)
        assert got.dtype == torch_dtype
        assert torch.equal(got.cpu().float(), expected.float())
    assert torch.equal(x.npu().npu_dtype_cast(getattr(torch_npu, name)).cpu().float(), expected.float())


def test_dtype_cast_code_backward_and_meta():
    x = torch.randn(3, 5, requires_grad=True)
    xn = x.detach().npu().requires_grad_()
    (torch_npu.npu_dtype_cast(xn, torch_npu.float16).float() * 3).sum().backward()
    (x.half().float() * 3).sum().backward()
    assert xn.grad.dtype == torch.float32 and torch.equal(xn.grad.cpu(), x.grad)
    meta = torch.ops.npu.npu_dtype_cast(torch.empty(2, 3, device="meta"), torch_npu.bfloat16)
    assert meta.device.type == "meta" and meta.dtype == torch.bfloat16 and meta.shape == (2, 3)


def test_dtype_cast_backward_op_and_its_checks():
    grad = torch.randn(4, 3).half()
    got = torch_npu.npu_dtype_cast_backward(grad.npu(), torch.float32, grad_dtype=torch_npu.float16)
    assert got.dtype == torch.float32 and torch.equal(got.cpu(), grad.float())
    by_code = torch_npu.npu_dtype_cast_backward(grad.npu(), torch_npu.bfloat16)  # ScalarType argument, a code
    assert by_code.dtype == torch.bfloat16 and torch.equal(by_code.cpu(), grad.bfloat16())
    with pytest.raises(ValueError, match="grad_dtype says grad holds BFloat16, but grad is Half"):
        torch_npu.npu_dtype_cast_backward(grad.npu(), torch.float32, grad_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="reinterpretation of bytes has no gradient"):
        torch_npu.npu_dtype_cast_backward(grad.npu(), torch.float16, input_dtype=torch.bfloat16)
    meta = torch.ops.npu.npu_dtype_cast_backward(torch.empty(2, device="meta", dtype=torch.half), torch.float32)
    assert meta.device.type == "meta" and meta.dtype == torch.float32


def test_dtype_cast_to_an_integer_dtype_carries_no_gradient():
    x = torch.randn(5).npu().requires_grad_()
    y = torch_npu.npu_dtype_cast(x, torch_npu.int32)
    assert y.dtype == torch.int32 and not y.requires_grad
    assert torch.equal(y.cpu(), x.detach().cpu().int())


def test_dtype_cast_input_dtype_reinterprets_bytes():
    h = torch.randn(8).half()
    raw = h.view(torch.int16)
    got = torch_npu.npu_dtype_cast(raw.npu(), torch.float32, input_dtype=torch_npu.float16)
    assert torch.equal(got.cpu(), h.float())
    same = torch_npu.npu_dtype_cast(h.npu(), torch_npu.float32, input_dtype=torch.float16)
    assert torch.equal(same.cpu(), h.float())
    with pytest.raises(ValueError, match="input_dtype .* 4 bytes .* sizes must match"):
        torch_npu.npu_dtype_cast(raw.npu(), torch.float32, input_dtype=torch.float32)


@pytest.mark.parametrize("name", CHIP_ONLY)
def test_dtype_cast_refuses_chip_formats_by_name(name):
    x = torch.randn(4).npu()
    with pytest.raises(ValueError, match=f"dtype is torch_npu.{name}, a chip number format"):
        torch_npu.npu_dtype_cast(x, getattr(torch_npu, name))
    with pytest.raises(ValueError, match=f"input_dtype is torch_npu.{name}"):
        torch_npu.npu_dtype_cast(x, torch.float16, input_dtype=getattr(torch_npu, name))


def test_dtype_cast_refuses_codes_naming_no_dtype():
    with pytest.raises(ValueError, match="999 names no dtype"):
        torch_npu.npu_dtype_cast(torch.randn(2).npu(), 999)


def test_scalar_type_arguments_take_codes_instead_of_wrapping_round():
    # 257 (torch_npu.float16) would reach the kernel as ScalarType 1, torch.int8, without the conversion.
    t = torch_npu.empty_with_format((2, 3), dtype=torch_npu.float16, device="npu", acl_format=2)
    assert t.dtype == torch.float16
    bits = torch.tensor([0b10110010, 0b00001111], dtype=torch.uint8)
    expected = torch_npu.npu_sign_bits_unpack(bits.npu(), 1, torch.float16).cpu()
    got = torch_npu.npu_sign_bits_unpack(bits.npu(), 1, torch_npu.float16)
    assert got.dtype == torch.float16 and torch.equal(got.cpu(), expected)
    with pytest.raises(ValueError, match="empty_with_format: dtype: torch_npu.hifloat8 is a chip number format"):
        torch_npu.empty_with_format((2,), dtype=torch_npu.hifloat8, device="npu")


@pytest.mark.parametrize("code, dtype", [(torch_npu.float16, torch.float16), (torch_npu.bfloat16, torch.bfloat16),
                                         (torch_npu.int32, torch.int32)])
def test_quant_matmul_output_dtype_takes_codes(code, dtype):
    g = torch.Generator().manual_seed(3)
    x1 = torch.randint(-8, 8, (5, 32), generator=g, dtype=torch.int8).npu()
    x2 = torch.randint(-8, 8, (32, 16), generator=g, dtype=torch.int8).npu()
    scale = (torch.rand(16, generator=g) * 0.05).npu()
    by_code = torch_npu.npu_quant_matmul(x1, x2, scale, output_dtype=code)
    by_dtype = torch_npu.npu_quant_matmul(x1, x2, scale, output_dtype=dtype)
    assert by_code.dtype == dtype and torch.equal(by_code.cpu(), by_dtype.cpu())
    reference = ref.quant_matmul(x1.cpu(), x2.cpu(), scale.cpu(), output_dtype=dtype)
    torch.testing.assert_close(by_code.cpu().float(), reference.float(), rtol=1e-2, atol=1e-2)


def test_quant_matmul_chip_output_code_raises_by_name():
    x = torch.randint(-8, 8, (4, 16), dtype=torch.int8).npu()
    with pytest.raises(ValueError, match="output_dtype is torch_npu.hifloat8"):
        torch_npu.npu_quant_matmul(x, x.t().contiguous(), torch.ones(4).npu(), output_dtype=torch_npu.hifloat8)


def test_grouped_matmul_output_dtype_takes_codes():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(6, 8, generator=g).half()
    w = torch.randn(8, 5, generator=g).half()
    out = torch_npu.npu_grouped_matmul([x.npu()], [w.npu()], split_item=0, group_type=-1,
                                       output_dtype=torch_npu.float16)
    assert out[0].dtype == torch.float16
    torch.testing.assert_close(out[0].cpu().float(), (x.float() @ w.float()), rtol=2e-3, atol=2e-3)


def test_legacy_onnx_export_writes_the_element_type_of_a_code():
    class Cast(torch.nn.Module):
        def forward(self, t):
            return torch_npu.npu_dtype_cast(t, torch_npu.bfloat16)

    buffer = io.BytesIO()
    torch.onnx.export(Cast(), (torch.randn(3, 4).npu(),), buffer, dynamo=False, opset_version=11)
    model = onnx.load_from_string(buffer.getvalue())
    nodes = [n for n in model.graph.node if n.domain == "npu" and n.op_type == "npu_dtype_cast"]
    assert len(nodes) == 1
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute}
    assert attributes == {"dtype": onnx.TensorProto.BFLOAT16}
