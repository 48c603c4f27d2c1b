"""Partitioning data into clusters, and measuring how well clusters align with sources.

`cluster_splits` is the one clustering path of every task builder (tabular, image,
forecasting): k-means on the training split only, nearest-centroid assignment of the other
splits, then the one policy for clusters that cannot be searched over. That policy: a
cluster left without training or without validation samples is merged (its centroid is
dropped and every sample re-assigned to the nearest remaining centroid, emptiest first,
`merge_clusters_without_samples`), so a task may have fewer clusters than requested; where
fewer than `MIN_CLUSTERS` are left, equal-count clusters along the first principal component
are tried instead (`balanced_centroids`), and fewer than that left is a `SgemUserError`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans

from ..errors import SgemUserError
from .task import MIN_CLUSTERS

log = logging.getLogger(__name__)

#: k-means's centroids are fitted on at most this many values (training points x features):
#: a seeded random sample of the points beyond it, every point then goes to its nearest
#: centroid. Why: on a 160 000-row table of 39 columns, ten k-means runs on every row took
#: 47 s of a 2-minute budget, and the fit then had no time left for its search
KMEANS_MAX_VALUES = 1_500_000
#: ... and its restarts (at most 10, at least 1) on at most this many values in all. Why: on
#: 54 unclustered features, 10 restarts on the 27 000-point sample took 6-12 s of a 3-minute
#: budget (about 250 Lloyd iterations each); the best of 3 had the same inertia, 1 had 0.06 % more
KMEANS_RESTART_VALUES = 3_000_000


def fit_kmeans(
    x_train: np.ndarray, n_clusters: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """k-means on the training points only (no test leakage); beyond `KMEANS_MAX_VALUES`,
    on a seeded sample of them.

    Returns (centroids, train cluster ids). Other splits are assigned with
    `assign_to_centroids`.
    """
    flat = x_train.reshape(len(x_train), -1).astype(np.float64)
    if n_clusters > len(flat):
        raise SgemUserError(
            f"cannot form {n_clusters} clusters from {len(flat)} training samples; use fewer "
            "clusters or more data"
        )
    most = max(KMEANS_MAX_VALUES // max(flat.shape[1], 1), 100 * n_clusters)
    fit_on = flat
    if len(flat) > most:
        fit_on = flat[np.random.default_rng(seed).choice(len(flat), most, replace=False)]
    restarts = int(np.clip(KMEANS_RESTART_VALUES // max(fit_on.size, 1), 1, 10))
    km = KMeans(n_clusters=n_clusters, n_init=restarts, random_state=seed).fit(fit_on)
    ids = km.labels_ if fit_on is flat else assign_to_centroids(flat, km.cluster_centers_)
    return km.cluster_centers_, ids.astype(np.int64)


def balanced_centroids(x_train: np.ndarray, n_clusters: int) -> np.ndarray:
    """Centroids of `n_clusters` equal-count slices of the training points along their first
    principal component: clusters of comparable size, where k-means left fewer than
    `MIN_CLUSTERS` with validation samples. Why: on a skewed table (235 households' income
    and food spending) k-means gave the few richest a cluster of their own, no validation
    row fell in it, and a default `sgem fit` stopped with an error."""
    flat = x_train.reshape(len(x_train), -1).astype(np.float64)
    centred = flat - flat.mean(0)
    step = -(-centred.size // KMEANS_MAX_VALUES)  # (the direction from every step-th point)
    _, _, vt = np.linalg.svd(centred[::step], full_matrices=False)
    order = np.argsort(centred @ vt[0], kind="stable")
    return np.stack([flat[part].mean(0) for part in np.array_split(order, n_clusters)])


def assign_to_centroids(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Nearest-centroid assignment (squared Euclidean), chunked to bound memory."""
    flat = x.reshape(len(x), -1).astype(np.float64)
    out = np.empty(len(flat), dtype=np.int64)
    c_sq = (centroids**2).sum(1)
    for start in range(0, len(flat), 8192):
        chunk = flat[start : start + 8192]
        d = c_sq[None, :] - 2.0 * chunk @ centroids.T
        out[start : start + 8192] = d.argmin(1)
    return out


def merge_clusters_without_samples(
    z: Mapping[str, np.ndarray],
    centroids: np.ndarray,
    ids: dict[str, np.ndarray],
    required: tuple[str, ...] = ("train", "val"),
) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
    """Drop centroids until every cluster has samples in each `required` split.

    A cluster without validation samples has no target for the surrogate, so it cannot be
    searched over. The emptiest offending cluster goes first; all splits (`z`: embeddings by
    split, `ids`: their cluster ids) are re-assigned to the remaining centroids after each
    drop. Returns (centroids, ids, number merged); unchanged when nothing is short.
    """
    merged = 0
    while len(centroids) > 1:
        m = len(centroids)
        counts = {s: np.bincount(ids[s], minlength=m) for s in required}
        short = np.zeros(m, dtype=bool)
        for c in counts.values():
            short |= c == 0
        if not short.any():
            break
        order = np.lexsort((counts[required[0]], ~short))
        centroids = np.delete(centroids, order[0], axis=0)
        ids = {s: assign_to_centroids(v, centroids) for s, v in z.items()}
        merged += 1
    return centroids, ids, merged


def cluster_purity(cluster: np.ndarray, source: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per cluster, the fraction of its samples that come from its majority source."""
    purity = np.zeros(n_clusters)
    for m in range(n_clusters):
        src = source[cluster == m]
        if src.size:
            purity[m] = np.bincount(src).max() / src.size
    return purity


def majority_source_partition(
    cluster: np.ndarray, source: np.ndarray, n_clusters: int
) -> np.ndarray:
    """Oracle partition: each cluster labelled with its majority source."""
    groups = np.zeros(n_clusters, dtype=np.int64)
    for m in range(n_clusters):
        src = source[cluster == m]
        if src.size:
            groups[m] = np.bincount(src).argmax()
    return groups


@dataclass(frozen=True, eq=False)
class ClusterSplits:
    """What `cluster_splits` found: the cluster id of every sample per split, and why M
    may be smaller than requested.

    `purity` (training split, per cluster) and `oracle_partition` (majority training
    source per cluster) are None when no sources were given.
    """

    ids: dict[str, np.ndarray]
    centroids: np.ndarray
    n_requested: int
    merged: int
    source: dict[str, np.ndarray] | None = None
    purity: np.ndarray | None = None
    oracle_partition: np.ndarray | None = None
    #: the clusters are `balanced_centroids`' equal-count ones (k-means left too few)
    equal_count: bool = False

    @property
    def n_clusters(self) -> int:
        """M after merging."""
        return len(self.centroids)

    def mean_purity(self, split: str) -> float | None:
        """Mean purity over the clusters present in `split` (None without sources or samples)."""
        if self.source is None:
            return None
        m = self.n_clusters
        p = cluster_purity(self.ids[split], self.source[split], m)
        present = np.bincount(self.ids[split], minlength=m) > 0
        return float(p[present].mean()) if present.any() else None


def cluster_splits(
    z: Mapping[str, np.ndarray],
    n_clusters: int,
    seed: int,
    *,
    source: Mapping[str, np.ndarray] | None = None,
    what: str = "samples",
    fix: str = "use fewer clusters, more data, or a larger validation fraction",
) -> ClusterSplits:
    """Cluster the splits of `z` (features by split name, "train" and "val" required).

    k-means (`fit_kmeans`, `seed`) sees the training split only; every other split goes to
    the nearest centroid; clusters without training or validation samples are merged (the
    module's policy). `source` (ids by split, optional) only feeds purity and the oracle
    partition. `what` names the samples and `fix` the remedy in the error raised when fewer
    than `MIN_CLUSTERS` clusters are left.
    """
    centroids, train_ids = fit_kmeans(z["train"], n_clusters, seed=seed)
    ids = {s: assign_to_centroids(v, centroids) for s, v in z.items() if s != "train"}
    ids = {"train": train_ids, **ids}
    centroids, ids, merged = merge_clusters_without_samples(z, centroids, ids)
    equal_count = False
    if len(centroids) < MIN_CLUSTERS:  # k-means gave outliers clusters of their own
        even = balanced_centroids(z["train"], n_clusters)
        even_ids = {s: assign_to_centroids(v, even) for s, v in z.items()}
        even, even_ids, even_merged = merge_clusters_without_samples(z, even, even_ids)
        if len(even) > len(centroids):
            log.warning(
                "k-means left %d of %d clusters with training and validation %s (outliers in "
                "one of their own); using %d equal-count clusters along the data's first "
                "principal component instead",
                len(centroids), n_clusters, what, len(even),
            )  # fmt: skip
            centroids, ids, merged, equal_count = even, even_ids, even_merged, True
    m = len(centroids)
    if m < MIN_CLUSTERS:
        raise SgemUserError(
            f"only {m} of the {n_clusters} k-means clusters kept training and validation "
            f"{what} after merging ({len(z['val'])} validation {what}); {fix}"
        )
    purity = oracle = None
    src = None
    if source is not None:
        src = dict(source)
        purity = cluster_purity(ids["train"], src["train"], m)
        oracle = majority_source_partition(ids["train"], src["train"], m)
    return ClusterSplits(ids, centroids, int(n_clusters), merged, src, purity, oracle, equal_count)
