"""Draws a trace_view.json (or any JSON trace-event file) as a PNG timeline with matplotlib: one lane per
thread / stream row, slices as bars, flow arrows from launches to device tasks, and counters as lines.
For a look at a trace where no browser is at hand (CI logs, docs).

    python -m torch_npu.profiler.render ASCEND_PROFILER_OUTPUT/trace_view.json -o trace.png [--step 3]
"""

from __future__ import annotations

import argparse
import json
import zlib


_FIXED = {"Computing": "#4caf50", "Communication": "#ff9800", "Communication(Not Overlapped)": "#f44336",
          "Free": "#bdbdbd"}


def _color(name: str):
    import matplotlib.cm as cm

    return _FIXED.get(name) or cm.tab20((zlib.crc32(name.encode()) % 20) / 20)


def render(trace_path: str, out_path: str, step: int | None = None, width: float = 14.0) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover
        raise ImportError("rendering a trace needs matplotlib (pip install matplotlib)") from e
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    procs, proc_sort, threads, thread_sort = {}, {}, {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        key = (e.get("pid"), e.get("tid"))
        if e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e["name"] == "process_sort_index":
            proc_sort[e["pid"]] = e["args"]["sort_index"]
        elif e["name"] == "thread_name":
            threads[key] = e["args"]["name"]
        elif e["name"] == "thread_sort_index":
            thread_sort[key] = e["args"]["sort_index"]
    slices = [e for e in events if e.get("ph") == "X"]
    lo, hi = min(e["ts"] for e in slices), max(e["ts"] + e["dur"] for e in slices)
    if step is not None:
        marks = [e for e in slices if e["name"] == f"ProfilerStep#{step}"]
        if not marks:
            raise ValueError(f"{trace_path} has no ProfilerStep#{step}")
        lo, hi = marks[0]["ts"], marks[0]["ts"] + marks[0]["dur"]
        # The step's device work may run after its host side: follow the launches made inside the step.
        launched = {e["id"] for e in events if e.get("ph") == "s" and lo <= e["ts"] <= hi}
        ends = {(e["pid"], e["tid"], e["ts"]) for e in events if e.get("ph") == "f" and e["id"] in launched}
        step_tasks = [e for e in slices if (e["pid"], e["tid"], e["ts"]) in ends]
        hi = max([hi] + [e["ts"] + e["dur"] for e in step_tasks])
    shown = [e for e in slices if e["ts"] + e["dur"] >= lo and e["ts"] <= hi]
    rows = sorted({(e["pid"], e["tid"]) for e in shown},
                  key=lambda k: (proc_sort.get(k[0], 0), k[0], thread_sort.get(k, 0), k[1]))
    lane = {k: i for i, k in enumerate(rows)}
    counters = [e for e in events if e.get("ph") == "C" and lo <= e["ts"] <= hi]
    fig, axes = plt.subplots(2 if counters else 1, 1, figsize=(width, 0.45 * len(rows) + (2.5 if counters else 1.5)),
                             sharex=True, gridspec_kw={"height_ratios": [max(len(rows), 1), 3]} if counters else None)
    ax = axes[0] if counters else axes
    ms = lambda ts: (ts - lo) / 1000.0  # noqa: E731
    depth: dict = {}
    for e in sorted(shown, key=lambda e: (e["ts"], -e["dur"])):
        k = (e["pid"], e["tid"])
        stack = [end for end in depth.get(k, []) if end > e["ts"]]
        depth[k] = stack + [e["ts"] + e["dur"]]
        level = len(stack)
        height = 0.8 / (1 + 0.35 * level)
        ax.broken_barh([(ms(e["ts"]), max(e["dur"] / 1000.0, 1e-4))], (lane[k] - height / 2, height),
                       facecolors=_color(e["name"]), edgecolors="black", linewidth=0.2)
        if e["dur"] / 1000.0 > (hi - lo) / 1000.0 / 25 and level < 2:
            ax.text(ms(e["ts"]) + 0.002 * (hi - lo) / 1000.0, lane[k], e["name"][:24], fontsize=6, va="center",
                    clip_on=True)
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    for e in events:
        if e.get("ph") == "f" and e["id"] in starts:
            s = starts[e["id"]]
            a, b = (s["pid"], s["tid"]), (e["pid"], e["tid"])
            if a in lane and b in lane and lo <= s["ts"] <= hi:
                ax.annotate("", xy=(ms(e["ts"]), lane[b]), xytext=(ms(s["ts"]), lane[a]),
                            arrowprops={"arrowstyle": "->", "color": "#555555", "lw": 0.4, "alpha": 0.6})
    labels = [f"{procs.get(p, p)}: {threads.get((p, t), t)}" for p, t in rows]
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, (hi - lo) / 1000.0)
    title = f"{trace_path.rsplit('/', 1)[-1]}" + (f", ProfilerStep#{step}" if step is not None else "")
    ax.set_title(title, fontsize=9)
    if counters:
        cax = axes[1]
        series: dict = {}
        for c in sorted(counters, key=lambda c: c["ts"]):
            for name, value in c["args"].items():
                series.setdefault(f"{c['name']} {name}", []).append((ms(c["ts"]), value))
        for name, points in series.items():
            xs, ys = zip(*points)
            cax.step(xs, ys, where="post", label=name, linewidth=0.8)
        cax.legend(fontsize=6, loc="upper left")
        cax.set_ylabel("MB", fontsize=7)
        cax.set_xlabel("ms", fontsize=8)
    else:
        ax.set_xlabel("ms", fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path, dpi=130)
    plt.close(fig)
    return out_path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_npu.profiler.render", description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="trace_view.json (or another JSON trace-event file)")
    parser.add_argument("-o", "--output", default="trace.png", help="PNG to write (default: trace.png)")
    parser.add_argument("--step", type=int, default=None, help="show only ProfilerStep#STEP and its device work")
    args = parser.parse_args(argv)
    print(render(args.trace, args.output, args.step))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
