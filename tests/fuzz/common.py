"""What every fuzz target shares: hypothesis settings, interesting values, the clear-error check."""

import math
import re

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis import seed as _seed

HUGE_INTS = [2**31 - 1, 2**31, 2**40, 2**62, 2**63 - 1]
NEGATIVE_INTS = [-1, -2, -(2**31), -(2**63)]
SMALL_INTS = [0, 1, 2, 3, 7]
ODD_FLOATS = [math.nan, math.inf, -math.inf, -0.0, 1e308, -1e-308, 0.5]

ints = st.sampled_from(SMALL_INTS + NEGATIVE_INTS + HUGE_INTS) | st.integers(-8, 64)
floats = st.sampled_from(ODD_FLOATS) | st.floats(-1e3, 1e3, allow_nan=False)

# Exception types a user may get for bad input (torch.OutOfMemoryError, torch.AcceleratorError and
# linalg errors derive from RuntimeError).
CLEAR_TYPES = (RuntimeError, ValueError, TypeError, IndexError, OverflowError, NotImplementedError)
# Text that shows an error escaped from the implementation instead of being reported.
UNCLEAR_MARKS = ("INTERNAL ASSERT FAILED", "please report a bug", "std::", "basic_string",
                 "bad_alloc", "vector::_M", "unordered_map::at", "Unknown error",
                 "Exception raised from", "nrtError", "error return without exception set")
_NEGATIVE_DEVICE = re.compile(r"npu:(-\d+)")


def unclear(exc: BaseException, given: str = "") -> str | None:
    """None if `exc` is a clear user-facing error, else why it is not. `given` is the repr of the
    case's arguments: a negative device index in the message must be one the user wrote, not an
    index that wrapped around (999 reported as npu:-25)."""
    if isinstance(exc, AssertionError) and "not compiled with CUDA" in str(exc):
        return None  # PyTorch's own answer to a cuda device in a CPU build: clear enough
    if not isinstance(exc, CLEAR_TYPES):
        return f"unexpected exception type {type(exc).__name__}"
    message = str(exc).split("\nException raised from")[0]
    if len(message.strip()) < 12:
        return f"message too short: {message!r}"
    for mark in UNCLEAR_MARKS:
        if mark.lower() in message.lower():
            return f"message contains {mark!r}"
    for index in _NEGATIVE_DEVICE.findall(message):
        if index not in given:
            return f"message names device npu:{index}, which the caller did not write"
    return None


def hypothesis_settings(examples: int, seed: int | None):
    """Fixed-size runs without a database; failures are collected, never raised (no shrinking)."""
    s = settings(max_examples=examples, deadline=None, database=None, derandomize=seed is None,
                 suppress_health_check=list(HealthCheck), phases=["generate"])

    def apply(test):
        test = s(test)
        return _seed(seed)(test) if seed is not None else test

    return apply
