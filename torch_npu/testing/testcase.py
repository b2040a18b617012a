"""TestCase with assertRtolEqual, and run_tests(), for npu-vs-CPU operator tests."""

import unittest

import numpy as np
import torch


def _to_numpy(x):
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    return np.asarray(x)


class TestCase(unittest.TestCase):
    """unittest.TestCase plus the comparison helpers that npu operator tests use."""

    def assertRtolEqual(self, x, y, prec=1.0e-4, prec16=1.0e-3, message=None):
        """Assert x ≈ y elementwise: |x - y| <= prec * max(1, |x|, |y|) (prec16 for half dtypes).

        Accepts tensors (any device) or numpy arrays; shapes must match, NaN and inf positions too;
        integer and bool data must match exactly.
        """
        half = any(
            (isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16))
            or (isinstance(v, np.ndarray) and v.dtype == np.float16)
            for v in (x, y)
        )
        a, b = _to_numpy(x), _to_numpy(y)
        if np.iscomplexobj(a) or np.iscomplexobj(b):  # compare real and imaginary parts
            a = np.stack([np.real(a), np.imag(a)], axis=-1)
            b = np.stack([np.real(b), np.imag(b)], axis=-1)
        prefix = f"{message}: " if message else ""
        self.assertEqual(a.shape, b.shape, f"{prefix}shape mismatch {a.shape} vs {b.shape}")
        if a.dtype.kind in "biu" and b.dtype.kind in "biu":
            mismatched = int(np.sum(a != b))
            self.assertEqual(mismatched, 0, f"{prefix}{mismatched} of {a.size} elements differ")
            return
        tol = prec16 if half else prec
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        nan_a, nan_b = np.isnan(a64), np.isnan(b64)
        self.assertTrue(np.array_equal(nan_a, nan_b), f"{prefix}NaN positions differ")
        inf_a, inf_b = np.isinf(a64), np.isinf(b64)
        self.assertTrue(np.array_equal(a64[inf_a | inf_b], b64[inf_a | inf_b]),
                        f"{prefix}infinite values differ")
        finite = ~(nan_a | inf_a)
        diff = np.abs(a64[finite] - b64[finite])
        bound = tol * np.maximum(1.0, np.maximum(np.abs(a64[finite]), np.abs(b64[finite])))
        bad = diff > bound
        if bad.any():
            worst = int(np.argmax(diff - bound))
            self.fail(f"{prefix}{int(bad.sum())} of {a.size} elements differ beyond prec={tol}; "
                      f"largest excess: {a64[finite][worst]} vs {b64[finite][worst]}")

    def assertTensorsSlowEqual(self, x, y, prec=None, message=None):
        self.assertRtolEqual(x, y, prec if prec is not None else 1.0e-4, message=message)


def run_tests():
    """Run the calling module's tests (as `python test_xxx.py`)."""
    unittest.main()
