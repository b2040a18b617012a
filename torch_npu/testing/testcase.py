"""TestCase and run_tests() for npu-vs-CPU operator tests, with torch_npu's comparison semantics.

Importing this module touches no device: test launchers import it before choosing devices.
"""

import os
import random
import re
import sys
import unittest
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import contextmanager
from numbers import Number

import expecttest
import numpy as np
import torch

from torch_npu.testing.common_utils import is_iterable, iter_indices, set_npu_device

# dtypes assertRtolEqual compares; anything else (complex aside) is a test error, as in torch_npu.
_RTOL_DTYPES = (np.bool_, np.uint16, np.int16, np.int32, np.float16, np.float32, np.int8, np.uint8,
                np.int64, np.float64)
# Added to the denominator of the relative error so that zeros compare.
_RTOL_FLOOR = {np.dtype(np.float16): 6e-8}
_RTOL_FLOOR_DEFAULT = 1e-9


def run_tests():
    """Run the calling module's tests (`python test_xxx.py [unittest options]`)."""
    unittest.main(argv=sys.argv)


def _as_numpy(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().resolve_conj().resolve_neg().numpy()
    return np.asarray(x)


class TestCase(expecttest.TestCase):
    """unittest.TestCase with the assertions torch_npu's operator tests use.

    * `assertRtolEqual(x, y, prec=1e-4, prec16=1e-3)`: the element-count tolerance of torch_npu.
    * `assertEqual(x, y, prec=None, message='')`: max absolute difference <= prec (default
      `self.precision`, 1e-5) for tensors on any device, numbers, and nested sequences / dicts.
    * Each test starts from the seed in `SEED` (default 666) for torch, numpy's and Python's RNGs.
    """

    _precision = 1e-5
    maxDiff = None
    exact_dtype = False

    @property
    def precision(self):
        return self._precision

    @precision.setter
    def precision(self, prec):
        self._precision = prec

    @classmethod
    def setUpClass(cls):
        cls.npu_device = set_npu_device()

    def setUp(self):
        seed = int(os.getenv("SEED", "666"))
        torch.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed)

    # ------------------------------------------------------------------------------------------
    # assertRtolEqual
    # ------------------------------------------------------------------------------------------

    def assertRtolEqual(self, x, y, prec=1.0e-4, prec16=1.0e-3, auto_trans_dtype=False, message=None):
        """Assert x ≈ y as torch_npu's tests mean it.

        Element i is within tolerance *absolutely* if |x-y| <= prec and *relatively* if
        |x-y| / (max(|x|,|y|) + tiny) <= prec (`prec16` for float16; bfloat16 tensors use
        torch.allclose with rtol = atol = prec16). The assertion passes when every element is within
        one of the two, or when at most `numel * prec` elements miss either. Shapes and dtypes must
        match (`auto_trans_dtype=True` casts x to y's dtype first); NaNs must sit at the same
        positions. Accepts tensors on any device, numpy arrays, numbers and sequences of them.
        """
        prefix = f"{message}: " if message else ""
        if isinstance(x, Sequence) and isinstance(y, Sequence) and not isinstance(x, str):
            self.assertEqual(len(x), len(y), f"{prefix}sequence lengths differ")
            for i, (x_, y_) in enumerate(zip(x, y)):
                self.assertRtolEqual(x_, y_, prec, prec16, auto_trans_dtype,
                                     f"{message or 'item'} [{i}]")
            return
        if isinstance(x, torch.Tensor) and isinstance(y, Sequence):
            y = torch.as_tensor(y, dtype=x.dtype)
        elif isinstance(y, torch.Tensor) and isinstance(x, Sequence):
            x = torch.as_tensor(x, dtype=y.dtype)
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if auto_trans_dtype:
                x = x.to(y.dtype)
            if x.dtype == torch.bfloat16 and y.dtype == torch.bfloat16:
                if x.shape != y.shape:
                    self.fail(f"{prefix}shape error: {tuple(x.shape)} vs {tuple(y.shape)}")
                xc, yc = x.detach().cpu(), y.detach().cpu()
                if not torch.allclose(xc, yc, rtol=prec16, atol=prec16, equal_nan=True):
                    worst = (xc.float() - yc.float()).abs().nan_to_num(0).max().item()
                    self.fail(f"{prefix}result error: bfloat16 values differ by up to {worst} "
                              f"(rtol = atol = {prec16})")
                return
        a, b = _as_numpy(x), _as_numpy(y)
        if a.shape != b.shape:
            self.fail(f"{prefix}shape error: {a.shape} vs {b.shape}")
        if a.dtype != b.dtype:
            self.fail(f"{prefix}dtype error: {a.dtype} vs {b.dtype}")
        if np.iscomplexobj(a):  # compared as (real, imag) pairs
            a, b = np.stack([a.real, a.imag], -1), np.stack([b.real, b.imag], -1)
        elif a.dtype.type not in _RTOL_DTYPES:
            self.fail(f"{prefix}dtype error: assertRtolEqual compares bool, integer, float16, float32 "
                      f"and float64 data, got {a.dtype}")
        if a.dtype == np.bool_:
            mismatched = int(np.count_nonzero(a != b))
            if mismatched:
                self.fail(f"{prefix}result error: {mismatched} of {a.size} bool elements differ")
            return
        tol = prec16 if a.dtype == np.float16 else prec
        self._compare_with_tolerance(a, b, tol, _RTOL_FLOOR.get(a.dtype, _RTOL_FLOOR_DEFAULT), prefix)

    def _compare_with_tolerance(self, a, b, tol, floor, prefix):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        nan_a, nan_b = np.isnan(a64), np.isnan(b64)
        if not np.array_equal(nan_a, nan_b):
            self.fail(f"{prefix}result error: NaN at different positions "
                      f"({int(nan_a.sum())} vs {int(nan_b.sum())} NaNs)")
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            same = (a64 == b64) | nan_a  # equal infinities and matching NaNs differ by 0
            diff = np.where(same, 0.0, np.abs(a64 - b64))
            rel = diff / (np.maximum(np.abs(a64), np.abs(b64)) + floor)
        abs_bad = ~(diff <= tol)
        rel_bad = ~(np.where(same, 0.0, rel) <= tol)
        if not abs_bad.any() or not rel_bad.any():
            return
        n_abs, n_rel = int(abs_bad.sum()), int(rel_bad.sum())
        allowed = a.size * tol
        if n_abs > allowed and n_rel > allowed:
            idx = np.unravel_index(int(np.argmax(np.where(abs_bad, diff, -1.0))), a.shape) if a.ndim else ()
            self.fail(f"{prefix}result error: of {a.size} elements, {n_abs} differ by more than {tol} and "
                      f"{n_rel} by more than {tol} relative (at most {allowed:g} may); largest difference "
                      f"at index {tuple(int(i) for i in idx)}: {a64[idx]} vs {b64[idx]}")

    # ------------------------------------------------------------------------------------------
    # assertEqual / assertNotEqual with a precision
    # ------------------------------------------------------------------------------------------

    def assertEqual(self, x, y, prec=None, message="", allow_inf=False, exact_dtype=None, msg=None,
                    **kwargs):
        """Equality within an absolute `prec` (default `self.precision`) for tensors (any devices),
        numbers, numpy scalars, strings, sets, dicts and nested sequences of them. `atol`/`rtol`
        (PyTorch's spelling) are accepted too: prec = atol, or rtol * max|y| when only rtol is given."""
        if msg is not None and not message:
            message = msg
        if isinstance(prec, str) and not message:
            message, prec = prec, None
        if prec is None and ("atol" in kwargs or "rtol" in kwargs):
            atol, rtol = kwargs.pop("atol", None), kwargs.pop("rtol", None)
            prec = atol if atol is not None else 0.0
            if rtol:
                prec += rtol * _max_abs(y)
        kwargs.pop("equal_nan", None)
        if kwargs:
            raise TypeError(f"assertEqual got unexpected arguments {sorted(kwargs)}")
        if prec is None:
            prec = self.precision
        if exact_dtype is None:
            exact_dtype = self.exact_dtype
        self._assert_equal(x, y, prec, message, allow_inf, exact_dtype)

    def _assert_equal(self, x, y, prec, message, allow_inf, exact_dtype):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            self._assert_tensors_equal(x, y, prec, message, allow_inf, exact_dtype)
        elif isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            t, other = (x, y) if isinstance(x, torch.Tensor) else (y, x)
            if isinstance(other, (Number, np.number, np.bool_)) and t.numel() == 1:
                self._assert_numbers_equal(t.item(), other, prec, message, allow_inf)
                return
            try:
                other = torch.as_tensor(np.asarray(other) if isinstance(other, np.ndarray) else other)
            except (TypeError, ValueError, RuntimeError):
                super().assertEqual(x, y, message or None)
                return
            if other.dim() == 0 and t.dim() > 0:
                other = other.expand(t.shape)
            pair = (t, other) if t is x else (other, t)
            self._assert_tensors_equal(pair[0], pair[1], prec, message, allow_inf, False)
        elif isinstance(x, (Number, np.number, np.bool_)) or isinstance(y, (Number, np.number, np.bool_)):
            self._assert_numbers_equal(x, y, prec, message, allow_inf)
        elif isinstance(x, (str, bytes)) or isinstance(y, (str, bytes)):
            super().assertEqual(x, y, message or None)
        elif isinstance(x, (set, frozenset)) or isinstance(y, (set, frozenset)):
            super().assertEqual(x, y, message or None)
        elif isinstance(x, dict) and isinstance(y, dict):
            if isinstance(x, OrderedDict) and isinstance(y, OrderedDict):
                self._assert_equal(list(x.items()), list(y.items()), prec, message, allow_inf,
                                   exact_dtype)
            else:
                super().assertEqual(set(x), set(y), message or None)
                for k in x:
                    self._assert_equal(x[k], y[k], prec, message, allow_inf, exact_dtype)
        elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            self._assert_tensors_equal(torch.as_tensor(np.asarray(x)), torch.as_tensor(np.asarray(y)),
                                       prec, message, allow_inf, exact_dtype)
        elif is_iterable(x) and is_iterable(y):
            x, y = list(x), list(y)
            super().assertEqual(len(x), len(y), message or None)
            for x_, y_ in zip(x, y):
                self._assert_equal(x_, y_, prec, message, allow_inf, exact_dtype)
        else:
            super().assertEqual(x, y, message or None)

    def _assert_numbers_equal(self, x, y, prec, message, allow_inf):
        if isinstance(x, torch.Tensor):
            x = x.item()
        if isinstance(y, torch.Tensor):
            y = y.item()
        if isinstance(x, (bool, np.bool_)) or isinstance(y, (bool, np.bool_)):
            super().assertEqual(bool(x), bool(y), message or None)
            return
        if not isinstance(x, (Number, np.number)) or not isinstance(y, (Number, np.number)):
            super().assertEqual(x, y, message or None)
            return
        if np.isnan(x) or np.isnan(y):
            self.assertTrue(np.isnan(x) and np.isnan(y), message or f"{x} != {y}")
            return
        if abs(x) == float("inf") or abs(y) == float("inf"):
            if not allow_inf:
                self.fail(f"{message + ': ' if message else ''}expected finite values, got {x} and {y}")
            super().assertEqual(x, y, message or None)
            return
        self.assertLessEqual(abs(x - y), prec, message or f"{x} != {y} (prec={prec})")

    def _assert_tensors_equal(self, x, y, prec, message, allow_inf, exact_dtype):
        prefix = f"{message}: " if message else ""
        self.assertEqual(tuple(x.shape), tuple(y.shape), f"{prefix}shapes differ")
        if exact_dtype:
            super().assertEqual(x.dtype, y.dtype, f"{prefix}dtypes differ")
        if x.numel() == 0:
            return
        if x.is_sparse:
            x = x.to_dense()
        if y.is_sparse:
            y = y.to_dense()
        a = x.detach().cpu().resolve_conj().resolve_neg()
        b = y.detach().cpu().resolve_conj().resolve_neg()
        if a.dtype == torch.bool or b.dtype == torch.bool:
            if a.dtype != b.dtype:
                raise TypeError(f"{prefix}expected both tensors to be bool, got {a.dtype} and {b.dtype}")
            a, b = a.int(), b.int()
        calc = torch.promote_types(a.dtype, b.dtype)
        if calc in (torch.float16, torch.bfloat16) or not (calc.is_floating_point or calc.is_complex):
            calc = torch.float64 if not calc.is_complex else calc
        a, b = a.to(calc), b.to(calc)
        diff = (a - b).abs()
        if calc.is_floating_point or calc.is_complex:
            nan_a = torch.isnan(a)
            self.assertTrue(torch.equal(nan_a, torch.isnan(b)), f"{prefix}NaN positions differ")
            same = (a == b) | nan_a
            if not allow_inf:
                inf_mismatch = (torch.isinf(a) | torch.isinf(b)) & ~same
                self.assertFalse(bool(inf_mismatch.any()), f"{prefix}infinities differ")
            diff = torch.where(same, torch.zeros_like(diff), diff)
        max_err = diff.max().item()
        self.assertLessEqual(max_err, prec, f"{prefix}tensors differ by up to {max_err} (prec={prec})")

    def assertNotEqual(self, x, y, prec=None, message=""):
        if isinstance(prec, str) and not message:
            message, prec = prec, None
        if prec is None:
            prec = self.precision
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape:
                return
            a = x.detach().cpu().double() if not x.is_complex() else x.detach().cpu()
            b = y.detach().cpu().to(a.dtype)
            if not torch.equal(torch.isnan(a), torch.isnan(b)):
                return
            diff = torch.nan_to_num((a - b).abs(), nan=0.0)
            self.assertGreaterEqual(diff.max().item() if diff.numel() else 0.0, prec, message or None)
        elif isinstance(x, (Number, np.number)) and isinstance(y, (Number, np.number)):
            self.assertGreaterEqual(abs(x - y), prec, message or None)
        else:
            super().assertNotEqual(x, y, message or None)

    def assertAlmostEqual(self, x, y, places=None, msg=None, delta=None, allow_inf=None):
        prec = delta if delta is not None else (10 ** (-places) if places else None)
        self.assertEqual(x, y, prec, msg or "", bool(allow_inf))

    def assertTensorsSlowEqual(self, x, y, prec=None, message=""):
        """Max absolute difference of two same-shape tensors <= prec (default self.precision)."""
        self.assertEqual(tuple(x.size()), tuple(y.size()), message or None)
        prec = self.precision if prec is None else prec
        a = x.detach().cpu().double()
        b = y.detach().cpu().double()
        max_err = max((abs(a[i] - b[i]).item() for i in iter_indices(a)), default=0.0) if a.dim() \
            else abs(a - b).item()
        self.assertLessEqual(max_err, prec, message or None)

    # ------------------------------------------------------------------------------------------
    # warnings and misc
    # ------------------------------------------------------------------------------------------

    def assertObjectIn(self, obj, iterable):
        if not any(obj is elem for elem in iterable):
            raise AssertionError("object not found in iterable")

    def assertExpectedRaises(self, exc_type, call_fn, *args, **kwargs):
        subname = kwargs.pop("subname", None)
        try:
            call_fn(*args, **kwargs)
        except exc_type as e:
            self.assertExpected(str(e), subname)
            return
        self.fail("Did not raise when expected to")

    def assertNotWarn(self, call_fn, msg=""):
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            call_fn()
        self.assertTrue(len(ws) == 0, msg or f"unexpected warnings: {[str(w.message) for w in ws]}")

    def assertWarnsRegex(self, *args, **kwargs):
        """Both spellings: unittest's `assertWarnsRegex(category, regex)` (context manager or with a
        callable) and torch_npu's `assertWarnsRegex(call_fn, regex, msg='')`."""
        if args and callable(args[0]) and not (isinstance(args[0], type) and issubclass(args[0], Warning)):
            call_fn, regex = args[0], args[1]
            msg = args[2] if len(args) > 2 else kwargs.get("msg", "")
            with warnings.catch_warnings(record=True) as ws:
                warnings.simplefilter("always")
                call_fn()
            self.assertTrue(any(re.search(regex, str(w.message)) for w in ws),
                            msg or f"no warning matching {regex!r}")
            return None
        return super().assertWarnsRegex(*args, **kwargs)

    @contextmanager
    def maybeWarnsRegex(self, category, regex=""):
        """Code that may warn with `category` matching `regex`; any other warning fails the test."""
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", message=regex, category=category)
            yield
        if ws:
            self.fail("Caught unexpected warnings:\n" + "\n".join(
                warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line) for w in ws))

    def assertExpectedStripMangled(self, s, subname=None):
        self.assertExpected(re.sub(r"__torch__[^ ]+", "", s), subname)


def _max_abs(y):
    if isinstance(y, torch.Tensor):
        return y.detach().abs().max().item() if y.numel() else 0.0
    try:
        return float(np.max(np.abs(np.asarray(y, dtype=np.float64))))
    except (TypeError, ValueError):
        return 0.0
