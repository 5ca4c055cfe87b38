"""Writes a run's report: ``results.json`` (everything), ``results.md`` (the table) and two PNG
heat maps (``speedup.png``, ``memory.png``: one panel per implementation compared with PyG, a row
per graph, a column per op / level / dtype; > 1 means better than PyG)."""
from __future__ import annotations

import json
import math
import os
from collections import OrderedDict
from typing import Dict, List, Optional, Tuple

REFERENCE = "pyg"


def write_report(report: dict, out_dir: str) -> Dict[str, str]:
    """Writes every output file into `out_dir`; returns {kind: path}."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {"json": os.path.join(out_dir, "results.json"),
             "markdown": os.path.join(out_dir, "results.md"),
             "summary": os.path.join(out_dir, "summary.md"),
             "speedup_plot": os.path.join(out_dir, "speedup.png"),
             "memory_plot": os.path.join(out_dir, "memory.png")}
    write_json(report, paths["json"])
    with open(paths["markdown"], "w") as f:
        f.write(markdown(report))
    with open(paths["summary"], "w") as f:
        f.write(summary(report))
    rows = report["results"]
    heatmap(rows, "speedup", "speed-up over PyG (time_PyG / time)", paths["speedup_plot"])
    heatmap(rows, "memory_ratio", "memory ratio (peak_PyG / peak)", paths["memory_plot"])
    return paths


def write_json(report: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=_json_default)


def _json_default(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def summary(report: dict) -> str:
    """A compact table of iognn's rows only: time, speed-up and memory ratio over PyG, check."""
    lines = ["| graph | op | level | dtype | ms | speed-up | memory ratio | check |",
             "|---|---|---|---|---:|---:|---:|---|"]
    main = "fwdbwd_ms" if report["config"]["mode"] == "fwdbwd" else "fwd_ms"
    for r in report["results"]:
        if r["impl"] != "iognn":
            continue
        if r["status"] != "ok":
            lines.append(f"| {r['graph']} | {r['label']} | {r['level']} | {r['dtype']} | "
                         f"{r['status']} | - | - | - |")
            continue
        lines.append(f"| {r['graph']} | {r['label']} | {r['level']} | {r['dtype']} | "
                     f"{_num(r[main])} | {_num(r['speedup'], 'x')} | "
                     f"{_num(r['memory_ratio'], 'x')} | {r['check'] or '-'} |")
    return "\n".join(lines) + "\n"


# ---- Markdown ---------------------------------------------------------------------------------
COLUMNS = ("graph", "op", "level", "dtype", "impl", "fwd ms", "bwd ms", "fwd+bwd ms",
           "speed-up vs PyG", "peak MiB", "memory ratio", "floor %", "check")


def _num(value: Optional[float], suffix: str = "") -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.0f}{suffix}"
    if value >= 10:
        return f"{value:.1f}{suffix}"
    return f"{value:.3g}{suffix}"


def table_row(row: dict) -> List[str]:
    cells = [row["graph"], row["label"], row["level"], row["dtype"], row["impl"]]
    if row["status"] != "ok":
        return cells + [row["status"], "-", "-", "-", "-", "-", "-", row["check"] or "-"]
    fraction = row["floor_fraction"]
    return cells + [_num(row["fwd_ms"]), _num(row["bwd_ms"]), _num(row["fwdbwd_ms"]),
                    _num(row["speedup"], "x"), _num(row["peak_mib"]), _num(row["memory_ratio"], "x"),
                    "-" if fraction is None else f"{100 * fraction:.0f}%", row["check"] or "-"]


def markdown(report: dict) -> str:
    dev, ver = report["device"], report["versions"]
    lines = [f"# iognn bench: {report['suite']} suite",
             "",
             f"- date: {report['date']}; command: `{report['command']}`",
             f"- device: {dev['type']} {dev.get('name', '')}; measured bandwidth "
             f"{dev['bandwidth_gb_s']} GB/s (copy, read + write)",
             "- versions: " + ", ".join(f"{k} {v}" for k, v in ver.items()),
             f"- mode: {report['config']['mode']}; speed-up = PyG time / time "
             f"({'forward + backward' if report['config']['mode'] == 'fwdbwd' else 'forward'}); "
             "memory ratio = PyG peak / peak; floor % = bytes-floor time / measured time",
             f"- elapsed: {report.get('elapsed_s', '-')} s",
             "",
             "## Graphs",
             "",
             "| graph | nodes | edges | in-degree max | mean | p99 | out-degree max |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for g in report["graphs"]:
        lines.append(f"| {g['spec']} | {g['num_nodes']:,} | {g['num_edges']:,} "
                     f"| {g['in_degree_max']:,} | {g['in_degree_mean']:.1f} "
                     f"| {g['in_degree_p99']:,} | {g['out_degree_max']:,} |")
    for skipped in report["skipped_graphs"]:
        lines.append(f"| {skipped['spec']} | skipped: {skipped['reason']} | | | | | |")
    lines += ["", "## Results", "", "| " + " | ".join(COLUMNS) + " |",
              "|" + "|".join("---" if i < 5 else "---:" for i in range(len(COLUMNS))) + "|"]
    lines += ["| " + " | ".join(table_row(r)) + " |" for r in report["results"]]
    problems: "OrderedDict[tuple, List[dict]]" = OrderedDict()
    for r in report["results"]:
        if r["status"] != "ok":
            problems.setdefault((r["impl"], r["status"], r["message"]), []).append(r)
    if problems:
        lines += ["", "## Not measured", ""]
        for (impl, status, message), rows in problems.items():
            ops = ", ".join(OrderedDict.fromkeys(f"{r['label']} {r['level']}" for r in rows))
            lines.append(f"- {impl}, {status}, {len(rows)} rows ({ops}): {message}")
    return "\n".join(lines) + "\n"


# ---- plots ------------------------------------------------------------------------------------
def _grid(rows: List[dict], impl: str, key: str) -> Tuple[List[str], List[str], List[List[float]]]:
    graphs: "OrderedDict[str, None]" = OrderedDict()
    columns: "OrderedDict[str, None]" = OrderedDict()
    values: Dict[Tuple[str, str], float] = {}
    for r in rows:
        if r["impl"] != impl or r.get(key) is None:
            continue
        column = f"{r['label']} {r['level']} {r['dtype']}"
        graphs[r["graph"]] = None
        columns[column] = None
        values[(r["graph"], column)] = r[key]
    grid = [[values.get((g, c), math.nan) for c in columns] for g in graphs]
    return list(graphs), list(columns), grid


def heatmap(rows: List[dict], key: str, title: str, path: str) -> None:
    """One panel per non-reference implementation with data; colour = log2 of the ratio."""
    from .._tools import require
    require("iognn.bench's plots", ("matplotlib",))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    impls = sorted((i for i in OrderedDict.fromkeys(r["impl"] for r in rows) if i != REFERENCE),
                   key=lambda name: name != "iognn")  # iognn's panel first
    panels = [(impl, *_grid(rows, impl, key)) for impl in impls]
    panels = [p for p in panels if p[1]]
    if not panels:
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, f"{title}: no measurements", ha="center", va="center")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return
    width = max(6.0, 0.45 * max(len(p[2]) for p in panels) + 3)
    heights = [0.35 * len(p[1]) + 2.2 for p in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (impl, graphs, columns, grid) in zip(axes[:, 0], panels):
        data = np.log2(np.array(grid, dtype=float))
        limit = max(1.0, float(np.nanmax(np.abs(data))) if np.isfinite(data).any() else 1.0)
        image = ax.imshow(data, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
        ax.set_xticks(range(len(columns)), columns, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(graphs)), graphs, fontsize=7)
        ax.set_title(f"{impl}: {title}", fontsize=9)
        if len(columns) * len(graphs) <= 600:
            for (y, x), value in np.ndenumerate(np.array(grid, dtype=float)):
                if math.isfinite(value):
                    dark = abs(math.log2(value)) > 0.6 * limit if value > 0 else False
                    ax.text(x, y, f"{value:.2g}", ha="center", va="center", fontsize=5,
                            color="white" if dark else "black")
        colorbar = fig.colorbar(image, ax=ax, fraction=0.03)
        colorbar.set_label("log2 ratio (> 0: better than PyG)", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
