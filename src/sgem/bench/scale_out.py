"""The scale-out benchmark's pieces: its search settings, speed-ups and plot.

`benchmarks/scale_out.py` runs one SGEM search per (mode, worker count) on a local Ray with
a stand-in trainer that only takes time (`sgem.execution.latency.LatencyModel`); these turn its rows
into speed-ups over one worker, a table and a figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..search.config import SearchConfig
from ..surrogate import SurrogateConfig
from ..train import TrainConfig


def search_config(
    mode: str, iterations: int, batch: int, depth: int, first_epochs: int, refit_epochs: int
) -> SearchConfig:
    """The benchmark's search: small enough that the 1-worker runs stay short; mode
    "batch+pipeline" proposes `batch` candidates per round with pipeline depth `depth`."""
    extra: dict[str, Any] = (
        {"batch_size": batch, "pipeline": depth} if mode == "batch+pipeline" else {}
    )
    return SearchConfig(
        n_iterations=iterations,
        n_init=16,
        pool_size=100,
        mc_masks=8,
        routing_steps=20,
        explore_every=3,
        explore_groups=2,
        refit_budget=4,
        final_candidates=2,
        finalist_budget=1,
        # one candidate per Ray task (as on images, where nothing is vectorised)
        train=TrainConfig(batch_candidates=1),
        surrogate=SurrogateConfig(epochs_first=first_epochs, epochs_refit=refit_epochs),
        **extra,
    )


def add_speedups(rows: list[dict[str, Any]], modes: list[str]) -> dict[str, bool]:
    """Set each row's speed-up over the same mode's 1-worker run; per mode, whether every
    worker count made the same search (routing, cells, trainings per iteration)."""
    same = {}
    for mode in modes:
        sub = [r for r in rows if r["mode"] == mode]
        one = next((r for r in sub if r["workers"] == 1), None)
        for r in sub:
            r["speedup"] = round(one["wall_s"] / r["wall_s"], 2) if one else None
        same[mode] = all(r["search"] == sub[0]["search"] for r in sub)
    return same


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table, default mode first, by worker count."""
    lines = [
        "| mode | workers | wall (s) | speed-up | utilisation | trained |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["mode"] != "default", r["workers"])):
        lines.append(
            f"| {r['mode']} | {r['workers']} | {r['wall_s']} | {r['speedup']} | "
            f"{r['utilisation']} | {r['n_trained']} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Utilisation and speed-up against the worker count, per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_u, ax_s) = plt.subplots(1, 2, figsize=(9, 3.6))
    for mode, marker in (("default", "o"), ("batch+pipeline", "s")):
        sub = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["workers"])
        w = [r["workers"] for r in sub]
        ax_u.plot(w, [r["utilisation"] for r in sub], marker=marker, label=mode)
        ax_s.plot(w, [r["speedup"] for r in sub], marker=marker, label=mode)
    workers = sorted({r["workers"] for r in rows})
    ax_s.plot(workers, workers, "k:", label="ideal")
    ax_u.axhline(0.8, color="grey", lw=0.8, ls="--")
    for ax, name in ((ax_u, "worker utilisation"), (ax_s, "speed-up vs 1 worker")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(workers, [str(w) for w in workers])
        ax.set_xlabel("Ray workers")
        ax.set_title(name)
        ax.legend(fontsize=8)
    ax_u.set_ylim(0, 1.05)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
