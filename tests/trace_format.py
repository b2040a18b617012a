"""A strict check of the JSON trace-event format, as Perfetto's JSON importer and chrome://tracing read it:
numeric timestamps, known phases with their required fields, flow pairs bound to slices, and slices on one
row that nest instead of overlapping."""

from __future__ import annotations

import json
from collections import defaultdict

PHASES = {"X", "B", "E", "i", "I", "C", "M", "s", "t", "f"}


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def load(path: str) -> dict:
    def reject(token):
        raise ValueError(f"{path}: {token} is not JSON")

    with open(path) as f:
        data = json.load(f, parse_constant=reject)
    return data


def validate(trace) -> list[dict]:
    """Raises AssertionError naming the first problem; returns the events."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert isinstance(events, list) and events, "traceEvents must be a non-empty list"
    slices = defaultdict(list)
    flows = defaultdict(dict)
    for e in events:
        ph = e.get("ph")
        assert ph in PHASES, f"unknown phase {ph!r} in {e}"
        assert isinstance(e.get("name"), str), f"event without a name: {e}"
        for key in ("pid", "tid"):
            assert isinstance(e.get(key, 0), int), f"{key} must be an integer: {e}"
        if ph == "M":
            assert isinstance(e.get("args"), dict), f"metadata without args: {e}"
            continue
        assert _num(e.get("ts")), f"ts must be a number (not {type(e.get('ts')).__name__}): {e}"
        if ph == "X":
            assert _num(e.get("dur")) and e["dur"] >= 0, f"complete event needs dur >= 0: {e}"
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif ph == "C":
            assert e.get("args") and all(_num(v) for v in e["args"].values()), f"counter values must be numbers: {e}"
        elif ph in "stf":
            assert "id" in e and isinstance(e.get("cat"), str), f"flow event needs id and cat: {e}"
            assert ph not in flows[(e["cat"], e["id"])], f"flow id {e['id']} has two {ph!r} events"
            flows[(e["cat"], e["id"])][ph] = e
            if ph == "f":
                assert e.get("bp") == "e", f"flow end must bind to its enclosing slice (bp: e): {e}"
    for row, spans in slices.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, name in spans:
            while stack and start >= stack[-1][1] - 1e-3:
                stack.pop()
            if stack:
                assert end <= stack[-1][1] + 1e-3, (f"slices overlap without nesting on row {row}: {name} "
                                                    f"[{start}, {end}] vs {stack[-1][2]} ending {stack[-1][1]}")
            stack.append((start, end, name))

    def enclosing(e):
        return [s for s in slices[(e["pid"], e["tid"])] if s[0] - 1e-3 <= e["ts"] <= s[1] + 1e-3]

    for key, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {key} is not a start/finish pair: {sorted(pair)}"
        assert pair["s"]["ts"] <= pair["f"]["ts"] + 1e-3, f"flow {key} ends before it starts"
        assert enclosing(pair["s"]), f"flow start {key} is not inside a slice of its thread"
        assert enclosing(pair["f"]), f"flow end {key} is not inside a slice of its row"
    return events
