"""Partitioning data into clusters, and measuring how well clusters align with sources."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans


def fit_kmeans(
    x_train: np.ndarray, n_clusters: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """k-means on the training points only (no test leakage).

    Returns (centroids, train cluster ids). Other splits are assigned with
    `assign_to_centroids`.
    """
    flat = x_train.reshape(len(x_train), -1).astype(np.float64)
    if n_clusters > len(flat):
        raise ValueError(f"cannot form {n_clusters} clusters from {len(flat)} training samples")
    km = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit(flat)
    return km.cluster_centers_, km.labels_.astype(np.int64)


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
