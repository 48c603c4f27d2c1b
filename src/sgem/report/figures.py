"""Plots drawn from a task and a search result, and the figures of a finished run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from ..data.task import ClusteredTask

if TYPE_CHECKING:
    from ..run.rundir import RunDirectory
    from ..search.sgem import SearchResult

log = logging.getLogger(__name__)

EXPERT_COLOURS = ("tab:red", "tab:green", "tab:blue", "tab:orange", "tab:purple", "tab:brown")


def plot_routing_2d(
    task: ClusteredTask,
    assignment: np.ndarray,
    path: str | Path,
    architectures: list[str] | None = None,
    title: str | None = None,
    fallback: list[int] | None = None,
) -> Path:
    """Three panels as in the paper's toy figure: classes, clusters, clusters by expert.

    In the last panel, clusters whose expert disagrees with the oracle (after the best
    relabelling) are circled in black, and clusters the saved model routes to the global
    network instead of their expert (`fallback`, the leaderboard's selective routing) are
    marked with a grey square.
    """
    x, y, c = task.train.x, task.train.y, task.train.cluster
    if x.shape[1] != 2:
        raise ValueError(f"plot_routing_2d needs 2-D inputs, got shape {x.shape}")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8), constrained_layout=True)
    axes[0].scatter(x[:, 0], x[:, 1], c=y, cmap="tab10", s=6, vmin=0, vmax=9)
    axes[0].set_title("data (colour = class)")
    axes[1].scatter(x[:, 0], x[:, 1], c=c, cmap="tab20", s=6)
    if task.centroids is not None:
        axes[1].scatter(*task.centroids.T, marker="x", c="black", s=40)
    axes[1].set_title(f"{task.n_clusters} k-means clusters")
    colours = np.array([EXPERT_COLOURS[k % len(EXPERT_COLOURS)] for k in assignment[c]])
    axes[2].scatter(x[:, 0], x[:, 1], c=colours, s=6)
    if task.centroids is not None:
        for m, (cx, cy) in enumerate(task.centroids):
            axes[2].annotate(str(m), (cx, cy), ha="center", va="center", fontsize=7)
        if task.oracle_partition is not None:
            wrong = _mismatched_clusters(assignment, task.oracle_partition)
            if wrong.size:
                axes[2].scatter(
                    *task.centroids[wrong].T,
                    s=300,
                    facecolors="none",
                    edgecolors="black",
                    linewidths=1.5,
                    label="differs from oracle",
                )
                axes[2].legend(loc="lower left", fontsize=8)
    if fallback and task.centroids is not None:
        axes[2].scatter(
            *task.centroids[np.asarray(fallback, dtype=int)].T,
            s=160,
            marker="s",
            facecolors="none",
            edgecolors="grey",
            linewidths=1.2,
            label="saved model: global network",
        )
    for k in np.unique(assignment):
        label = f"expert {k}" + (f": {architectures[k]}" if architectures else "")
        axes[2].scatter([], [], c=EXPERT_COLOURS[k % len(EXPERT_COLOURS)], label=label)
    axes[2].legend(loc="upper left", fontsize=7)
    axes[2].set_title(title or "routing: clusters coloured by expert")
    for ax in axes:
        ax.set_aspect("equal", adjustable="datalim")
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _mismatched_clusters(assignment: np.ndarray, oracle: np.ndarray) -> np.ndarray:
    from scipy.optimize import linear_sum_assignment

    k, g = assignment.max() + 1, oracle.max() + 1
    counts = np.zeros((k, g))
    np.add.at(counts, (assignment, oracle), 1)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    mapping = dict(zip(rows, cols, strict=True))
    return np.array([m for m, a in enumerate(assignment) if mapping.get(a) != oracle[m]], int)


def plot_convergence(trace: list[dict], path: str | Path, title: str | None = None) -> Path:
    """Per EM iteration: the objective under that iteration's surrogate, the measured
    objective where the incumbents were trained on their exact regions, and the oracle
    match where an oracle exists (paper appendix "Convergence of a single run").

    The surrogate objective is drawn as it was at each iteration; values from different
    iterations come from different surrogates and are not comparable in absolute terms.
    """
    if not trace:
        raise ValueError("the trace is empty: nothing to plot")
    it = np.array([row["iteration"] for row in trace])
    surrogate_obj = np.array([row["objective"] for row in trace], dtype=float)
    measured = np.array(
        [
            np.nan if row.get("measured_objective") is None else row["measured_objective"]
            for row in trace
        ],
        dtype=float,
    )
    fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
    ax.plot(it, surrogate_obj, "o-", label="objective J (surrogate of that iteration)")
    ax.plot(it, measured, "s--", label="measured J (incumbents on their regions)")
    jumps = [row["iteration"] for row in trace if (row.get("jump") or {}).get("accepted")]
    for j, t in enumerate(jumps):
        ax.axvline(
            t, color="grey", lw=0.8, ls=":", label="accepted partition jump" if j == 0 else None
        )
    ax.set_xlabel("EM iteration")
    ax.set_ylabel("objective (higher is better)")
    handles, labels = ax.get_legend_handles_labels()
    matches = [row.get("oracle_match") for row in trace]
    if any(m is not None for m in matches):
        ax2 = ax.twinx()
        ax2.plot(
            it,
            [np.nan if m is None else m for m in matches],
            "^-",
            color="tab:green",
            label="oracle match",
        )
        ax2.set_ylim(0, 1.05)
        ax2.set_ylabel("oracle match")
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, fontsize=8, loc="lower right")
    ax.set_title(title or "SGEM convergence")
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw_run_figures(
    rundir: RunDirectory,
    task: ClusteredTask,
    found: SearchResult,
    seed: int,
    images: bool,
    fallback: list[int] | None = None,
) -> None:
    """A finished run's figures in its directory: convergence.png, routing.png for a 2-D
    task (with `fallback`: the clusters the saved model sends to the global network),
    cluster_representatives.png for an image task (never fails the run)."""
    if found.trace:  # a time budget may end the search before its first iteration
        _never_fail(
            rundir,
            plot_convergence,
            found.trace,
            rundir.file("convergence.png"),
            title=f"SGEM, seed {seed}",
        )
    if task.input_shape == (2,):
        _never_fail(
            rundir,
            plot_routing_2d,
            task,
            found.assignment,
            rundir.file("routing.png"),
            architectures=[a.key for a in found.architectures],
            title=f"SGEM routing (seed {seed}, oracle match {found.oracle_match})",
            fallback=fallback,
        )
    if images:
        from .image_figures import plot_run_representatives

        result = {"routing": list(found.assignment), "oracle_match": found.oracle_match}
        _never_fail(
            rundir, plot_run_representatives, rundir.path, task=task, result=result | {"seed": seed}
        )


def _never_fail(rundir: RunDirectory, draw, *args, **kwargs) -> None:
    """Draw a figure; a figure must never fail a finished run (a warning instead)."""
    try:
        draw(*args, **kwargs)
    except Exception as exc:
        log.warning("could not draw %s for %s: %s", draw.__name__, rundir.path, exc)
