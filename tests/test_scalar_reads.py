"""Device values read as host scalars inside op calls: the read must finish, not hang, in every launch mode.

A 0-d npu tensor passed where an op takes a Scalar, a float or an int is read by PyTorch's argument
parser while it holds the GIL, often before the queued work that computes it has run. The stream
worker that runs that work must never need the GIL (csrc/framework/DeferredRelease.h), and the
read's wait lets go of it (csrc/core/NPUBlockingWait.h). Each case runs in a child with a time limit,
under the three launch modes, without a profiler and under both profilers, and compares with CPU.
"""

import pytest

# Runs every case three times (no profiler, torch.profiler, torch_npu.profiler) and prints "ok <case>".
_CHILD = r'''
import faulthandler, math, operator, sys
faulthandler.dump_traceback_later(__TIMEOUT__, exit=True)  # a hang prints every thread's stack
import torch
import torch_npu

def pending(dev, value):
    """A 0-d tensor equal to `value` that is still being computed when it is returned: it depends
    on some milliseconds of queued work, which starts with generic-executor ops (x.dot)."""
    big = torch.ones(384, 384, device=dev) / 384
    for _ in range(3):
        big = big @ big
    x = torch.ones(64, device=dev)
    return (big.sum() * 0 + x.dot(x) - 64) + torch.tensor(value, device=dev)  # exactly value

def both(fn):
    """fn(dev) on npu and on CPU; their results must agree."""
    a, b = fn("npu"), fn("cpu")
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-4, atol=1e-4)
    else:
        assert a == b or abs(a - b) < 1e-4, (a, b)

def base(dev):
    return torch.arange(6, dtype=torch.float32, device=dev) - 2.5

def lbfgs(dev):
    torch.manual_seed(0)
    A, b = torch.randn(12, 6).to(dev), torch.randn(12).to(dev)
    w = torch.zeros(6, device=dev, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1, max_iter=10)
    def closure():
        opt.zero_grad()
        loss = ((A @ w - b) ** 2).sum()
        loss.backward()
        return loss
    for _ in range(2):
        opt.step(closure)
    return w.detach()

def control_flow(dev):
    t = pending(dev, 3.0)
    n = 0
    while t > 0:  # bool(t) per iteration
        t = t - 1
        n += 1
    if pending(dev, 0.0):
        n += 100
    return n

CASES = {
    "add_ alpha": lambda d: base(d).add_(base(d), alpha=pending(d, 0.5)),
    "add alpha": lambda d: base(d).add(base(d), alpha=pending(d, -2.0)),
    "sub alpha": lambda d: torch.sub(base(d), base(d) * 3, alpha=pending(d, 0.25)),
    "addcmul_ value": lambda d: base(d).addcmul_(base(d), base(d), value=pending(d, 0.5)),
    "addcdiv value": lambda d: base(d).addcdiv(base(d), base(d) + 10, value=pending(d, 2.0)),
    "threshold scalars": lambda d: torch.threshold(base(d), pending(d, 0.1), pending(d, -7.0)),
    "leaky_relu slope": lambda d: torch._C._nn.leaky_relu(base(d), pending(d, 0.2)),
    "full fill value": lambda d: torch.full((3,), pending(d, 1.5), device=d),
    "new_full": lambda d: base(d).new_full((2, 2), pending(d, -1.0)),
    "float arg (hardtanh)": lambda d: torch.nn.functional.hardtanh(base(d), min_val=pending(d, -1.0)),
    "arange end": lambda d: torch.arange(pending(d, 5.0).long(), device=d),
    "view size": lambda d: base(d).view(pending(d, 2.0).long(), 3),
    "ones size": lambda d: torch.ones(pending(d, 4.0).long(), device=d),
    "narrow length": lambda d: base(d).narrow(0, 1, pending(d, 3.0).long()),
    "slice by tensor": lambda d: base(d)[: pending(d, 4.0).long()],
    "float()": lambda d: float(pending(d, 2.5)),
    "int()": lambda d: int(pending(d, 7.0)),
    "bool() and while": control_flow,
    "operator.index": lambda d: operator.index(pending(d, 3.0).long()),
    "math.floor": lambda d: math.floor(pending(d, 3.7)),
    "format": lambda d: float(f"{pending(d, 1.25):.2f}"),
    "tolist": lambda d: sum((pending(d, 1.0) * torch.ones(3, device=d)).tolist()),
    "range(n)": lambda d: len(range(pending(d, 4.0).long())),
    "LBFGS": lbfgs,
}

def run_all(label):
    for name, fn in CASES.items():
        both(fn)
        print(f"ok {label}: {name}", flush=True)

run_all("plain")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                        torch.profiler.ProfilerActivity.PrivateUse1]):
    run_all("torch.profiler")
with torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.CPU,
                                            torch_npu.profiler.ProfilerActivity.NPU]):
    run_all("torch_npu.profiler")
print("done", flush=True)
'''

_MODES = {
    "queued": {},
    "TASK_QUEUE_ENABLE=0": {"TASK_QUEUE_ENABLE": "0"},
    "ASCEND_LAUNCH_BLOCKING=1": {"ASCEND_LAUNCH_BLOCKING": "1"},
}


@pytest.mark.parametrize("mode", list(_MODES))
def test_device_values_read_as_host_scalars(run_python, mode):
    timeout = 150
    proc = run_python(_CHILD.replace("__TIMEOUT__", str(timeout - 20)), env=_MODES[mode], check=False,
                      timeout=timeout)
    assert proc.returncode == 0 and "done" in proc.stdout, (
        f"child exited with {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-6000:]}")
    assert proc.stdout.count("ok ") == 3 * 24


# With a switch interval of 1000 s, the main thread keeps the GIL while it polls in pure Python. The
# queued work (generic ops whose outputs Python sees, collectives whose Work Python dropped) must
# still finish: no stream worker may wait for the GIL.
_NO_GIL_ON_WORKERS = r'''
import faulthandler, socket, sys, time
faulthandler.dump_traceback_later(60, exit=True)
import torch
import torch.distributed as dist
import torch_npu

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
dist.init_process_group("hccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
x = torch.ones(1000, device="npu")
outs = []
for _ in range(50):
    outs.append(x.dot(x))      # generic executor: its outputs are Python's
    t = x * 2
    dist.all_reduce(t)         # the Work is dropped here: the comm stream's task holds the last one
    outs.append(t)
stream = torch.npu.current_stream()
sys.setswitchinterval(1000.0)
deadline = time.monotonic() + 20
while not stream.query():     # never releases the GIL
    if time.monotonic() > deadline:
        sys.setswitchinterval(0.005)
        print("queued work did not finish while the GIL was held", flush=True)
        sys.exit(3)
sys.setswitchinterval(0.005)
assert all(float(o) == 1000.0 for o in outs[0::2]) and all(bool((o == 2).all()) for o in outs[1::2])
dist.destroy_process_group()
print("done", flush=True)
'''


def test_stream_workers_never_wait_for_the_gil(run_python):
    proc = run_python(_NO_GIL_ON_WORKERS, check=False, timeout=90)
    assert proc.returncode == 0 and "done" in proc.stdout, (
        f"child exited with {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-6000:]}")


def test_kept_alive_objects_are_released_off_the_workers(run_python):
    """Collectives' Work objects go through the release thread, and are all released by a drain."""
    proc = run_python(r'''
        import socket
        import torch, torch.distributed as dist, torch_npu
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
        dist.init_process_group("hccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
        before = torch_npu._C._release_counts()
        t = torch.ones(8, device="npu")
        for _ in range(10):
            dist.all_reduce(t)
        torch.npu.synchronize()
        torch_npu._C._drain_releases()
        handed, released = torch_npu._C._release_counts()
        assert handed - before[0] >= 10 and released == handed, (before, handed, released)
        assert bool((t == 1).all())
        dist.destroy_process_group()
        print("done")
    ''', timeout=90)
    assert "done" in proc.stdout
