"""Direct kernel launch (route 3): examples/cpp_extension built as a wheel with `python setup.py
bdist_wheel`, torch.ops.npu.my_add forward and backward against the CPU (dtypes, block splits with
ragged tails, torch.compile), the example's own test, and kernel errors surfacing at the next sync
(a load_inline extension whose kernel checks its input).
"""

import os
import re
import subprocess
import sys

import pytest
import torch

import torch_npu  # noqa: F401

import extension_builds


@pytest.fixture(scope="session")
def wheel_site():
    return extension_builds.kernel_launch_wheel()


@pytest.fixture(scope="session")
def my_add(wheel_site):
    if wheel_site not in sys.path:
        sys.path.insert(0, wheel_site)
    import op_extension

    return op_extension.my_add


@pytest.fixture(scope="session")
def kernel_checks():
    extension_builds.kernel_checks_extension()
    return torch.ops.kernel_checks


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
@pytest.mark.parametrize("numel", [1, 5, 8, 9, 1001, 8 * 2048])  # blockDim 1..8, ragged tails
def test_my_add_matches_cpu(my_add, dtype, numel):
    if dtype.is_floating_point:
        x, y = torch.randn(numel).to(dtype), torch.randn(numel).to(dtype)
    else:
        x, y = torch.randint(-1000, 1000, (numel,), dtype=dtype), torch.randint(-1000, 1000, (numel,), dtype=dtype)
    out = torch.ops.npu.my_add(x.npu(), y.npu())
    assert out.device.type == "npu" and out.dtype == dtype
    torch.testing.assert_close(out.cpu(), x + y, rtol=0, atol=0)


def test_my_add_non_contiguous_and_empty(my_add):
    x = torch.randn(6, 4)
    torch.testing.assert_close(my_add(x.npu().t(), x.npu().t()).cpu(), x.t() + x.t())
    assert my_add(torch.empty(0, 3).npu(), torch.empty(0, 3).npu()).shape == (0, 3)


def test_my_add_backward_and_compile(my_add):
    x, y = torch.randn(3, 40), torch.randn(3, 40)
    xn, yn = x.npu().requires_grad_(), y.npu().requires_grad_()
    out = my_add(xn, yn)
    (out * torch.arange(40.0).npu()).sum().backward()
    torch.testing.assert_close(out.detach().cpu(), x + y)
    torch.testing.assert_close(xn.grad.cpu(), torch.arange(40.0).expand(3, 40))
    torch.testing.assert_close(yn.grad.cpu(), torch.arange(40.0).expand(3, 40))

    # Meta gives the shapes under torch.compile; forward and backward through AOTAutograd.
    xn.grad = yn.grad = None
    f = torch.compile(lambda a, b: torch.ops.npu.my_add(a, b).relu() * 2, backend="aot_eager", fullgraph=True)
    res = f(xn, yn)
    res.sum().backward()
    torch.testing.assert_close(res.detach().cpu(), (x + y).relu() * 2)
    torch.testing.assert_close(xn.grad.cpu(), ((x + y) > 0).float() * 2)
    meta = torch.ops.npu.my_add(torch.empty(2, 3, device="meta"), torch.empty(2, 3, device="meta"))
    assert meta.device.type == "meta" and meta.shape == (2, 3)


def test_my_add_errors(my_add):
    with pytest.raises(ValueError, match=r"my_add: x and y must have the same shape \(no broadcasting\), got \[2\] and \[3\]"):
        my_add(torch.ones(2).npu(), torch.ones(3).npu())
    with pytest.raises(ValueError, match="my_add: dtype Double is not supported"):
        my_add(torch.ones(2, dtype=torch.float64).npu(), torch.ones(2, dtype=torch.float64).npu())
    with pytest.raises(ValueError, match=r"my_add: x and y must be npu tensors, got npu:0 and cpu"):
        my_add(torch.ones(2).npu(), torch.ones(2))
    with pytest.raises(NotImplementedError, match="Could not run 'npu::my_add' with arguments from the 'CPU' backend"):
        my_add(torch.ones(2), torch.ones(2))


def test_launches_are_counted_and_stream_ordered(my_add):
    torch.npu.op_stats(reset=True)
    s = torch.npu.Stream()
    a = torch.randn(1 << 16).npu()
    with torch.npu.stream(s):
        b = a * 2  # queued on s, then my_add on s reads it
        c = my_add(b, b)
    s.synchronize()
    torch.testing.assert_close(c.cpu(), a.cpu() * 4)
    assert torch.npu.op_stats()["add_custom"]["device_op"] == 1


def test_example_test_script(wheel_site):
    """The example's own test (as seed 002 runs it: `python test/test.py`)."""
    env = dict(os.environ, PYTHONPATH=wheel_site)
    script = os.path.join(extension_builds.EXAMPLES, "cpp_extension", "test", "test.py")
    proc = subprocess.run([sys.executable, script], env=env, cwd=wheel_site, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Ran 1 test" in proc.stderr, proc.stdout + proc.stderr


def test_failing_kernel_check_surfaces_at_the_next_sync(kernel_checks):
    x = torch.zeros(4096)
    x[3000] = 7.0
    out = kernel_checks.double_checked(x.npu(), 5.0)  # returns at once: the kernel runs on the stream
    line = sys._getframe().f_lineno - 1
    with pytest.raises(RuntimeError) as err:
        torch.npu.synchronize()
    message = str(err.value)
    assert "kernel checked_double failed in block 5 of 8: ascendc_assert(v <= limit) failed at " in message, message
    assert "element 3000 is 7, above the limit 5" in message, message
    assert f"(launched from {__file__}:{line})" in message, message
    # The device stays usable; a good launch computes.
    good = kernel_checks.double_checked(torch.arange(10.0).npu(), 100.0)
    torch.testing.assert_close(good.cpu(), torch.arange(10.0) * 2)
    del out


def test_kernel_error_is_raised_at_the_launch_with_launch_blocking(run_python, kernel_checks):
    library = extension_builds.kernel_checks_extension()
    proc = run_python(
        f"""
        import torch, torch_npu
        torch.ops.load_library({library!r})
        try:
            torch.ops.kernel_checks.double_checked(torch.full((16,), 9.0).npu(), 1.0)
        except RuntimeError as e:
            print("raised at launch:", e)
        """,
        env={"ASCEND_LAUNCH_BLOCKING": "1"},
    )
    assert "raised at launch: " in proc.stdout and "kernel checked_double failed in block 0 of 8: " in proc.stdout, proc.stdout + proc.stderr


def test_launched_kernels_are_named_for_injected_faults_and_the_watchdog(run_python, kernel_checks):
    library = extension_builds.kernel_checks_extension()
    proc = run_python(
        f"""
        import torch, torch_npu
        torch.ops.load_library({library!r})
        x = torch.ones(64).npu()
        for attempt in ("fail", "hang"):
            out = torch.ops.kernel_checks.double_checked(x, 10.0)
            try:
                torch.npu.synchronize()
            except RuntimeError as e:
                print(attempt, "->", str(e).replace("\\n", " "))
        with torch.npu.stream(torch.npu.Stream()):  # the default stream stays stuck; others work
            print("other ops", (x + 1).sum().item())
        """,
        env={"NPU_SIM_FAULT": "task_fail:op=checked_double;hang:op=checked_double:after=1",
             "NPU_SIM_TASK_TIMEOUT": "0.3"},
    )
    out = proc.stdout
    assert re.search(r"fail -> .*kernel checked_double failed on npu:0 stream #\d+: injected fault "
                     r"`task_fail:op=checked_double` \(NPU_SIM_FAULT\) \(launched from <string>:6\)", out), out
    assert re.search(r"hang -> .*NRT_ERROR_TASK_TIMEOUT: kernel checked_double on npu:0 stream #\d+ has been "
                     r"running for .*\(launched from <string>:6\)", out), out
    assert "other ops 128.0" in out, out


def test_exec_npu_cmd_of_a_missing_op_names_the_symbols(kernel_checks):
    with pytest.raises(RuntimeError, match="aclnnNoSuchOp is not a built-in op and no custom op package provides it: "
                                           "looked for the symbols aclnnNoSuchOpGetWorkspaceSize and aclnnNoSuchOp"):
        kernel_checks.missing_op(torch.ones(2).npu())
