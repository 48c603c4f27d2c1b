"""The cluster-representatives figure (paper figure svhn_reps) for image tasks.

One row per cluster: the cluster's medoid (its border coloured by the expert the routing
sends the cluster to), then the images nearest to the cluster mean. It shows at a glance
whether an expert specialises on one source (all digit rows red, all photo rows green).

Distances are taken in `features` when given (e.g. the embedding the clustering used),
otherwise in pixel space. Only the training split is drawn: that is what the clusters and
the routing were fitted on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..data.task import ClusteredTask

#: Expert colours: E0 red, E1 green as in the paper, then more distinct colours.
EXPERT_COLOURS = (
    "#d62728",
    "#2ca02c",
    "#1f77b4",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
)
MEDOID_SAMPLE = 400  # the medoid is searched among at most this many members (O(n^2))


def cluster_representatives(
    features: np.ndarray,
    cluster: np.ndarray,
    n_clusters: int,
    n_neighbours: int = 8,
    seed: int = 0,
) -> list[tuple[int, np.ndarray]]:
    """Per cluster, (medoid index, indices of the `n_neighbours` members nearest to the
    cluster mean, the medoid excluded). Indices refer to rows of `features`; a cluster
    without members gets (-1, empty)."""
    feats = np.asarray(features, dtype=np.float64).reshape(len(features), -1)
    cluster = np.asarray(cluster)
    if len(feats) != len(cluster):
        raise ValueError(
            f"features ({len(feats)} rows) and cluster ids ({len(cluster)}) must align"
        )
    rng = np.random.default_rng(seed)
    out: list[tuple[int, np.ndarray]] = []
    for m in range(n_clusters):
        members = np.flatnonzero(cluster == m)
        if members.size == 0:
            out.append((-1, np.zeros(0, dtype=np.int64)))
            continue
        pool = members
        if pool.size > MEDOID_SAMPLE:
            pool = np.sort(rng.choice(members, MEDOID_SAMPLE, replace=False))
        x = feats[pool]
        sq = (x * x).sum(1)
        d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0)
        medoid = int(pool[np.sqrt(d2).sum(1).argmin()])
        rest = members[members != medoid]
        dist = np.linalg.norm(feats[rest] - feats[members].mean(0), axis=1)
        out.append((medoid, rest[np.argsort(dist, kind="stable")[:n_neighbours]]))
    return out


def _to_hwc(img: np.ndarray) -> np.ndarray:
    """A CHW / HW / HWC image as float HWC in [0, 1] for imshow: as is when the pixels
    already lie in [0, 1] (sgem's default "unit" normalisation), else min-max per image."""
    img = np.asarray(img, dtype=np.float64)
    if img.ndim == 3 and img.shape[0] in (1, 3) and img.shape[-1] not in (1, 3):
        img = img.transpose(1, 2, 0)
    if img.ndim == 3 and img.shape[-1] == 1:
        img = img[..., 0]
    lo, hi = float(img.min()), float(img.max())
    if lo >= 0.0 and hi <= 1.0:
        return img
    return (img - lo) / (hi - lo) if hi > lo else np.zeros_like(img)


def plot_cluster_representatives(
    task: ClusteredTask,
    assignment: np.ndarray,
    path: str | Path,
    clusters: Sequence[int] | None = None,
    n_neighbours: int = 8,
    features: np.ndarray | None = None,
    expert_names: Sequence[str] | None = None,
    title: str | None = None,
    seed: int = 0,
) -> Path:
    """Draw the figure for `task`'s training split under the cluster -> expert `assignment`.

    Args:
        clusters: which clusters to draw, one row each (default: the first 15, as the paper).
        features: (n_train, d) features for distances (default: the pixels).
        expert_names: legend labels per expert (default "E0", "E1", ...).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    assignment = np.asarray(assignment, dtype=np.int64)
    if assignment.shape != (task.n_clusters,):
        raise ValueError(
            f"assignment must give one expert per cluster ({task.n_clusters}), got shape "
            f"{assignment.shape}"
        )
    if len(task.input_shape) not in (2, 3):
        raise ValueError(
            f"the representatives figure needs image inputs (C, H, W) or (H, W); task "
            f"{task.name!r} has inputs of shape {task.input_shape}"
        )
    x = task.train.x
    feats = x if features is None else np.asarray(features)
    if len(feats) != len(x):
        raise ValueError(f"features must have one row per training image ({len(x)})")
    rows = list(range(min(15, task.n_clusters))) if clusters is None else list(clusters)
    bad = [m for m in rows if not 0 <= m < task.n_clusters]
    if bad:
        raise ValueError(f"cluster ids {bad} outside 0..{task.n_clusters - 1}")
    reps = cluster_representatives(feats, task.train.cluster, task.n_clusters, n_neighbours, seed)
    n_experts = int(assignment.max()) + 1
    names = list(expert_names) if expert_names is not None else [f"E{k}" for k in range(n_experts)]
    colours = [EXPERT_COLOURS[k % len(EXPERT_COLOURS)] for k in range(n_experts)]

    cols = 1 + n_neighbours
    fig, axes = plt.subplots(
        len(rows), cols, figsize=(0.9 * cols + 0.8, 0.9 * len(rows) + 0.6), squeeze=False
    )
    for r, m in enumerate(rows):
        medoid, near = reps[m]
        for c in range(cols):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            idx = medoid if c == 0 else (int(near[c - 1]) if c - 1 < len(near) else -1)
            if idx < 0:
                ax.axis("off")
                continue
            img = _to_hwc(x[idx])
            ax.imshow(img, cmap="gray" if img.ndim == 2 else None, interpolation="nearest")
            for spine in ax.spines.values():
                if c == 0:
                    spine.set_edgecolor(colours[assignment[m]])
                    spine.set_linewidth(3.0)
                else:
                    spine.set_visible(False)
        axes[r, 0].set_ylabel(f"C{m}", rotation=0, labelpad=14, fontsize=8, va="center")
    handles = [Patch(color=colours[k], label=names[k]) for k in range(n_experts)]
    fig.legend(handles=handles, loc="upper right", ncol=n_experts, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9, x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_run_representatives(
    run_dir: str | Path,
    path: str | Path | None = None,
    task: ClusteredTask | None = None,
    result: dict | None = None,
    **kwargs,
) -> Path:
    """The figure for a run directory: its result.json routing, or `result` (a run that
    draws its figures before it writes result.json).

    The task is rebuilt from the run's config (`sgem.run.runconfig.build_task_from_config`, the
    same seed) unless given. Writes `cluster_representatives.png` in the run by default.
    """
    from ..run.rundir import RunDirectory

    rundir = RunDirectory(run_dir)
    result = rundir.read_result() if result is None else result
    if "routing" not in result:
        raise ValueError(f"{rundir.file('result.json')} has no 'routing' (expert per cluster)")
    if task is None:
        from ..run.runconfig import build_task_from_config

        run_cfg = rundir.read_config()["run"]
        task = build_task_from_config(run_cfg["task"], int(run_cfg["seed"]))
    match = result.get("oracle_match")
    title = f"{task.name}, seed {result.get('seed')}" + (
        f", source recovery {match:.0%}" if isinstance(match, float) else ""
    )
    kwargs.setdefault("title", title)
    out = Path(path) if path is not None else rundir.file("cluster_representatives.png")
    return plot_cluster_representatives(task, np.asarray(result["routing"]), out, **kwargs)
