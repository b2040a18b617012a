"""Per-tensor accuracy metrics of an NPU result against a benchmark, and the verdict rule."""

import math
from typing import Dict, Optional

import numpy as np

YES, NO, UNMATCHED = "Yes", "No", "Unmatched"
_REL_EPS = 1e-7  # relative errors divide by max(|bench|, this)


def compare_arrays(npu: np.ndarray, bench: np.ndarray) -> Dict[str, object]:
    """Cosine, MaxAbsErr, MaxRelativeErr, One / Five Thousandth(s) Err Ratio and the verdict.

    Non-finite values must match (same positions, same infinities); the metrics then cover the
    finite values. Equal shapes are the caller's business."""
    a = np.abs(npu) if npu.dtype.kind == "c" else npu
    b = np.abs(bench) if bench.dtype.kind == "c" else bench
    a = a.astype(np.float64, copy=False).ravel()
    b = b.astype(np.float64, copy=False).ravel()
    result: Dict[str, object] = {"cosine": None, "max_abs": None, "max_rel": None, "thousandth": None,
                                 "five_thousandths": None, "message": ""}
    if a.size == 0:
        result["verdict"] = YES
        result["message"] = "empty tensors"
        return result
    fa, fb = np.isfinite(a), np.isfinite(b)
    nonfinite_differs = bool(np.any(fa != fb)) or bool(np.any(~fa & ~fb & ~((a == b) | (np.isnan(a) & np.isnan(b)))))
    if not fa.all() or not fb.all():
        keep = fa & fb
        a, b = a[keep], b[keep]
    if a.size:
        diff = np.abs(a - b)
        rel = diff / np.maximum(np.abs(b), _REL_EPS)
        na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
        if na == 0.0 and nb == 0.0:
            cosine = 1.0
        elif na == 0.0 or nb == 0.0:
            cosine = 0.0
        else:
            cosine = float(np.dot(a / na, b / nb))
        result.update(cosine=cosine, max_abs=float(diff.max()), max_rel=float(rel.max()),
                      thousandth=float(np.mean(rel <= 0.001)), five_thousandths=float(np.mean(rel <= 0.005)))
    result["verdict"] = verdict(result["cosine"], result["max_abs"], nonfinite_differs)
    if nonfinite_differs:
        result["message"] = "inf/nan where the benchmark has none (or the reverse)"
    return result


def verdict(cosine: Optional[float], max_abs: Optional[float], nonfinite_differs: bool) -> str:
    """No when cosine < 0.99 with max abs err > 0.001, or cosine < 0.9, or max abs err > 1, or
    inf/nan appear on one side only."""
    if nonfinite_differs:
        return NO
    if cosine is None or max_abs is None:
        return YES
    if math.isnan(cosine) or (cosine < 0.99 and max_abs > 0.001) or cosine < 0.9 or max_abs > 1:
        return NO
    return YES


def compare_stats(npu: Dict[str, float], bench: Dict[str, float]) -> Dict[str, object]:
    """Verdict from statistics alone (statistics-mode dumps): No when the nan / inf counts differ,
    or max, min or L2 norm differ by more than 0.001 relative (or absolute, below 1)."""
    result: Dict[str, object] = {"cosine": None, "max_abs": None, "max_rel": None, "thousandth": None,
                                 "five_thousandths": None, "message": "statistics only"}
    if not npu or not bench:
        result["verdict"] = YES
        return result
    bad = npu.get("nan", 0) != bench.get("nan", 0) or npu.get("inf", 0) != bench.get("inf", 0)
    for key in ("max", "min", "norm"):
        x, y = npu.get(key, 0.0), bench.get(key, 0.0)
        if math.isnan(x) and math.isnan(y):
            continue
        if math.isnan(x) != math.isnan(y) or abs(x - y) > 0.001 * max(abs(y), 1.0):
            bad = True
    result["verdict"] = NO if bad else YES
    return result
