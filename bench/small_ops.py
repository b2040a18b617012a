"""Small-op host cost: many tiny ops launched back to back, one sync at the end, npu vs CPU eager.

Also the launch + sync round trip of a single op. Run alone: .venv/bin/python bench/small_ops.py [--quick]
"""

import torch

from common import interleaved, row, stats, sync

SECTION = "small_ops"
TARGET_RATIO = 1.3  # npu per-op cost at most 1.3x CPU eager's

# What the issue names (add, mul, relu) plus one op that has no named device op and runs through the
# generic executor, to show what that path costs (no target: it is the fallback path).
OPS = {
    "add": (lambda a, b: a + b, TARGET_RATIO),
    "mul": (lambda a, b: a * b, TARGET_RATIO),
    "relu": (lambda a, b: torch.relu(a), TARGET_RATIO),
    "cumsum (generic executor)": (lambda a, b: torch.cumsum(a, 0), None),
}


def _per_op_rows(ops: int, repeats: int, numel: int) -> list:
    rows = []
    inputs = {dev: (torch.randn(numel, device=dev), torch.randn(numel, device=dev)) for dev in ("cpu", "npu")}
    for name, (op, target) in OPS.items():
        cases = [(lambda op=op, a=inputs[dev]: op(*a), dev, ops) for dev in ("cpu", "npu")]
        cpu, npu = interleaved(cases, repeats, warmup=200)
        rows.append(row(SECTION, f"{name}, {numel} elements: us per op ({ops} ops, 1 sync)", "us",
                        stats(s * 1e6 for s in npu), stats(s * 1e6 for s in cpu), target=target,
                        key=f"{SECTION}.{name.split()[0]}"))
    return rows


def _round_trip_rows(iters: int, repeats: int, numel: int) -> list:
    """One op then a synchronisation, every time: the latency a data-dependent host decision pays."""
    a = {dev: torch.randn(numel, device=dev) for dev in ("cpu", "npu")}

    def launch_sync():
        a["npu"].add(1.0)
        sync("npu")

    cases = [(lambda: a["cpu"].add(1.0), "cpu", iters),
             (launch_sync, "npu", iters),
             (lambda: a["npu"].add(1.0).cpu(), "npu", iters),
             (lambda: a["npu"].sum().item(), "npu", iters),
             (lambda: a["cpu"].sum().item(), "cpu", iters)]
    cpu_add, npu_sync, npu_cpu, npu_item, cpu_item = interleaved(cases, repeats, warmup=50)
    us = lambda samples: stats(s * 1e6 for s in samples)  # noqa: E731
    note = "latency, not a target: the work crosses to the stream's worker thread and back"
    return [
        row(SECTION, "round trip: add + torch.npu.synchronize()", "us", us(npu_sync), us(cpu_add),
            note=note, key=f"{SECTION}.round_trip_sync"),
        row(SECTION, "round trip: add + .cpu()", "us", us(npu_cpu), us(cpu_add), note=note,
            key=f"{SECTION}.round_trip_cpu"),
        row(SECTION, "round trip: sum + .item()", "us", us(npu_item), us(cpu_item), note=note,
            key=f"{SECTION}.round_trip_item"),
    ]


def run(quick: bool = False) -> list:
    ops, repeats, trips = (500, 3, 100) if quick else (10000, 7, 2000)
    return _per_op_rows(ops, repeats, 16) + _round_trip_rows(trips, repeats, 16)


if __name__ == "__main__":
    from run import standalone
    standalone(run)
