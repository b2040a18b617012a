"""Test generation decorators: @Dtypes / @Formats on a test method, @instantiate_tests on its class.

    @instantiate_tests
    class TestAdd(TestCase):
        @Dtypes(torch.float, torch.half)
        @Formats(0, 2)
        def test_add(self, device, dtype, npu_format): ...

makes test_add_float32_0, test_add_float32_2, test_add_float16_0, ... each called with
device="npu" (when the method takes `device`) and one combination of the listed values.
"""

import functools
import inspect
import itertools
import logging
import os

import torch


class Dtypes:
    """The torch dtypes a test runs with (passed to its argument whose name contains "dtype")."""

    def __init__(self, *dtypes):
        if not dtypes:
            raise RuntimeError("No dtypes given")
        if not all(isinstance(d, torch.dtype) for d in dtypes):
            raise RuntimeError(f"Unknown dtype in {dtypes}")
        self.args = dtypes

    def __call__(self, fn):
        fn.dtypes = self.args
        return fn


class Formats:
    """The npu formats a test runs with (passed to its argument whose name contains "format")."""

    def __init__(self, *formats):
        if not formats:
            raise RuntimeError("No formats given")
        self.args = formats

    def __call__(self, fn):
        fn.formats = self.args
        return fn


def _bind(func, name, kwargs):
    @functools.wraps(func)
    def test(self):
        return func(self, **kwargs)

    test.__name__ = name
    test.__qualname__ = name
    return test


def _argument_for(key, arg_names, test_name):
    """The test's argument that receives `key` ("dtype" / "format"): the one whose name contains it."""
    matches = [a for a in arg_names if key in a]
    if len(matches) != 1:
        raise RuntimeError(f"{test_name}: expected exactly one argument whose name contains {key!r} "
                           f"to receive the @{key.capitalize()}s values, found {matches or 'none'}")
    return matches[0]


def _suffix(key, value):
    return str(value).split(".")[-1] if key == "dtype" else str(value)


def instantiate_tests(cls=None, **_kwargs):
    """Replace each @Dtypes / @Formats method of `cls` by one test per combination of values."""

    def expand(cls):
        for name, func in list(cls.__dict__.items()):
            axes = {}
            if hasattr(func, "dtypes"):
                axes["dtype"] = func.dtypes
            if hasattr(func, "formats"):
                axes["format"] = func.formats
            if not axes:
                continue
            arg_names = inspect.getfullargspec(func).args
            targets = {key: _argument_for(key, arg_names, name) for key in axes}
            base = {"device": "npu"} if "device" in arg_names else {}
            for values in itertools.product(*axes.values()):
                kwargs = dict(base)
                test_name = name
                for key, value in zip(axes, values):
                    kwargs[targets[key]] = value
                    test_name += "_" + _suffix(key, value)
                setattr(cls, test_name, _bind(func, test_name, kwargs))
            delattr(cls, name)
        return cls

    return expand if cls is None else expand(cls)


def graph_mode(func):
    """Kept for tests written for graph mode: the test runs in eager mode (graph mode is
    torch.compile's job here). With GRAPH_MODE_TEST=1 the run is logged."""

    @functools.wraps(func)
    def run(*args, **kwargs):
        if os.getenv("GRAPH_MODE_TEST") == "1":
            logging.getLogger(__name__).info("running %s (eager; graph mode is torch.compile)",
                                             func.__name__)
        return func(*args, **kwargs)

    return run
