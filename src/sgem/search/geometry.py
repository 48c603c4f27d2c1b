"""The geometry split: k-means of the clusters' centroids into K groups, no labels.

One place for it, because its users must agree exactly: the Geometry-routing baseline
routes by it, SGEM's return rule always has it as a finalist (`geometry_finalist`), so
the partition SGEM returns measures at least as well as the baseline's with the same
architectures, and the coarse-to-fine jumps (`geometric_jumps`) propose it. Centroids are
the task's `centroids`, else `meta["descriptor_centroids"]` (a time-series task clusters in
descriptor space), else the mean training input of each cluster; they are standardised per
feature before k-means.
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from ..data.task import ClusteredTask


def cluster_centroids(task: ClusteredTask) -> np.ndarray:
    """(M, d) centroid of every cluster, from the task or from its training inputs."""
    if task.centroids is not None:
        return np.asarray(task.centroids, dtype=np.float64)
    if task.meta.get("descriptor_centroids") is not None:
        return np.asarray(task.meta["descriptor_centroids"], dtype=np.float64)
    flat = task.train.x.reshape(len(task.train), -1).astype(np.float64)
    return np.stack([flat[task.train.cluster == m].mean(0) for m in range(task.n_clusters)])


def geometry_partition(task: ClusteredTask, n_experts: int, seed: int) -> np.ndarray:
    """k-means over the (standardised) cluster centroids into K groups."""
    return centroid_kmeans(cluster_centroids(task), n_experts, seed)


def centroid_kmeans(centroids: np.ndarray, n_experts: int, seed: int) -> np.ndarray:
    """k-means of (M, ...) centroids, standardised per feature, into K groups: per
    feature, so that no descriptor dominates the split by its units alone."""
    c = np.asarray(centroids, dtype=np.float64).reshape(len(centroids), -1)
    if n_experts > len(c):
        raise ValueError(f"cannot group {len(c)} clusters into {n_experts} experts")
    std = c.std(0)
    z = (c - c.mean(0)) / np.where(std > 1e-12, std, 1.0)
    km = KMeans(n_clusters=n_experts, n_init=10, random_state=seed).fit(z)
    return km.labels_.astype(np.int64)
