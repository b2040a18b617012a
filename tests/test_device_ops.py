"""Elementwise ops that run as named device ops (opslib: aclnnAdd, aclnnMul, ...), npu vs CPU."""

import numpy as np
import pytest
import torch

from torch_npu.testing.common_utils import create_common_tensor
from torch_npu.testing.testcase import TestCase

DTYPES = [np.float32, np.float16, np.float64, np.int64, np.int32]
SHAPES = [[5, 256], [2, 3, 4], [7], []]

BINARY = {
    "add": lambda a, b: torch.add(a, b, alpha=2),
    "sub": lambda a, b: torch.sub(a, b),
    "mul": torch.mul,
    "div": torch.div,
}
UNARY = {
    "relu": torch.relu,
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "sqrt": torch.sqrt,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def _pair(dtype, shape, lo=1, hi=100):
    return create_common_tensor([dtype, 0, shape], lo, hi)


class TestBinaryDeviceOps(TestCase):
    def check(self, fn, cpu_args, npu_args):
        cpu_out = fn(*cpu_args)
        npu_out = fn(*npu_args)
        self.assertEqual(npu_out.device.type, "npu")
        self.assertEqual(npu_out.dtype, cpu_out.dtype)
        self.assertRtolEqual(cpu_out, npu_out.cpu())

    def test_dtypes_and_shapes(self):
        for name, fn in BINARY.items():
            for dtype in DTYPES:
                for shape in SHAPES:
                    ca, na = _pair(dtype, shape)
                    cb, nb = _pair(dtype, shape)
                    with self.subTest(op=name, dtype=dtype, shape=shape):
                        self.check(fn, (ca, cb), (na, nb))

    def test_bfloat16(self):
        ca, na = _pair(np.float32, [4, 8])
        cb, nb = _pair(np.float32, [4, 8])
        for name, fn in BINARY.items():
            cpu = fn(ca.bfloat16(), cb.bfloat16())
            npu = fn(na.bfloat16(), nb.bfloat16())
            self.assertEqual(npu.dtype, torch.bfloat16)
            self.assertRtolEqual(cpu.float(), npu.cpu().float(), prec=1e-2)

    def test_broadcast_scalars_and_mixed_dtypes(self):
        ca, na = _pair(np.float32, [3, 1, 5])
        cb, nb = _pair(np.int64, [4, 1])
        for fn in BINARY.values():
            self.check(fn, (ca, cb), (na, nb))
            self.check(fn, (ca, 2.5), (na, 2.5))      # CPU scalar (wrapped number)
            self.check(fn, (cb, 3), (nb, 3))
            c0, n0 = _pair(np.float32, [])
            self.check(fn, (ca, c0), (na, n0))         # 0-d device tensor

    def test_non_contiguous_inputs(self):
        ca, na = _pair(np.float32, [6, 8])
        cb, nb = _pair(np.float32, [8, 6])
        for fn in BINARY.values():
            self.check(fn, (ca[:, ::2], cb.t()[:, 1::2]), (na[:, ::2], nb.t()[:, 1::2]))

    def test_empty(self):
        ca, na = _pair(np.float32, [0, 3])
        for fn in BINARY.values():
            self.check(fn, (ca, ca), (na, na))

    def test_bool(self):
        a = torch.tensor([True, False, True, False])
        b = torch.tensor([True, True, False, False])
        for fn in (torch.add, torch.mul):
            self.assertTrue(torch.equal(fn(a.npu(), b.npu()).cpu(), fn(a, b)))

    def test_in_place_and_out(self):
        for name in ("add", "sub", "mul", "div"):
            ca, na = _pair(np.float32, [4, 5])
            cb, nb = _pair(np.float32, [5])
            getattr(ca, name + "_")(cb)
            getattr(na, name + "_")(nb)
            self.assertRtolEqual(ca, na.cpu())
            cpu_out = torch.empty(0)
            npu_out = torch.empty(0, device="npu")        # resized like on CPU
            getattr(torch, name)(ca, cb, out=cpu_out)
            getattr(torch, name)(na, nb, out=npu_out)
            self.assertEqual(npu_out.shape, cpu_out.shape)
            self.assertRtolEqual(cpu_out, npu_out.cpu())

    def test_out_into_non_contiguous_view(self):
        ca, na = _pair(np.float32, [4, 6])
        cb, nb = _pair(np.float32, [4, 3])
        cpu_dst, npu_dst = torch.zeros(4, 6), torch.zeros(4, 6, device="npu")
        torch.mul(ca[:, ::2], cb, out=cpu_dst[:, 1::2])
        torch.mul(na[:, ::2], nb, out=npu_dst[:, 1::2])
        self.assertRtolEqual(cpu_dst, npu_dst.cpu())

    def test_errors_match_cpu(self):
        a, b = torch.tensor([True, False]), torch.tensor([False, True])
        with self.assertRaisesRegex(RuntimeError, "Subtraction"):
            torch.sub(a.npu(), b.npu())
        i = torch.tensor([1, 2])
        with self.assertRaisesRegex(RuntimeError, "alpha"):
            torch.add(i.npu(), i.npu(), alpha=0.5)
        with self.assertRaisesRegex(RuntimeError, "can't be cast"):
            torch.div(i.npu(), i.npu(), out=torch.empty(2, dtype=torch.long, device="npu"))
        with self.assertRaisesRegex(RuntimeError, "same device"):
            torch.add(torch.ones(3, device="npu"), torch.ones(3))
        with self.assertRaisesRegex(RuntimeError, "same device"):
            torch.add(torch.ones(3, device="npu:0"), torch.ones(3, device="npu:1"))

    def test_integer_division_is_true_division(self):
        a, b = torch.tensor([7, -7, 9]), torch.tensor([2, 2, 4])
        self.assertRtolEqual(torch.div(a, b), torch.div(a.npu(), b.npu()).cpu())


class TestUnaryDeviceOps(TestCase):
    def test_dtypes(self):
        for name, fn in UNARY.items():
            for dtype in (np.float32, np.float16, np.float64, np.int64, np.int32):
                if name == "sqrt":
                    ca, na = _pair(dtype, [5, 33], 0, 50)
                else:
                    ca, na = _pair(dtype, [5, 33], -50, 50)
                    if name == "exp":
                        ca, na = _pair(dtype, [5, 33], -5, 5)
                with self.subTest(op=name, dtype=dtype):
                    cpu, npu = fn(ca), fn(na)
                    self.assertEqual(npu.dtype, cpu.dtype)
                    self.assertRtolEqual(cpu, npu.cpu())

    def test_non_contiguous_in_place_and_out(self):
        ca, na = _pair(np.float32, [6, 8], -3, 3)
        for name, fn in UNARY.items():
            if name == "sqrt":
                continue
            self.assertRtolEqual(fn(ca.t()), fn(na.t()).cpu())
            c, n = ca.clone(), na.clone()
            getattr(c, name + "_")()
            getattr(n, name + "_")()
            self.assertRtolEqual(c, n.cpu())

    def test_bool_and_errors_like_cpu(self):
        b = torch.tensor([True, False])
        with self.assertRaises(RuntimeError):
            torch.neg(b.npu())
        with self.assertRaisesRegex(NotImplementedError, "Bool"):
            torch.abs(b)  # the CPU refuses it too
        with self.assertRaisesRegex(RuntimeError, "Bool"):  # raised by the task, at the next sync
            torch.abs(b.npu())
            torch.npu.synchronize()
        self.assertTrue(torch.equal(torch.relu(torch.tensor([-1, 2])), torch.relu(torch.tensor([-1, 2]).npu()).cpu()))


def test_device_ops_are_counted_and_run_in_strict_mode(run_python):
    proc = run_python(
        """
        import warnings, torch
        x = torch.randn(4, 4).npu()
        torch.npu.op_stats(reset=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = torch.relu(x * 2 + 1)
            z = torch.cumsum(x, 0)
            torch.npu.synchronize()
        stats = torch.npu.op_stats()
        for name in ("aclnnMuls", "aclnnAdds", "aclnnRelu"):  # Python numbers: the scalar forms
            assert stats[name]["device_op"] >= 1, (name, stats)
        msgs = [str(m.message) for m in w if "is not supported on npu" in str(m.message)]
        assert any("aten::cumsum" in m for m in msgs), msgs
        assert not any("aten::add" in m or "aten::mul" in m or "relu" in m for m in msgs), msgs
        ref = torch.relu(x.cpu() * 2 + 1)
        assert torch.allclose(y.cpu(), ref)
        print("OK")
        """,
        env={"NPU_SIM_STRICT": "1"},
    )
    assert proc.stdout.strip().endswith("OK")


def test_device_op_error_names_op_and_launch_line(run_python):
    # An unregistered device op is reported by name with where packages come from.
    proc = run_python(
        """
        import torch, torch_npu
        from torch_npu import _C
        assert "aclnnAdd" in _C._device_ops()
        assert "aclnnNoSuchOp" not in _C._device_ops()
        print("OK")
        """
    )
    assert proc.stdout.strip().endswith("OK")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_cast_copy_between_dtypes(dtype):
    src = torch.randn(5, 7) * 10
    npu = src.npu().t()
    out = npu.to(dtype)
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu(), src.t().to(dtype))
