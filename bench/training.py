"""Training: steps/s of the benchmark's small CNN and small transformer: eager npu vs CPU eager, and
compiled npu (torch.compile(backend="npu")) vs eager npu and vs CPU Inductor."""

import time

import torch

from common import interleaved, row, stats
from models import SETUPS

SECTION = "training"
TARGET_RATIO = 0.95  # npu steps/s at least 0.95x CPU eager's
# Compiled npu runs the same Inductor kernels as CPU Inductor, on the same cores: at least as fast.
# (Compiled vs eager npu is shown without a target: eager npu now runs at CPU eager speed, so what
# compiling gains is Inductor's gain on the CPU, not something of the npu's.)
TARGET_COMPILED_VS_INDUCTOR = 1.0


def _window(step, steps: int):
    """A timed sample: `steps` optimizer steps; the loss is read once at the end (as a logger would)."""
    def run():
        loss = None
        for _ in range(steps):
            loss = step()
        loss.item()
    return run


def _compile_backend():
    """The npu torch.compile backend, when the installed torch_npu registers one."""
    try:
        import torch._dynamo
        return "npu" if "npu" in torch._dynamo.list_backends() else None
    except Exception:  # dynamo unavailable in this torch build
        return None


def _compiled_rows(name, setup, quick, steps, repeats, eager_npu_window):
    """Compiled npu vs eager npu and vs CPU Inductor, timed in one interleaved run, with compile costs."""
    from torch_npu.dynamo.backend import compile_stats

    from torch._inductor.utils import fresh_cache

    windows, compile_s = {}, {}
    for device, backend in (("npu", "npu"), ("cpu", "inductor")):
        # The whole step: forward and loss, backward (AOTAutograd), optimizer update.
        _, _, step = setup(device, quick)
        compiled = torch.compile(step, backend=backend)
        kernels_before = compile_stats.kernels
        start = time.perf_counter()
        with fresh_cache():  # a cold compile: no kernel or graph comes from an earlier run's cache
            compiled().item()
        compile_s[device] = time.perf_counter() - start
        if device == "npu":
            kernels = compile_stats.kernels - kernels_before
        windows[device] = _window(compiled, steps)
    npu, eager, cpu = interleaved([(windows["npu"], "npu", 1), (eager_npu_window, "npu", 1),
                                   (windows["cpu"], "cpu", 1)], repeats, warmup=2)
    note = (f"first step (compile, cold cache): npu {compile_s['npu']:.1f} s, CPU Inductor {compile_s['cpu']:.1f} s; "
            f"{kernels} generated npu kernels (forward, backward, optimizer)")
    rate = lambda samples: stats(steps / s for s in samples)  # noqa: E731
    return [
        row(SECTION, f"{name}, compiled npu vs eager npu: steps/s", "steps/s", rate(npu), rate(eager),
            ref_label="eager npu", higher_is_better=True, note=note,
            key=f"{SECTION}.{name}_compiled_vs_eager"),
        row(SECTION, f"{name}, compiled npu vs CPU Inductor: steps/s", "steps/s", rate(npu), rate(cpu),
            ref_label="CPU compiled (inductor)", higher_is_better=True, target=TARGET_COMPILED_VS_INDUCTOR,
            key=f"{SECTION}.{name}_compiled"),
    ]


def _rate_row(name, key, samples_npu, samples_cpu, steps, ref_label):
    rate = lambda samples: stats(steps / s for s in samples)  # noqa: E731  (one sample = one window)
    return row(SECTION, f"{name}: steps/s", "steps/s", rate(samples_npu), rate(samples_cpu),
               ref_label=ref_label, higher_is_better=True, target=TARGET_RATIO, key=key)


def run(quick: bool = False) -> list:
    steps, repeats, warmup = (2, 2, 1) if quick else (8, 7, 3)
    backend = _compile_backend()
    rows = []
    for name, setup in SETUPS.items():
        windows = {}
        for device in ("cpu", "npu"):
            _, _, step = setup(device, quick)
            windows[device] = _window(step, steps)
        # interleaved() times whole windows; warm-up windows absorb first-call costs (Meta caches, pools).
        cpu, npu = interleaved([(windows["cpu"], "cpu", 1), (windows["npu"], "npu", 1)], repeats,
                               warmup=max(1, warmup // steps + 1))
        rows.append(_rate_row(f"{name}, eager", f"{SECTION}.{name}_eager", npu, cpu, steps, "CPU eager"))
        if backend is None:
            rows.append(row(SECTION, f"{name}, compiled: steps/s", "steps/s", None,
                            note="not measured: torch_npu registers no torch.compile backend yet",
                            key=f"{SECTION}.{name}_compiled"))
            continue
        if quick:  # cold compiles of whole training steps take minutes on 2 cores
            for suffix in ("compiled_vs_eager", "compiled"):
                rows.append(row(SECTION, f"{name}, {suffix.replace('_', ' ')}: steps/s", "steps/s", None,
                                note="measured by the full run only", key=f"{SECTION}.{name}_{suffix}"))
            continue
        rows.extend(_compiled_rows(name, setup, quick, steps, repeats, windows["npu"]))
    return rows


if __name__ == "__main__":
    from run import standalone
    standalone(run)
