"""Fuzz target: torch.npu.* and the npu device surface (devices, streams, events, memory, RNG) with
wrong types, out-of-range and negative devices, NaN / inf numbers, fabricated streams and events,
freed storage; every call returns or raises a clear Python exception."""

import math

import torch
from hypothesis import given, strategies as st

from fuzz.common import HUGE_INTS, NEGATIVE_INTS, floats, hypothesis_settings, ints, unclear

DEVICES = st.sampled_from([
    None, 0, 1, -1, 7, 999, 2**31, -(2**31), 2**63 - 1, "npu", "npu:0", "npu:1", "npu:999", "npu:-1",
    "cpu", "cuda:0", "npu:x", "", 1.5, math.nan, torch.device("cpu"), torch.device("npu", 0),
    torch.device("meta"), [0], b"npu",
])
DTYPES = st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
                          torch.int8, torch.uint8, torch.bool, torch.complex64, torch.int32])
SIZES = st.lists(st.sampled_from([0, 1, 2, 3, -1, -5] + HUGE_INTS), max_size=4)


def _fabricated_stream(draw):
    sid = draw(st.sampled_from([0, 1, 9, 10, 11, 64, -1, 2**40]))
    dev = draw(st.sampled_from([0, 1, 5, -1, 127]))
    return torch.npu.Stream(stream_id=sid, device_index=dev, device_type=torch.device("npu").type)


def _freed_tensor(draw):
    t = torch.ones(8, device="npu", dtype=draw(DTYPES))
    t.untyped_storage().resize_(0)
    return t


CALLS = {
    "set_device": lambda d: torch.npu.set_device(d(DEVICES)),
    "synchronize": lambda d: torch.npu.synchronize(d(DEVICES)),
    "current_stream": lambda d: torch.npu.current_stream(d(DEVICES)),
    "default_stream": lambda d: torch.npu.default_stream(d(DEVICES)),
    "Stream": lambda d: torch.npu.Stream(device=d(DEVICES), priority=d(ints)),
    "device_name": lambda d: torch.npu.get_device_name(d(DEVICES)),
    "device_properties": lambda d: torch.npu.get_device_properties(d(DEVICES)),
    "device_capability": lambda d: torch.npu.get_device_capability(d(DEVICES)),
    "mem_get_info": lambda d: torch.npu.mem_get_info(d(DEVICES)),
    "memory_allocated": lambda d: torch.npu.memory_allocated(d(DEVICES)),
    "memory_stats": lambda d: torch.npu.memory_stats(d(DEVICES)),
    "memory_summary": lambda d: torch.npu.memory_summary(d(DEVICES)),
    "reset_peak": lambda d: torch.npu.reset_peak_memory_stats(d(DEVICES)),
    "memory_fraction": lambda d: torch.npu.set_per_process_memory_fraction(d(floats), d(DEVICES)),
    "manual_seed": lambda d: torch.npu.manual_seed(d(ints | floats)),
    "set_rng_state": lambda d: torch.npu.set_rng_state(
        torch.zeros(d(st.sampled_from([0, 1, 16])), dtype=d(DTYPES)), d(DEVICES)),
    "get_rng_state": lambda d: torch.npu.get_rng_state(d(DEVICES)),
    "empty": lambda d: torch.empty(d(SIZES), device=d(DEVICES), dtype=d(DTYPES)),
    "full": lambda d: torch.full(d(SIZES), d(floats), device="npu", dtype=d(DTYPES)),
    "to": lambda d: torch.ones(3, dtype=d(DTYPES)).to(d(DEVICES)),
    "tensor_npu": lambda d: torch.ones(2).npu(d(DEVICES)),
    "stream_sync_fabricated": lambda d: _fabricated_stream(d).synchronize(),
    "stream_query_fabricated": lambda d: _fabricated_stream(d).query(),
    "with_fabricated_stream": lambda d: _with_stream(_fabricated_stream(d)),
    "event_ops": lambda d: _event_ops(d),
    "record_stream": lambda d: torch.ones(4, device="npu").record_stream(_fabricated_stream(d)),
    "freed_storage_use": lambda d: _freed_tensor(d).add(1).sum().item(),
    "freed_storage_cpu": lambda d: _freed_tensor(d).cpu(),
    "freed_storage_copy": lambda d: _freed_tensor(d).copy_(torch.ones(8)),
    "resize_huge": lambda d: torch.ones(2, device="npu").resize_(d(st.sampled_from(HUGE_INTS + NEGATIVE_INTS))),
    "storage_resize": lambda d: torch.ones(2, device="npu").untyped_storage().resize_(
        d(st.sampled_from(HUGE_INTS + NEGATIVE_INTS))),
    "elapsed_unrecorded": lambda d: torch.npu.Event(enable_timing=d(st.booleans())).elapsed_time(
        torch.npu.Event(enable_timing=True)),
}


def _with_stream(stream):
    with torch.npu.stream(stream):
        return torch.ones(3, device="npu") + 1


def _event_ops(d):
    e = torch.npu.Event(enable_timing=d(st.booleans()))
    for op in d(st.lists(st.sampled_from(["record", "wait", "query", "synchronize", "elapsed", "record_bad"]),
                         max_size=5)):
        if op == "record":
            e.record()
        elif op == "record_bad":
            e.record(_fabricated_stream(d))
        elif op == "wait":
            e.wait(_fabricated_stream(d) if d(st.booleans()) else None)
        elif op == "query":
            e.query()
        elif op == "synchronize":
            e.synchronize()
        else:
            e.elapsed_time(e)


def run(examples: int, journal, seed=None) -> list[str]:
    problems: list[str] = []
    names = sorted(CALLS)

    @hypothesis_settings(examples, seed)
    @given(st.sampled_from(names), st.data())
    def case(name, data):
        drawn = []

        def draw(strategy):
            value = data.draw(strategy)
            drawn.append(value)
            journal.note(f"device_api: {name}{drawn!r}")
            return value

        journal.case(f"device_api: {name}")
        try:
            CALLS[name](draw)
            journal.succeeded += 1
        except Exception as exc:  # noqa: BLE001 - judging every exception is the point (hypothesis' own are BaseException)
            why = unclear(exc, repr(drawn))
            if why:
                problems.append(f"{name}{drawn!r}: {why}: {type(exc).__name__}: {str(exc)[:300]}")
        finally:
            torch.npu.set_device(0)
            torch.npu.set_stream(torch.npu.default_stream(0))
            try:
                torch.npu.synchronize(0)
            except RuntimeError:
                pass

    case()
    return problems
