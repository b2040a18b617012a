"""Reliability: injected device faults (NPU_SIM_FAULT), the stuck-task watchdog (NPU_SIM_TASK_TIMEOUT),
fork and multiprocessing, out-of-range device indices, and a bounded leak check of long runs."""

import ctypes
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import torch_npu


# --- fault injection: each case runs in a fresh interpreter, where the runtime reads NPU_SIM_FAULT


def test_task_fail_raises_at_the_sync_naming_op_stream_and_line_then_recovers(run_python):
    proc = run_python("""
        import torch, torch_npu
        a = torch.randn(16, 16)
        x = a.npu()
        ok = torch.mm(x, x)                      # the first mm passes (after=1)
        torch.npu.synchronize()
        bad = torch.mm(x, x)                     # LINE-OF-THE-FAILING-OP
        try:
            torch.npu.synchronize()
        except RuntimeError as e:
            print("ERROR:", e)
        else:
            raise SystemExit("no error")
        again = torch.mm(x, x)                   # count=1 is used up: the process is usable
        torch.testing.assert_close(again.cpu(), a @ a)
        torch.testing.assert_close(ok.cpu(), a @ a)
        print("status", torch.npu.get_device_status(0))
    """, env={"NPU_SIM_FAULT": "task_fail:op=mm:after=1"})
    message = proc.stdout
    # mm runs as the op library's aclnnMm; op=mm names it as users know it.
    assert re.search(r"aclnnMm failed on npu:0 stream #\d+: injected fault `task_fail:op=mm:after=1`", message), message
    assert "(launched from <string>:7)" in message, message
    assert "status ok" in message


def test_device_lost_is_sticky_on_that_device_and_reported_by_torch_npu(run_python):
    proc = run_python("""
        import torch, torch_npu
        a = torch.arange(6.)
        b = a.to("npu:1")
        y = b + b                                # the first add on npu:1 passes (after=1)
        torch.npu.synchronize(1)
        assert torch.npu.get_device_status(1) == "ok"
        z = y + y                                # the second loses the device
        for attempt in ("sync", "sync again", "new tensor"):
            try:
                if attempt == "new tensor":
                    torch.ones(3, device="npu:1").cpu()
                else:
                    torch.npu.synchronize(1)
            except RuntimeError as e:
                print(attempt, "->", str(e).splitlines()[0])
            else:
                raise SystemExit(attempt + ": no error")
        print("status", torch.npu.get_device_status(1), torch.npu.get_device_status(0))
        torch.testing.assert_close((a.to("npu:0") * 2).cpu(), a * 2)   # npu:0 is unaffected
    """, env={"NPU_SIM_FAULT": "device_lost:device=1:op=add:after=1"})
    out = proc.stdout
    assert re.search(r"sync -> .*aclnnAdd failed on npu:1 stream #\d+: npu:1 is lost", out), out
    assert re.search(r"sync again -> .*NRT_ERROR_DEVICE_LOST.*npu:1 is lost", out), out
    assert re.search(r"new tensor -> .*npu:1 is lost", out), out
    assert "status lost ok" in out


# The limit from the environment, or set at run time with torch_npu's op timeout (same line count).
@pytest.mark.parametrize("setup, env", [("", {"NPU_SIM_TASK_TIMEOUT": "0.5"}),
                                        ("torch.npu.set_op_timeout_ms(500)", {})],
                         ids=["NPU_SIM_TASK_TIMEOUT", "set_op_timeout_ms"])
def test_watchdog_turns_a_hang_into_an_error_naming_the_op_and_line(run_python, setup, env):
    proc = run_python(f"""
        import time, torch, torch_npu; {setup}
        x = torch.ones(8, 8, device="npu")
        y = torch.mm(x, x)                       # hangs
        start = time.monotonic()
        try:
            torch.npu.synchronize()
        except RuntimeError as e:
            print("ERROR:", e)
        print("waited", round(time.monotonic() - start, 1))
        s = torch.npu.Stream()                   # another stream still works
        with torch.npu.stream(s):
            z = (torch.ones(4, device="npu") + 1).cpu()
        print("other stream", z.tolist())
    """, env={"NPU_SIM_FAULT": "hang:op=mm", **env}, timeout=60)
    out = proc.stdout
    assert re.search(r"NRT_ERROR_TASK_TIMEOUT: aclnnMm on npu:0 stream #\d+ has been running for", out), out
    assert "task timeout 0.5 s" in out and "(launched from <string>:4)" in out, out
    assert float(re.search(r"waited ([\d.]+)", out).group(1)) < 20
    assert "other stream [2.0, 2.0, 2.0, 2.0]" in out


def test_watchdog_covers_event_and_stream_syncs_and_event_waits(run_python):
    proc = run_python("""
        import torch, torch_npu
        x = torch.ones(8, 8, device="npu")
        stuck, waiter = torch.npu.Stream(), torch.npu.Stream()
        event = torch.npu.Event()
        with torch.npu.stream(stuck):
            y = torch.mm(x, x)                   # hangs
            event.record()
        event.wait(waiter)                       # waiter now waits for the stuck stream
        with torch.npu.stream(waiter):
            z = x + 1
        for name, sync in [("event", event.synchronize), ("stream", stuck.synchronize),
                           ("waiter", waiter.synchronize), ("device", torch.npu.synchronize)]:
            try:
                sync()
            except RuntimeError as e:
                print(name, "->", str(e).replace("\\n", " "))
            else:
                print(name, "-> no error")
        print("query", event.query(), stuck.query())
        print("default stream", (torch.ones(3, device="npu") * 2).cpu().tolist())
    """, env={"NPU_SIM_FAULT": "hang:op=mm", "NPU_SIM_TASK_TIMEOUT": "0.3"}, timeout=60)
    out = proc.stdout
    stuck_op = r"aclnnMm on npu:0 stream #\d+ has been running for [\d.]+ s, longer than the task timeout 0.3 s"
    for name in ("event", "stream"):
        assert re.search(rf"{name} -> .*NRT_ERROR_TASK_TIMEOUT: {stuck_op}.*launched from <string>:7", out), out
    assert re.search(r"waiter -> .*NRT_ERROR_TASK_TIMEOUT: an event wait on npu:0 stream #\d+ has been running .*"
                     r"it waits for an event recorded on npu:0 stream #\d+, where aclnnMm has been running for "
                     r"[\d.]+ s \(launched from <string>:7\)", out), out
    assert re.search(r"device -> .*NRT_ERROR_TASK_TIMEOUT", out), out
    assert "query False False" in out and "default stream [2.0, 2.0, 2.0]" in out, out


def test_oom_and_memcpy_faults_raise_python_exceptions(run_python):
    proc = run_python("""
        import torch, torch_npu
        try:
            torch.empty(1 << 20, device="npu")
        except torch.OutOfMemoryError as e:
            print("OOM:", str(e).splitlines()[0])
        else:
            raise SystemExit("no OOM")
        x = torch.ones(1 << 20, device="npu")    # count=2 is used up
        try:
            x.cpu()
        except RuntimeError as e:
            print("COPY:", str(e).splitlines()[0])
        torch.testing.assert_close(x.cpu(), torch.ones(1 << 20))
    """, env={"NPU_SIM_FAULT": "oom:count=2;memcpy_fail:count=1"})
    out = proc.stdout
    assert "OOM:" in out and "injected fault `oom:count=2`" in out, out
    assert re.search(r"COPY: .*memcpy \(NRT_MEMCPY_DEVICE_TO_HOST, 4194304 bytes\) failed on npu:0 stream #", out), out


def test_malformed_fault_spec_fails_the_import(run_python):
    """A fault that cannot be injected as written must not let a resilience test pass untested."""
    for spec, message in (("task_fial:op=mm", "unknown fault `task_fial`"),
                          ("hang:op=aclnnMul:count=1", "hang takes no `count`")):
        proc = run_python("""
            import torch_npu
            print("imported")
        """, env={"NPU_SIM_FAULT": spec}, check=False)
        assert proc.returncode != 0 and "imported" not in proc.stdout, proc.stdout
        assert f'NPU_SIM_FAULT="{spec}" is malformed: ' in proc.stderr and message in proc.stderr, proc.stderr


def test_aten_op_names_match_the_device_ops_they_launch(run_python):
    """op=mul fires on the aclnnMuls that `x * 2` launches, op=linear on the matmul inside linear."""
    proc = run_python("""
        import torch, torch_npu
        x = torch.ones(4, device="npu")
        y = x * 2
        try:
            torch.npu.synchronize()
            raise SystemExit("op=mul did not fire")
        except RuntimeError as e:
            assert "aclnnMuls failed" in str(e) and "task_fail:op=mul" in str(e), str(e)
        w = torch.ones(3, 4, device="npu")
        out = torch.nn.functional.linear(x.view(1, 4), w)
        try:
            out.cpu()
            raise SystemExit("op=linear did not fire")
        except RuntimeError as e:
            assert "task_fail:op=linear" in str(e), str(e)
        print("done")
    """, env={"NPU_SIM_FAULT": "task_fail:op=mul;task_fail:op=linear"})
    assert "done" in proc.stdout
    assert "matched no task" not in proc.stderr


def test_faults_that_match_nothing_are_reported(run_python):
    proc = run_python("""
        import warnings
        import torch, torch_npu
        x = torch.ones(4, device="npu")
        y = x * 2
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.npu.synchronize()
            torch.npu.synchronize()  # each fault is reported once
        texts = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(texts) == 1 and "`task_fail:op=conv2d` matched no task" in texts[0], texts
        assert "aclnnMuls" in texts[0], texts  # the tasks that did run, to pick the right name
        print("done")
    """, env={"NPU_SIM_FAULT": "task_fail:op=conv2d", "NPU_SIM_FAULT_REPORT": "sync"})
    assert "done" in proc.stdout
    # At exit, whatever the flag: printed by the runtime.
    assert "npu runtime: NPU_SIM_FAULT fault `task_fail:op=conv2d` matched no task" in proc.stderr, proc.stderr


# --- fork and processes


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_reinitialises_and_uses_npu():
    a = torch.randn(64)
    parent = (a.npu() * 3).cpu()
    torch.npu.set_device(1)
    torch.npu.synchronize()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only os._exit leaves it, whatever happens
        code = 1
        try:
            os.close(r)
            assert torch.npu.current_device() == 1  # the forking thread's device stays selected
            s = torch.npu.Stream()
            with torch.npu.stream(s):
                out = (a.npu() * 3 + 1).cpu()
            torch.npu.synchronize()
            ok = torch.equal(out, a * 3 + 1) and torch.npu.memory_allocated(1) == 0
            os.write(w, b"ok" if ok else b"wrong")
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    reply = os.read(r, 16)
    os.close(r)
    torch.npu.set_device(0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and reply == b"ok", (status, reply)
    torch.testing.assert_close(parent, a * 3)
    torch.testing.assert_close((a.npu() * 2).cpu(), a * 2)  # the parent is unaffected


def test_dataloader_fork_workers_with_pin_memory(run_python):
    run_python("""
        import torch, torch_npu
        from torch.utils.data import DataLoader, TensorDataset
        w = torch.randn(8, 4).npu()              # the device is in use before the workers fork
        data = TensorDataset(torch.arange(64.).reshape(16, 4), torch.arange(16))
        loader = DataLoader(data, batch_size=4, num_workers=2, pin_memory=True,
                            multiprocessing_context="fork")
        total = torch.zeros((), device="npu")
        for epoch in range(2):
            for x, y in loader:
                assert x.is_pinned() and y.is_pinned()
                total += x.to("npu", non_blocking=True).sum()
        assert total.item() == 2 * torch.arange(64.).sum().item(), total
    """, timeout=120)


def test_multiprocessing_spawn_with_npu_tensor_arguments(tmp_path):
    # spawn pickles `work` by reference, so it must live in a file, not in `python -c`.
    script = tmp_path / "spawn_npu.py"
    script.write_text(textwrap.dedent("""
        import torch, torch_npu
        import torch.multiprocessing as mp

        def work(rank, t, q):
            q.put(((t * 2).cpu().tolist(), t.device.type, t.device.index))  # plain data: the child exits

        if __name__ == "__main__":
            t = torch.arange(5., device="npu:1")
            q = mp.get_context("spawn").SimpleQueue()
            mp.spawn(work, args=(t, q), nprocs=1)
            out, kind, index = q.get()
            assert (kind, index) == ("npu", 1), (kind, index)
            assert out == (torch.arange(5.) * 2).tolist(), out
            print("spawned ok")
    """))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_SIM_") and k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "spawned ok" in proc.stdout, proc.stdout + proc.stderr


# --- device indices name what was written


@pytest.mark.parametrize("call", [
    lambda: torch.npu.set_device(999),
    lambda: torch.npu.set_device("npu:999"),
    lambda: torch.npu.Stream(device=999),
    lambda: torch.npu.synchronize(999),
    lambda: torch.npu.memory_allocated(999),
    lambda: torch.npu.get_device_properties("npu:999"),
    lambda: torch.npu.device(999).__enter__(),
    lambda: torch.npu.get_device_status(999),
    lambda: torch_npu._C._set_device(999),
    lambda: torch.randn(2).npu("npu:999"),
    lambda: torch.randn(2).npu(999),
    lambda: torch.randn(2).npu(device="npu:999"),
    lambda: torch.randn(2).to("npu:999"),
    lambda: torch.randn(2).to(999),
    lambda: torch.randn(2).to(device="npu:999", dtype=torch.float16),
    lambda: torch.ones(2, device="npu").to("npu:999"),
    lambda: torch.nn.Linear(2, 2).to("npu:999"),
    lambda: torch.nn.Linear(2, 2).npu(999),
    lambda: torch.UntypedStorage(4).npu(999),
])
def test_out_of_range_index_names_what_was_written(call):
    n = torch.npu.device_count()
    with pytest.raises(RuntimeError, match=rf"npu:999 does not exist: {n} devices? (is|are) configured .*\[0, {n}\)"):
        call()
    assert torch.npu.current_device() == 0


@pytest.mark.parametrize("make", [
    lambda: torch.empty(1, device="npu:999"),
    lambda: torch.empty(1, device=torch.device("npu", 999)),
    lambda: torch.zeros(2).to(torch.device("npu", 999)),
])
def test_index_wrapped_by_torch_device_is_explained(make):
    # A torch.device (made by the caller) keeps 8 bits: 999 arrives as -25; the message names the candidates.
    with pytest.raises(RuntimeError, match=r"npu:231, npu:487, npu:743, npu:999, \.\.\.\) wrapped around to -25"):
        make()


@pytest.mark.parametrize("index", [128, 256, 257])
def test_index_that_torch_device_would_wrap_into_range_is_refused(index):
    # 256 wraps to 0 and 257 to 1: without the check the tensor would silently land on another device.
    n = torch.npu.device_count()
    for call in (lambda: torch.ones(2).npu(index), lambda: torch.ones(2).to(f"npu:{index}"),
                 lambda: torch.ones(2).to(index)):
        with pytest.raises(RuntimeError, match=rf"npu:{index} does not exist: .*\[0, {n}\)"):
            call()


def test_npu_method_keeps_pytorch_semantics():
    x = torch.arange(4.0)
    assert x.npu().device == torch.device("npu", torch.npu.current_device())
    assert x.npu(1).device == torch.device("npu:1") and x.npu("npu:1").device == torch.device("npu:1")
    assert x.npu(torch.device("npu", 1)).device.index == 1
    y = x.npu(0)
    assert y.npu(0) is y and y.to("npu:0") is y
    torch.testing.assert_close(x.npu(1, non_blocking=True).cpu(), x)
    assert torch.nn.Linear(2, 2).npu(1).weight.device == torch.device("npu:1")
    with pytest.raises(RuntimeError, match="must not be negative"):
        x.npu(-1)
    with pytest.raises(RuntimeError, match="must be an npu device"):
        x.npu("cpu")


def test_in_range_but_missing_index():
    n = torch.npu.device_count()
    with pytest.raises(RuntimeError, match=rf"npu:{n} does not exist: {n} devices? (is|are) configured"):
        torch.empty(1, device=f"npu:{n}")
    with pytest.raises(RuntimeError, match=rf"npu:{n} does not exist"):
        torch.npu.set_device(n)


# --- long runs, bounded (bench/long_runs.py measures 10k steps and 100k cycles)


def _threads() -> int:
    """Threads of the process once idle OpenMP teams are gone: a stream worker releases its team
    after 2 ms without work, and this thread's own team is released here."""
    torch.npu.synchronize()
    ctypes.CDLL(None).omp_pause_resource_all(1)
    time.sleep(0.02)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def test_training_and_stream_event_cycles_do_not_leak():
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).npu()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x, y = torch.randn(16, 32, device="npu"), torch.randint(0, 4, (16,), device="npu")

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(20):
        step()
    torch.npu.synchronize()
    allocated, reserved, threads = torch.npu.memory_allocated(), torch.npu.memory_reserved(), _threads()
    for _ in range(200):
        step()
    torch.npu.synchronize()
    assert (torch.npu.memory_allocated(), torch.npu.memory_reserved()) == (allocated, reserved)
    assert _threads() == threads

    rt = ctypes.CDLL(os.path.join(os.path.dirname(torch_npu.__file__), "lib", "libnpu_runtime.so"))
    stream, event = ctypes.c_void_p(), ctypes.c_void_p()
    free0, free1, total = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_size_t()
    assert rt.nrtMemGetInfo(ctypes.byref(free0), ctypes.byref(total)) == 0
    for _ in range(2000):
        assert rt.nrtStreamCreate(ctypes.byref(stream)) == 0
        assert rt.nrtEventCreate(ctypes.byref(event)) == 0
        assert rt.nrtEventRecord(event, stream) == 0
        assert rt.nrtEventDestroy(event) == 0
        assert rt.nrtStreamDestroy(stream) == 0
        e = torch.npu.Event()
        e.record()
    torch.npu.synchronize()
    assert rt.nrtMemGetInfo(ctypes.byref(free1), ctypes.byref(total)) == 0
    assert free1.value == free0.value
    assert _threads() == threads
