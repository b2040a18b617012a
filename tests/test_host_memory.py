"""The software NPU's device memory is host memory: running out of it raises OutOfMemoryError.

Eight devices of 16 GB are promised on a smaller host. Allocations the host cannot back, and copies to
the host that would need more fresh pages than it has left, must raise torch.OutOfMemoryError naming
the host's and the device's limits, not get the process killed. Each case runs in a child process
with a time limit (a kill shows up as a negative return code).
"""

_LIMITED = r'''
import torch, torch_npu
MiB = 1 << 20
n = 700 * MiB // 4
x = torch.ones(n, device="npu:0")            # 700 MiB, touched
y = x.to("npu:1")                            # 700 MiB more: fits
try:
    x.to("npu:2")
    raise SystemExit("a third 700 MiB device copy fitted in a 2 GiB host")
except torch.OutOfMemoryError as e:
    text = str(e)
    assert "host can back only" in text and "NPU_SIM_HOST_MEMORY limit 2.00 GiB" in text, text
    assert "npu:2 has" in text and "capacity free" in text, text
try:
    y.cpu()
    raise SystemExit("a 700 MiB copy to the host fitted")
except torch.OutOfMemoryError as e:
    text = str(e)
    assert "NPU to host copy out of memory" in text and "(of 2.00 GiB)" in text, text
free, total = torch.npu.mem_get_info(1)
assert free < 700 * MiB, (free, total)      # mem_get_info tells what the host can still back
del x
torch.npu.empty_cache()
z = y.to("npu:2")                             # room again
assert bool((z == 1).all())
print("done")
'''


def test_host_limit_raises_out_of_memory(run_python):
    proc = run_python(_LIMITED, env={"NPU_SIM_HOST_MEMORY": "2G", "NPU_SIM_HOST_RESERVE": "0"}, check=False,
                      timeout=120)
    assert proc.returncode == 0 and "done" in proc.stdout, (
        f"child exited with {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-4000:]}")


# The scenario of upstream's test_ipc_event.py::test_d2d_copy3 on the real host's readings: a tensor on
# npu:0 copied to npu:1, then to npu:2 and to the CPU, where the host has room for only two copies.
# NPU_SIM_HOST_RESERVE keeps all but 3 GiB of what the host has available out of reach, so that the
# case takes seconds, not the minute that filling this machine's memory would.
_REAL_HOST = r'''
import torch, torch_npu
n = (1200 << 20) // 4
x = torch.ones(n, device="npu:0")
y = x.to("npu:1")
for what in ("npu:2", "cpu"):
    try:
        x.to(what)
        raise SystemExit(f"a third copy of 1200 MiB ({what}) fitted")
    except torch.OutOfMemoryError as e:
        assert "host" in str(e), str(e)
print("done")
'''


def _available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable in /proc/meminfo")


def test_overcommitted_host_raises_instead_of_being_killed(run_python):
    reserve = _available() - (3 << 30)
    assert reserve > 0, "this test needs 3 GiB of available host memory"
    proc = run_python(_REAL_HOST, env={"NPU_SIM_HOST_RESERVE": str(reserve)}, check=False, timeout=120)
    assert proc.returncode == 0 and "done" in proc.stdout, (
        f"child exited with {proc.returncode} (negative: killed by a signal)\n--- stdout\n{proc.stdout}\n"
        f"--- stderr\n{proc.stderr[-4000:]}")
