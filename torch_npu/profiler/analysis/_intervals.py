"""Interval arithmetic on (start, end) pairs in nanoseconds: busy time, overlap and idle gaps of device work."""

from __future__ import annotations


def union(intervals) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted((s, e) for s, e in intervals if e > s):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def total(intervals) -> int:
    return sum(e - s for s, e in union(intervals))


def intersect(a, b) -> list[tuple[int, int]]:
    a, b = union(a), union(b)
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a, b) -> list[tuple[int, int]]:
    """Parts of `a` not covered by `b`."""
    out = []
    b = union(b)
    for s, e in union(a):
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


def gaps(intervals, start: int | None = None, end: int | None = None) -> list[tuple[int, int]]:
    """Idle time between busy intervals, within [start, end] (default: first start to last end)."""
    u = union(intervals)
    if not u:
        return [(start, end)] if start is not None and end is not None and end > start else []
    lo = u[0][0] if start is None else start
    hi = u[-1][1] if end is None else end
    return subtract([(lo, hi)], u)
