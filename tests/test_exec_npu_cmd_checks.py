"""EXEC_NPU_CMD checks its arguments against the op's parameters instead of crashing inside the op.

Every device op knows its parameters' kinds and names (built-in ops from their GetWorkspaceSize,
custom packages from their op_api/include headers). A C++ extension that passes an int where the op
takes an aclScalar*, or the wrong number of arguments, gets a RuntimeError naming the op and the
argument. Each case runs in a child process: before the check, these calls crashed the process.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import extension_builds


@pytest.fixture(scope="module")
def library():
    return extension_builds.kernel_checks_extension()


_EXPECT_ERROR = """
def expect_error(fn, *parts):
    try:
        fn()
    except RuntimeError as e:
        text = str(e)
        assert all(p in text for p in parts), text
        print("raised:", text.splitlines()[0])
    else:
        raise AssertionError("no error; expected " + repr(parts))
"""


def run_child(code, library, opp_path=None):
    env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_CUSTOM_OPP_PATH", "NPU_SIM_FALLBACK")}
    if opp_path is not None:
        env["ASCEND_CUSTOM_OPP_PATH"] = opp_path
    prelude = f"import torch, torch_npu\ntorch.ops.load_library({library!r})\nk = torch.ops.kernel_checks\n"
    proc = subprocess.run([sys.executable, "-c", prelude + _EXPECT_ERROR + textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc




def test_a_number_where_the_op_takes_a_scalar_raises(library):
    proc = run_child("""
        a, b = torch.randn(5).npu(), torch.randn(5).npu()
        expect_error(lambda: k.add_int_alpha(a, b), "aclnnAdd argument 3 (alpha) expects a scalar, got an int32",
                     "at::Scalar")
        expect_error(lambda: k.muls_double(a), "aclnnMuls argument 2 (other) expects a scalar, got a double")
        # The process and the device are fine afterwards; a correct call works.
        torch.testing.assert_close(k.add_scalar_alpha(a, b).cpu(), (a + 2 * b).cpu())
        print("done")
    """, library)
    assert "done" in proc.stdout


def test_a_wrong_argument_count_raises(library):
    proc = run_child("""
        a, b = torch.randn(5).npu(), torch.randn(5).npu()
        expect_error(lambda: k.add_without_alpha(a, b), "aclnnAdd takes 4 arguments (self, other, alpha, out), got 3")
        print("done")
    """, library)
    assert "done" in proc.stdout


def test_integer_literals_reach_int64_parameters_intact(library):
    """An int literal where the op takes int64_t is widened: dim=-1 means the last dim, not 4294967295."""
    proc = run_child("""
        x = torch.randn(3, 7)
        torch.testing.assert_close(k.softmax_int_dim(x.npu()).cpu(), torch.softmax(x, -1))
        print("done")
    """, library)
    assert "done" in proc.stdout


def test_custom_package_ops_are_checked_from_their_headers(library):
    opp_root = extension_builds.add_custom_package()
    proc = run_child("""
        entry = [n for n in torch_npu._C._device_ops() if n == "aclnnAddCustom"]
        assert entry, "the package's op is not registered"
        x = torch.randn(4).npu()
        expect_error(lambda: k.custom_add_extra(x), "aclnnAddCustom takes 3 arguments (x, y, out), got 4")
        print("done")
    """, library, opp_path=opp_root)
    assert "done" in proc.stdout
