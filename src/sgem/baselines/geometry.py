"""Geometry routing: clusters grouped by k-means over their centroids, K copies of the
best single cell.

Routing by where clusters lie in feature space, not by how well an expert fits them: the
baseline that likelihood-driven routing must beat. Cluster centroids are the task's
`centroids`, else `meta["descriptor_centroids"]` (the time-series task clusters in
descriptor space), else the mean training input of each cluster; they are standardised
per feature before k-means.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.cluster import KMeans

from ..data.task import ClusteredTask
from .base import BaselineSetup, best_single_architecture, cluster_moe_result


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
    c = cluster_centroids(task)
    if n_experts > len(c):
        raise ValueError(f"cannot group {len(c)} clusters into {n_experts} experts")
    std = c.std(0)
    z = (c - c.mean(0)) / np.where(std > 1e-12, std, 1.0)
    km = KMeans(n_clusters=n_experts, n_init=10, random_state=seed).fit(z)
    return km.labels_.astype(np.int64)


class GeometryRouting:
    """k-means over cluster centroids to K groups; K copies of the best single cell."""

    name = "geometry"
    uses_domain_labels = False

    def fit_evaluate(self, task: ClusteredTask, setup: BaselineSetup, seed: int) -> dict:
        start = time.perf_counter()
        arch, n_trained = best_single_architecture(task, setup, seed)
        assignment = geometry_partition(task, setup.n_experts, seed)
        return cluster_moe_result(
            self.name, task, setup, assignment, [arch] * setup.n_experts, seed, n_trained, start
        )
