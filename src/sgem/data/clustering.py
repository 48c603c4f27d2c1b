"""Partitioning data into clusters, and measuring how well clusters align with sources."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from ..errors import SgemUserError


def fit_kmeans(
    x_train: np.ndarray, n_clusters: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """k-means on the training points only (no test leakage).

    Returns (centroids, train cluster ids). Other splits are assigned with
    `assign_to_centroids`.
    """
    flat = x_train.reshape(len(x_train), -1).astype(np.float64)
    if n_clusters > len(flat):
        raise SgemUserError(
            f"cannot form {n_clusters} clusters from {len(flat)} training samples; use fewer "
            "clusters or more data"
        )
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


def merge_clusters_without_samples(
    z: dict[str, np.ndarray],
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
