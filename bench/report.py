"""Turns benchmark rows into a console table, docs/benchmarks.md and a bar chart of ratios vs targets."""

import math

from analysis import METHOD, explain

TITLES = {
    "demo": "1. The demo's model (make demo)",
    "small_ops": "2. Small-op host cost",
    "kernels": "3. Large kernels",
    "attention": "4. Fused attention (npu_fusion_attention vs CPU flash attention)",
    "copies": "5. Copies",
    "training": "6. Training",
    "allocator": "7. Allocator",
    "distributed": "8. Distributed (hccl)",
    "profiling": "9. Profiling overhead",
    "long_runs": "10. Long runs (leaks)",
    "graphs": "11. NPU graphs (capture and replay)",
}


def _num(x) -> str:
    if x is None:
        return "—"
    if x == 0 or abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}" if abs(x) >= 0.1 else f"{x:.3f}"


def _spread(s) -> str:
    if s is None:
        return "—"
    return f"{_num(s['median'])} ({_num(s['min'])}–{_num(s['max'])})"


def _target(r) -> str:
    if r["target"] is None:
        return "—"
    return f"{'≥' if r['higher_is_better'] else '≤'} {_num(r['target'])}"


def _status(r, bold: bool = True) -> str:
    if r["met"] is None:
        return "not measured" if r["npu"] is None else "—"
    if r["met"]:
        return "met"
    return "**missed**" if bold else "MISSED"


def text_table(rows) -> str:
    lines = [f"{'measurement':<66}{'npu':>11}{'reference':>11}{'ratio':>8}{'target':>9}  status"]
    for r in rows:
        npu = _num(r["npu"]["median"]) if r["npu"] else "—"
        ref = _num(r["ref"]["median"]) if r["ref"] else "—"
        lines.append(f"{r['name'][:65]:<66}{npu:>11}{ref:>11}{_num(r['ratio']):>8}{_target(r):>9}  "
                     f"{_status(r, bold=False)}")
    return "\n".join(lines)


def _machine_table(doc) -> list:
    m = doc["machine"]
    items = [
        ("CPU", f"{m['cpu_model']}, {m['cores']} cores ({m['cores_usable']} usable), "
                f"torch intra-op threads {m['torch_threads']}"),
        ("software", f"torch {m['torch']}, torch_npu {m['torch_npu']} (commit {m['commit']}), "
                     f"numpy {m['numpy']}, Python {m['python']}, {m['os']}"),
        ("date", m["date"]),
        ("load average (1 min) at start / end", f"{m['load_average_start']:.2f} / "
                                                 f"{m.get('load_average_end', float('nan')):.2f}"),
        ("run time", ", ".join(f"{k} {v:.0f} s" for k, v in doc["seconds"].items())
         + f"; total {doc['total_seconds']:.0f} s"),
    ]
    for u in doc.get("updated", []):
        items.append(("rerun alone afterwards", f"{', '.join(u['sections'])} (load average "
                                                 f"{u['machine']['load_average_start']:.2f} / "
                                                 f"{u['machine'].get('load_average_end', float('nan')):.2f}, "
                                                 f"commit {u['machine']['commit']})"))
    if m["launch_env"]:
        items.append(("launch environment", ", ".join(f"{k}={v}" for k, v in m["launch_env"].items())))
    return ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in items]


def _section_table(rows) -> list:
    lines = ["| measurement | npu median (min–max) | reference median (min–max) | ratio npu/ref | "
             "ratio of best samples | target | status |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ref = f"{r['ref_label']}: {_spread(r['ref'])}" if r["ref"] else "—"
        note = f"<br>*{r['note']}*" if r["note"] else ""
        lines.append(f"| {r['name']}{note} | {_spread(r['npu'])} | {ref} | {_num(r['ratio'])} | "
                     f"{_num(r.get('ratio_best'))} | {_target(r)} | {_status(r)} |")
    return lines


def _previous_ratios(path: str) -> dict:
    """measurement name -> median ratio, from the report this run replaces (if any)."""
    import os
    import re
    ratios = {}
    if not os.path.exists(path):
        return ratios
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 7 or cells[0] in ("measurement", "---"):
                continue
            name = re.sub(r"<br>.*$", "", cells[0])
            try:
                ratios[name] = float(cells[3])
            except ValueError:
                pass
    return ratios


def _change_table(rows, previous: dict) -> list:
    """Before/after median ratios of the targeted rows, against the report this run replaces."""
    lines = ["| measurement | ratio before | ratio now | target | status now |", "|---|---|---|---|---|"]
    for r in rows:
        if r["target"] is None:
            continue
        before = previous.get(r["name"])
        lines.append(f"| {r['name']} | {_num(before)} | {_num(r['ratio'])} | {_target(r)} | {_status(r)} |")
    return lines


def write_markdown(doc, path: str, chart_name: str = "benchmarks.png") -> None:
    previous = _previous_ratios(path)
    rows = doc["rows"]
    targeted = [r for r in rows if r["target"] is not None]
    met = sum(1 for r in targeted if r["met"])
    out = ["# Benchmarks", "",
           "<!-- Generated by `make bench` (bench/run.py); edit bench/ instead of this file. -->", ""]
    if doc["quick"]:
        out += ["> **Quick (smoke) run:** tiny sizes and few repeats; these figures mean nothing. "
                "Run `make bench` for real numbers.", ""]
    out += ["Every figure is measured in one process against the natural reference on this device: the "
            "host CPU itself (PyTorch CPU eager doing the same work, or a plain host memcpy for copies). "
            "Ratios are npu / reference of the medians (the figure held against the target): for times lower "
            "is better, for bandwidths and steps/s higher is better. The ratio of the best samples (fastest "
            "npu over fastest reference) is less disturbed by other load on a shared machine and is given "
            "beside it.", "",
            f"**Targets met: {met} of {len(targeted)}.**", "",
            "## Machine", ""] + _machine_table(doc) + [
            "", f"![ratios vs targets]({chart_name})", "",
            "The chart shows npu speed relative to the reference, so longer bars are better everywhere: for "
            "times that is the inverse of the ratio in the tables.", ""]
    if previous and not doc["quick"]:
        out += ["## Change since the previous report", "",
                "Median ratios of the targeted rows: the report this run replaced, and this run.", ""]
        out += _change_table(rows, previous) + [""]
    for section in doc["sections"]:
        section_rows = [r for r in rows if r["section"] == section]
        out += [f"## {TITLES[section]}", ""] + _section_table(section_rows) + [""]
        if section == "small_ops" and doc.get("launch_profile") is not None:
            import launch_profile
            out += ["### Where the launch goes", ""] + launch_profile.markdown(doc["launch_profile"])
    missed = [r for r in targeted if r["met"] is False]
    unmeasured = [r for r in rows if r["npu"] is None]
    out += ["## Missed targets: why, and what would fix them", ""]
    if not missed and not unmeasured:
        out += ["Every target was met in this run.", ""]
    # Rows that miss for the same reason share one explanation.
    by_reason = {}
    for r in missed + unmeasured:
        by_reason.setdefault(explain(r["key"]), []).append(r)
    for reason, group in by_reason.items():
        names = "; ".join(f"**{r['name']}** (" + (f"ratio {_num(r['ratio'])}, target {_target(r)}"
                                                    if r["npu"] is not None else "not measured") + ")"
                          for r in group)
        out += [f"- {names}: {reason}", ""]
    out += ["", "## Method", ""] + METHOD + [""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def _chart_points(rows):
    """Speed rows as 'npu speed relative to the reference' (higher is better) and their targets."""
    speed, alloc = [], []
    for r in rows:
        if r["target"] is None or r["ratio"] is None or r["section"] == "long_runs" or ".cycles_" in r["key"]:
            continue  # long-run rows are growths against a target of 0, not ratios to draw
        if r["section"] == "allocator":
            label = r["name"].replace(": device segment allocations per step after warm-up", ": segments/step")
            alloc.append((label.replace(": peak reserved / peak allocated", ": reserved/allocated"),
                          r["ratio"], r["target"], r["met"]))
        elif r["higher_is_better"]:
            speed.append((r["name"], r["ratio"], r["target"], r["met"]))
        else:
            speed.append((r["name"], 1 / r["ratio"], 1 / r["target"], r["met"]))
    return speed, alloc


def _bars(ax, points, log: bool):
    labels = [p[0].split(": us per op")[0].split(": ms per")[0].split(": GB/s")[0].split(": steps/s")[0]
              for p in points]
    y = list(range(len(points)))[::-1]
    colors = ["#2e7d32" if p[3] else "#c62828" for p in points]
    ax.barh(y, [max(p[1], 1e-3) for p in points], color=colors, height=0.6)
    for yi, p in zip(y, points):
        ax.plot([p[2], p[2]], [yi - 0.4, yi + 0.4], color="black", linewidth=2)
        ax.annotate(f"{p[1]:.2f}", (max(p[1], 1e-3), yi), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=6)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    if log:
        from matplotlib.ticker import NullFormatter
        ax.set_xscale("log")
        values = [p[1] for p in points] + [p[2] for p in points]
        ticks = [t for t in (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 10)
                 if min(values) / 1.5 <= t <= max(values) * 1.5]
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:g}" for t in ticks], fontsize=7)
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.grid(axis="x", alpha=0.3)


def write_chart(doc, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speed, alloc = _chart_points(doc["rows"])
    heights = [max(1, len(speed)), max(1, len(alloc))]
    fig, axes = plt.subplots(2, 1, figsize=(10, 0.32 * sum(heights) + 2.5),
                             gridspec_kw={"height_ratios": heights})
    ax_speed, ax_alloc = axes
    if speed:
        _bars(ax_speed, speed, log=True)
        ax_speed.axvline(1.0, color="grey", linestyle=":", linewidth=1)
    ax_speed.set_title("npu speed relative to the reference (CPU eager / memcpy); black tick = target, "
                       "green = met, red = missed", fontsize=9)
    ax_speed.set_xlabel("reference time / npu time, or npu bandwidth (steps/s) / reference's "
                        "(log scale; > 1: npu faster)", fontsize=8)
    if alloc:
        _bars(ax_alloc, alloc, log=False)
        top = max(max(p[1] for p in alloc), max(p[2] for p in alloc))
        ax_alloc.set_xlim(0, max(1.5, math.ceil(top * 1.1 * 10) / 10))
    ax_alloc.set_title("allocator: device segment allocations per step, peak reserved / peak allocated "
                       "(lower is better)", fontsize=9)
    title = "torch_npu benchmarks" + (" (QUICK SMOKE RUN: sizes reduced)" if doc["quick"] else "")
    m = doc["machine"]
    fig.suptitle(f"{title}\n{m['cpu_model']}, {m['cores']} cores, torch {m['torch']}, {m['date']}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
