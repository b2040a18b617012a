"""Training: steps/s of the benchmark's small CNN and small transformer, npu vs CPU (eager; compiled if available)."""

import torch

from common import interleaved, row, stats
from models import SETUPS

SECTION = "training"
TARGET_RATIO = 0.95  # npu steps/s at least 0.95x CPU eager's


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
        for device in ("cpu", "npu"):
            model, _, step = setup(device, quick)
            compiled = torch.compile(model, backend=backend if device == "npu" else "inductor")
            windows[device] = _window(lambda step=step, compiled=compiled: step(compiled), steps)
        cpu, npu = interleaved([(windows["cpu"], "cpu", 1), (windows["npu"], "npu", 1)], repeats, warmup=2)
        rows.append(_rate_row(f"{name}, compiled", f"{SECTION}.{name}_compiled", npu, cpu, steps,
                              "CPU compiled (inductor)"))
    return rows


if __name__ == "__main__":
    from run import standalone
    standalone(run)
