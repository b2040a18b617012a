"""Where a small op's launch goes: instructions per `a + b` (16 elements) by stage, npu and CPU eager,
counted with valgrind's callgrind, and the totals of `a * b` and `torch.relu(a)` on both. Instruction counts repeat to within a percent on a loaded machine,
where times move by tens of percent, so they are what launch-path changes are judged by.

Run alone: .venv/bin/python bench/launch_profile.py
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

OPS = 2000
WARMUP = 300

# The measured loop; the warm-up uses sub (another binding function), so only the measured op counts.
_CHILD = r"""
import torch, torch_npu, sys
dev = sys.argv[1]
a, b = torch.randn(16, device=dev), torch.randn(16, device=dev)
for _ in range({warmup}):
    a - b
for _ in range({ops}):
    {expr}
if dev == "npu":
    torch.npu.synchronize()
"""

# The other small ops the launch target covers: (name, expression, binding function), totals only.
_OTHER_OPS = [
    ("a * b", "a * b", "torch::autograd::THPVariable_mul("),
    ("torch.relu(a)", "torch.relu(a)", "torch::autograd::THPVariable_relu("),
]

# (stage, function-name prefixes whose inclusive counts make it up), inside the npu add kernel.
_STAGES = [
    ("output allocation (caching allocator, tensor object)", ["at_npu::native::empty(", "at_npu::native::empty_strided(",
                                                             "at_npu::native::emptyDense("]),
    ("launch site (Python frames read without the GIL, per-line cache)", ["at_npu::native::currentLaunchSite("]),
    ("descriptors: reused per operand geometry, else created (pooled)", ["at_npu::native::ConvertType(", "at_npu::native::launchOperand(",
                                                  "at_npu::native::releaseLaunchOperand(", "aclDestroyTensor",
                                                  "aclDestroyScalar"]),
    ("device op: checks, plan, executor (aclnnAddGetWorkspaceSize)", ["aclnnAddGetWorkspaceSize"]),
    ("queue hand-off to the stream (aclnnLaunchExecutor, nrtLaunchHostFunc)", ["aclnnLaunchExecutor"]),
]
_KERNEL = "at_npu::native::add_tensor("
_BINDING = "torch::autograd::THPVariable_add("
_WORKER = "npu::opslib::(anonymous namespace)::RunExecutor("


def _inclusive(annotate_output: str) -> dict:
    """function name -> inclusive instruction count, from callgrind_annotate --inclusive=yes."""
    counts = {}
    for line in annotate_output.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(?:\S*?:)?(.*?)(?:\s+\[[^\]]*\])?$", line)
        if not m:
            continue
        name = m.group(2)
        if name.startswith("???:"):
            name = name[4:]
        counts[name] = counts.get(name, 0) + int(m.group(1).replace(",", ""))
    return counts


def _sum(counts: dict, prefixes) -> int:
    return sum(v for k, v in counts.items() if any(k.startswith(p) for p in prefixes))


def _callgrind(device: str, workdir: str, toggles, expr: str = "a + b") -> dict:
    out = os.path.join(workdir, f"callgrind.{device}")
    env = dict(os.environ, PYTHONPATH="")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    cmd += [f"--toggle-collect={t}*" for t in toggles]
    cmd += [sys.executable, "-c", _CHILD.format(warmup=WARMUP, ops=OPS, expr=expr), device]
    subprocess.run(cmd, check=True, capture_output=True, cwd=workdir, env=env, timeout=900)
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                          check=True, capture_output=True, text=True).stdout
    return _inclusive(text)


def profile() -> dict:
    """{"stages": [(name, instructions per op)], "npu_total", "cpu_total", "worker"} or {"error"}."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        return {"error": "valgrind is not installed (Debian: apt-get install valgrind)"}
    with tempfile.TemporaryDirectory() as workdir:
        try:
            npu = _callgrind("npu", workdir, [_BINDING, _WORKER])
            cpu = _callgrind("cpu", workdir, [_BINDING])
            others = []
            for name, expr, binding in _OTHER_OPS:
                n = _sum(_callgrind("npu", workdir, [binding], expr), [binding]) / OPS
                c = _sum(_callgrind("cpu", workdir, [binding], expr), [binding]) / OPS
                others.append((name, n, c))
        except (subprocess.SubprocessError, OSError) as e:
            return {"error": f"callgrind failed: {e}"}
    per_op = lambda n: n / OPS  # noqa: E731
    total = _sum(npu, [_BINDING])
    kernel = _sum(npu, [_KERNEL])
    stages = [("Python binding, argument parsing, dispatcher, autograd (as on the CPU)",
               per_op(total - kernel))]
    measured = 0
    for name, prefixes in _STAGES:
        n = _sum(npu, prefixes)
        measured += n
        stages.append((name, per_op(n)))
    stages.append(("other adapter work: fast-path checks, device guard, op counters", per_op(kernel - measured)))
    return {"stages": stages, "npu_total": per_op(total), "cpu_total": per_op(_sum(cpu, [_BINDING])),
            "worker": _sum(npu, [_WORKER]) / (OPS + WARMUP), "ops": OPS, "others": others}


def markdown(result: dict) -> list:
    """The report's launch-path table."""
    if "error" in result:
        return [f"*Launch-path breakdown not measured: {result['error']}.*", ""]
    lines = ["Instructions per `a + b` on 16 elements (callgrind, "
             f"{result['ops']} ops after a warm-up; repeatable to about 1% whatever the load):", "",
             "| stage (calling thread) | instructions per op | share |", "|---|---|---|"]
    for name, n in result["stages"]:
        lines.append(f"| {name} | {n:,.0f} | {100 * n / result['npu_total']:.0f}% |")
    lines += [f"| **npu total** | **{result['npu_total']:,.0f}** | |",
              f"| CPU eager `a + b`, same measurement | {result['cpu_total']:,.0f} | "
              f"npu / CPU {result['npu_total'] / result['cpu_total']:.2f} |",
              f"| the stream's worker thread, per task (runs in parallel) | {result['worker']:,.0f} | |", ""]
    if result.get("others"):
        lines += ["The other small ops, same measurement (calling thread, instructions per op):", "",
                  "| op, 16 elements | npu | CPU eager | npu / CPU |", "|---|---|---|---|"]
        lines += [f"| `{name}` | {n:,.0f} | {c:,.0f} | {n / c:.2f} |" for name, n, c in result["others"]]
        lines.append("")
    return lines


if __name__ == "__main__":
    print("\n".join(markdown(profile())))
