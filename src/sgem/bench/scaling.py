"""The scaling benchmark's pieces: one run in this process, the results file and its plot.

`benchmarks/scaling.py` runs a grid of (size, seed) pairs, each `one_run` in a fresh
subprocess (so the peak memory is the run's own), and appends the rows to a JSON file;
`plot` draws and tabulates every `scaling*.json` beside it.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def build(family: str, size: int, seed: int) -> tuple[Any, int]:
    """The task of a family at a size (toy: M clusters; mixture: K groups) and its K."""
    from ..data.toy import make_toy_task

    if family == "toy":
        task = make_toy_task(seed, n_per_cloud=50 * size, n_clusters=size, oracle="source")
        return task, 2
    if family == "mixture":
        from ..data.mixtures import make_mixture_task

        return make_mixture_task(seed, n_groups=size), size
    raise ValueError(f"unknown family {family!r}; expected toy or mixture")


def one_run(
    family: str, size: int, seed: int, overrides: dict[str, Any], keep_trace: bool
) -> dict[str, Any]:
    """One search + final MoE in this process; its row of the table."""
    import numpy as np
    import torch

    from ..methods.sgem import SgemMethod
    from ..run.pipeline import load_config
    from ..search.config import SearchConfig
    from ..space.registry import build_space

    t0 = time.perf_counter()
    cfg = load_config("toy")
    torch.set_num_threads(int(cfg["torch_threads"]))
    task, k = build(family, size, seed)
    t_task = time.perf_counter() - t0
    search_cfg = SearchConfig.from_dict({**cfg["search"], "n_experts": k, **overrides})
    space = build_space(cfg["space"])
    method = SgemMethod(search_cfg)
    budget = SgemMethod.budget_of(search_cfg, seed, space=space)
    t1 = time.perf_counter()
    trainer, found = method.search(task, budget)
    t_search = time.perf_counter() - t1
    t2 = time.perf_counter()
    report = method.final(task, budget, trainer, found).report
    t_final = time.perf_counter() - t2
    assert report is not None
    rep = report.to_json()
    iter_s = sum(r["seconds"] for r in found.trace)
    phases = getattr(found, "phases", None) or {}
    oracle = task.oracle_partition
    centroid_match = None
    if family == "toy":  # the paper's rule (centroid x < -2), for comparison
        from ..data.toy import ORACLE_X_BOUNDARY
        from ..metrics import partition_match

        rule = (task.centroids[:, 0] >= ORACLE_X_BOUNDARY).astype(np.int64)
        centroid_match = partition_match(found.assignment, rule)
    row = {
        "family": family,
        "size": size,  # the requested M (toy) or K (mixture); k-means may merge a cluster
        "M": int(task.n_clusters),
        "K": int(k),
        "seed": seed,
        "n_points": int(len(task.train.y) + len(task.val.y)),
        "oracle_match": found.oracle_match,  # vs the majority source of each cluster
        "centroid_rule_match": centroid_match,
        "test_accuracy": rep.get("test_accuracy"),
        "n_trained": int(found.n_trained),
        "trainings_by_phase": _by_phase(found.store),
        "seconds": {
            "task": round(t_task, 2),
            "search": round(t_search, 2),
            "em_iterations": round(iter_s, 2),
            "init_and_finalise": round(t_search - iter_s, 2),
            **{k2: round(v, 2) for k2, v in phases.items()},
            "final_moe": round(t_final, 2),
            "total": round(time.perf_counter() - t0, 2),
        },
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "match_by_iteration": [r["oracle_match"] for r in found.trace],
        "architectures": [a.key for a in found.architectures],
        "assignment": [int(v) for v in found.assignment],
        "oracle": None if oracle is None else [int(v) for v in np.asarray(oracle)],
        "overrides": overrides,
        "load": os.getloadavg(),
    }
    if keep_trace:
        row["trace"] = found.trace
        row["selection"] = found.selection
    return row


def _by_phase(store) -> dict:
    out: dict[str, int] = {}
    for obs in store.observations:
        out[obs.phase] = out.get(obs.phase, 0) + 1
    return out


def machine() -> dict[str, Any]:
    """CPUs, platform, Python and `uptime` (the load when the row was saved)."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
    }


def load_results(path: Path) -> dict[str, Any]:
    """The results file's content, or an empty one."""
    if path.exists():
        return json.loads(path.read_text())
    return {"runs": [], "machine": machine(), "complete": False}


def plot(path: Path) -> str:
    """scaling.png and scaling.md from every scaling*.json beside `path` (the hand-written
    findings of scaling.md kept); returns the table's lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    files = sorted(path.parent.glob("scaling*.json"))
    runs, machines = [], []
    for f in files:
        data = load_results(f)
        for r in data["runs"]:
            if "error" in r:
                continue
            if r["family"] == "toy":  # group by the requested M (a merged cluster: M - 1)
                r["M"] = min((20, 40, 80, 160), key=lambda v: abs(v - r["M"]))
            runs.append(r)
        machines.append(f"{f.name}: {data['machine']}")
    labels = sorted({r["label"] for r in runs})
    fig, axes = plt.subplots(2, 3, figsize=(14, 8))
    lines = [
        "| family | label | M | K | seeds | oracle 1.0 | mean match | mean acc | "
        "mean trainings | mean search s | peak MB |",
        "|" + "---|" * 11,
    ]
    for row_i, (family, xkey) in enumerate((("toy", "M"), ("mixture", "K"))):
        for label in labels:
            sel = [r for r in runs if r["family"] == family and r["label"] == label]
            xs = sorted({r[xkey] for r in sel})
            if not xs:
                continue
            stats = []
            for x in xs:
                group = [r for r in sel if r[xkey] == x]
                stats.append(
                    (
                        np.mean([r["oracle_match"] == 1.0 for r in group]),
                        np.mean([r["test_accuracy"] for r in group]),
                        np.mean([r["n_trained"] for r in group]),
                        np.mean([r["seconds"]["search"] for r in group]),
                    )
                )
                g = group
                lines.append(
                    f"| {family} | {label} | {g[0]['M']} | {g[0]['K']} | "
                    f"{sorted(r['seed'] for r in g)} | {sum(r['oracle_match'] == 1.0 for r in g)}"
                    f"/{len(g)} | {np.mean([r['oracle_match'] for r in g]):.2f} | "
                    f"{np.mean([r['test_accuracy'] for r in g]):.3f} | "
                    f"{np.mean([r['n_trained'] for r in g]):.0f} | "
                    f"{np.mean([r['seconds']['search'] for r in g]):.0f} | "
                    f"{max(r['peak_rss_mb'] for r in g):.0f} |"
                )
            s = np.array(stats)
            axes[row_i, 0].plot(xs, s[:, 0], "o-", label=f"{label} (oracle 1.0 rate)")
            axes[row_i, 0].plot(xs, s[:, 1], "s--", label=f"{label} (test acc)")
            axes[row_i, 1].plot(xs, s[:, 2], "o-", label=label)
            axes[row_i, 2].plot(xs, s[:, 3], "o-", label=label)
        for ax, title in zip(axes[row_i], ("quality", "trainings", "search seconds"), strict=True):
            ax.set_title(f"{family}: {title} vs {xkey}")
            ax.set_xlabel(xkey)
            ax.legend(fontsize=7)
            if xkey == "M":
                ax.set_xscale("log", base=2)
    fig.tight_layout()
    out = path.parent / "scaling"
    fig.savefig(out.with_suffix(".png"), dpi=100)
    md = out.with_suffix(".md")
    # the hand-written findings (everything from the first "## Findings" heading) are kept
    old = md.read_text() if md.exists() else ""
    findings = old[old.index("\n## Findings") :] if "\n## Findings" in old else ""
    md.write_text(
        "# Scaling benchmark: partial grid (what the time allowed)\n\n"
        "oracle 1.0 = runs whose partition equals the oracle (toy: majority source per "
        "cluster; see `make_toy_task(oracle=...)`).\n\n"
        + "\n".join(lines)
        + "\n\nMachines (uptime at the last saved run):\n\n"
        + "\n".join(f"- {m}" for m in machines)
        + "\n"
        + findings
    )
    return "\n".join(lines)
