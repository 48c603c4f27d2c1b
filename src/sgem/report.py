"""Plots drawn from a task and a search result."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from .data.task import ClusteredTask

EXPERT_COLOURS = ("tab:red", "tab:green", "tab:blue", "tab:orange", "tab:purple", "tab:brown")


def plot_routing_2d(
    task: ClusteredTask,
    assignment: np.ndarray,
    path: str | Path,
    architectures: list[str] | None = None,
    title: str | None = None,
) -> Path:
    """Three panels as in the paper's toy figure: classes, clusters, clusters by expert.

    In the last panel, clusters whose expert disagrees with the oracle (after the best
    relabelling) are circled in black.
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
