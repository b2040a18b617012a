"""Small-op host cost: many tiny ops launched back to back, one sync at the end, npu vs CPU eager.

Also the launch + sync round trip of a single op. Run alone: .venv/bin/python bench/small_ops.py [--quick]
"""

import threading
import time

import torch

from common import interleaved, row, stats, sync

SECTION = "small_ops"
TARGET_RATIO = 1.3  # npu per-op cost at most 1.3x CPU eager's
TARGET_ROUND_TRIP = 2.0  # launch + synchronize() at most 2x a CPU eager op
STREAMS = 4

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
            note="the op crosses to the stream's worker thread and back", target=TARGET_ROUND_TRIP,
            key=f"{SECTION}.round_trip_sync"),
        row(SECTION, "round trip: add + .cpu()", "us", us(npu_cpu), us(cpu_add), note=note,
            key=f"{SECTION}.round_trip_cpu"),
        row(SECTION, "round trip: sum + .item()", "us", us(npu_item), us(cpu_item), note=note,
            key=f"{SECTION}.round_trip_item"),
    ]


def _threads_case(device: str, ops: int, numel: int):
    """STREAMS Python threads, each adding on its own tensors (and on npu its own stream), started
    together; returns a function timing one sample, in seconds per op over all threads."""
    inputs = [(torch.randn(numel, device=device), torch.randn(numel, device=device)) for _ in range(STREAMS)]
    streams = [torch.npu.Stream() for _ in range(STREAMS)] if device == "npu" else [None] * STREAMS

    def worker(i, barrier):
        a, b = inputs[i]
        barrier.wait()
        if streams[i] is None:
            for _ in range(ops):
                a + b
            return
        with torch.npu.stream(streams[i]):
            for _ in range(ops):
                a + b
            streams[i].synchronize()

    def sample():
        barrier = threading.Barrier(STREAMS + 1)
        threads = [threading.Thread(target=worker, args=(i, barrier)) for i in range(STREAMS)]
        for t in threads:
            t.start()
        barrier.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        return (time.perf_counter() - start) / (ops * STREAMS)

    return sample


def _many_streams_row(ops: int, repeats: int, numel: int) -> dict:
    cpu, npu = _threads_case("cpu", ops, numel), _threads_case("npu", ops, numel)
    cpu(), npu()  # warm-up: threads, streams, caches
    samples = {"cpu": [], "npu": []}
    for _ in range(repeats):
        samples["cpu"].append(cpu())
        samples["npu"].append(npu())
    us = lambda xs: stats(x * 1e6 for x in xs)  # noqa: E731
    return row(SECTION, f"add, {numel} elements, {STREAMS} threads each on its own stream: us per op",
               "us", us(samples["npu"]), us(samples["cpu"]),
               note=f"{ops} ops per thread; CPU eager runs the same {STREAMS} threads; informational",
               key=f"{SECTION}.many_streams")


def run(quick: bool = False) -> list:
    ops, repeats, trips = (500, 3, 100) if quick else (10000, 7, 2000)
    return (_per_op_rows(ops, repeats, 16) + [_many_streams_row(ops // STREAMS, repeats, 16)] +
            _round_trip_rows(trips, repeats, 16))


if __name__ == "__main__":
    from run import standalone
    standalone(run)
