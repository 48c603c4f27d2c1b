"""`ClusteredTask`: everything the search needs to know about a dataset, in one object.

The search never touches raw files and loaders never know about EM; this class is the
contract between the two. It is validated once, at construction, so that a problem in the
user's data (NaN, bad labels, an empty cluster) surfaces here with a clear message instead
of as a silent nonsense result an hour into a search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..errors import SgemUserError

LossKind = Literal["cross_entropy", "student_t"]

MIN_CLUSTERS = 3

#: Training runs in float32: a finite float64 beyond this would become inf there.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _first(indices: np.ndarray, k: int) -> str:
    shown = ", ".join(str(int(i)) for i in indices[:k])
    return shown + (", ..." if len(indices) > k else "")


def bad_values_report(x: np.ndarray) -> str | None:
    """None when every value of `x` (n_samples, ...) is finite and fits float32, else a
    sentence naming the problem, how many rows and which feature columns (flattened index
    per sample), with the first few of each. Integer and boolean arrays always pass."""
    n = x.shape[0] if x.ndim else 0
    if not n or not x.size or not np.issubdtype(x.dtype, np.floating):
        return None
    flat = x.reshape(n, -1)
    if not np.isfinite(flat).all():
        problem, bad = "NaN or inf", ~np.isfinite(flat)
    elif flat.dtype.itemsize > 4 and (flat.max() > FLOAT32_MAX or flat.min() < -FLOAT32_MAX):
        # float32 and narrower cannot exceed it; max/min avoid a copy of a large array
        problem = (
            f"values too large (|value| > {FLOAT32_MAX:.3g}, beyond float32, which training uses)"
        )
        bad = np.abs(flat) > FLOAT32_MAX
    else:
        return None
    rows = np.flatnonzero(bad.any(axis=1))
    cols = np.flatnonzero(bad.any(axis=0))
    return (
        f"{problem} in {len(rows)} sample(s) (rows {_first(rows, 5)}), in {len(cols)} "
        f"feature column(s) ({_first(cols, 10)})"
    )


@dataclass(frozen=True, eq=False)
class Split:
    """One of train / validation / test: features, targets, cluster id per sample.

    `source` is an optional ground-truth domain id per sample. It is never shown to the
    search; it only feeds purity and oracle-recovery reports.
    """

    x: np.ndarray
    y: np.ndarray
    cluster: np.ndarray
    source: np.ndarray | None = None

    def __post_init__(self) -> None:
        # accept lists and other array-likes; validation then sees real arrays
        for name in ("x", "y", "cluster", "source"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, np.ndarray):
                object.__setattr__(self, name, np.asarray(value))
        c = self.cluster
        if c is not None and c.size == 0 and not np.issubdtype(c.dtype, np.integer):
            object.__setattr__(self, "cluster", c.astype(np.int64))  # [] is float

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def subset(self, index: np.ndarray) -> Split:
        src = None if self.source is None else self.source[index]
        return Split(self.x[index], self.y[index], self.cluster[index], src)

    def joined(self, other: Split) -> Split:
        """This split's samples, then `other`'s (e.g. train + validation, as a refit sees
        them; `source` is kept only where both have it)."""
        both = self.source is not None and other.source is not None
        return Split(
            np.concatenate([self.x, other.x]),
            np.concatenate([self.y, other.y]),
            np.concatenate([self.cluster, other.cluster]),
            np.concatenate([self.source, other.source]) if both else None,
        )


@dataclass(frozen=True, eq=False)
class ClusteredTask:
    """A dataset partitioned into `n_clusters` clusters, split three ways.

    Attributes:
        name: short identifier, written to run directories.
        train, val, test: the three splits. The search uses train and val only; test is
            touched once, by the final evaluation.
        n_clusters: M, the number of clusters.
        loss: "cross_entropy" (classification, y in 0..n_classes-1) or "student_t".
        n_classes: number of classes for classification, else None.
        oracle_partition: optional ground-truth group per cluster (length M), used only to
            report how well the found routing recovers the known structure.
        centroids: optional (M, d) cluster centres, used for plots and to assign new data.
    """

    name: str
    train: Split
    val: Split
    test: Split
    n_clusters: int
    loss: LossKind = "cross_entropy"
    n_classes: int | None = None
    oracle_partition: np.ndarray | None = None
    centroids: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _validate_task(self)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.train.x.shape[1:])

    @property
    def cluster_sizes(self) -> np.ndarray:
        """|C_m| over the training split: the weights of the cluster-aware objective."""
        return np.bincount(self.train.cluster, minlength=self.n_clusters)

    @property
    def val_cluster_sizes(self) -> np.ndarray:
        return np.bincount(self.val.cluster, minlength=self.n_clusters)

    def summary(self) -> str:
        sizes = self.cluster_sizes
        return (
            f"{self.name}: {len(self.train)} train / {len(self.val)} val / {len(self.test)} test, "
            f"M={self.n_clusters} clusters (train sizes {sizes.min()}..{sizes.max()}), "
            f"loss={self.loss}" + (f", {self.n_classes} classes" if self.n_classes else "")
        )


def _validate_task(task: ClusteredTask) -> None:
    m = task.n_clusters
    if not isinstance(m, int | np.integer) or m < MIN_CLUSTERS:
        raise SgemUserError(
            f"n_clusters must be an integer >= {MIN_CLUSTERS} (got {m!r}): SGEM routes clusters "
            "to experts, and with fewer than 3 clusters there is no routing to search. "
            "Use more clusters (e.g. n_clusters=20)."
        )
    if task.loss not in ("cross_entropy", "student_t"):
        raise SgemUserError(f"loss must be 'cross_entropy' or 'student_t', got {task.loss!r}")
    for name in ("train", "val", "test"):
        _validate_split(getattr(task, name), name, task)
    if task.loss == "cross_entropy":
        if not isinstance(task.n_classes, int | np.integer) or task.n_classes < 2:
            raise SgemUserError(
                f"a classification task needs n_classes >= 2 (got {task.n_classes!r}); pass "
                "n_classes=..., or build the task with sgem.build_task, which infers it"
            )
        for name in ("train", "val", "test"):
            split = getattr(task, name)
            if len(split) == 0:
                continue
            lo, hi = int(split.y.min()), int(split.y.max())
            if lo < 0 or hi >= task.n_classes:
                raise SgemUserError(
                    f"{name} labels must lie in 0..{task.n_classes - 1} (n_classes="
                    f"{task.n_classes}), found {lo}..{hi}. Re-encode labels, e.g. with "
                    "np.unique(y, return_inverse=True)."
                )
    train_counts = task.cluster_sizes
    val_counts = task.val_cluster_sizes
    for counts, split in ((train_counts, "training"), (val_counts, "validation")):
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            raise SgemUserError(
                f"cluster(s) {empty.tolist()} have no {split} samples. Every cluster needs "
                f"{split} data: the surrogate's targets are per-cluster validation losses. "
                "Use fewer clusters, a larger validation fraction, or merge small clusters."
            )
    if task.oracle_partition is not None and len(task.oracle_partition) != m:
        raise SgemUserError(
            f"oracle_partition has length {len(task.oracle_partition)}, expected one group "
            f"per cluster ({m})."
        )


def _validate_split(split: Split, name: str, task: ClusteredTask) -> None:
    x, y, c = split.x, split.y, split.cluster
    if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and isinstance(c, np.ndarray)):
        raise SgemUserError(f"{name}: x, y and cluster must be arrays (cluster: one id per sample)")
    if x.ndim < 2:
        raise SgemUserError(f"{name}: x must have shape (n_samples, ...features), got {x.shape}")
    n = x.shape[0]
    if y.ndim == 0 or c.ndim == 0 or y.shape[0] != n or c.shape != (n,):
        raise SgemUserError(
            f"{name}: x, y and cluster ids must have the same number of samples, got "
            f"x {x.shape}, y {y.shape}, cluster {c.shape}"
        )
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_) or np.iscomplexobj(x):
        raise SgemUserError(
            f"{name}: x must hold real numbers, got dtype {x.dtype}. Encode text or "
            "categorical columns as numbers (e.g. one-hot) first."
        )
    report = bad_values_report(x)
    if report is not None:
        fix = (
            "Impute or drop them"
            if report.startswith("NaN")
            else "Rescale or standardise the features"
        )
        raise SgemUserError(f"{name}: x contains {report}. {fix} before building the task.")
    if task.loss == "cross_entropy" and n and not np.issubdtype(y.dtype, np.integer):
        raise SgemUserError(f"{name}: classification labels must be integers, got dtype {y.dtype}")
    if task.loss == "student_t" and n:
        if not np.issubdtype(y.dtype, np.number) or np.iscomplexobj(y):
            raise SgemUserError(f"{name}: targets must be real numbers, got dtype {y.dtype}")
        report = bad_values_report(y.reshape(n, -1))
        if report is not None:
            raise SgemUserError(
                f"{name}: targets contain {report.replace('feature column', 'target column')}"
            )
    if n and not np.issubdtype(c.dtype, np.integer):
        raise SgemUserError(
            f"{name}: cluster ids must be integers, got dtype {c.dtype}; pass them as "
            "integer ids 0..M-1 (e.g. np.unique(ids, return_inverse=True)[1])"
        )
    if n and (c.min() < 0 or c.max() >= task.n_clusters):
        raise SgemUserError(
            f"{name}: cluster ids must lie in 0..{task.n_clusters - 1}, found "
            f"{int(c.min())}..{int(c.max())}"
        )
