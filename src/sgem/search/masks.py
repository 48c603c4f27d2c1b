"""Cluster-mask samplers."""

from __future__ import annotations

import numpy as np


def log_uniform_size_mask(
    n_clusters: int, rng: np.random.Generator, min_size: int = 3
) -> np.ndarray:
    """A random mask whose size is log-uniform in [min_size, M].

    Including each cluster with probability 1/2 concentrates masks around M/2, so
    near-pure subsets are never seen; a log-uniform size puts real mass on small masks.
    """
    if min_size < 1 or n_clusters < 1:
        raise ValueError(f"need min_size >= 1 and n_clusters >= 1, got {min_size}, {n_clusters}")
    min_size = min(min_size, n_clusters)
    size = int(np.floor(np.exp(rng.uniform(np.log(min_size), np.log(n_clusters + 1)))))
    size = int(np.clip(size, min_size, n_clusters))
    mask = np.zeros(n_clusters, dtype=bool)
    mask[rng.choice(n_clusters, size=size, replace=False)] = True
    return mask


def bernoulli_masks(r: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n masks b ~ Bernoulli(r), shape (n, M), float."""
    return (rng.random((n, len(r))) < np.asarray(r)[None, :]).astype(np.float64)


def nonempty_bernoulli_mask(
    r: np.ndarray, rng: np.random.Generator, fallback: np.ndarray
) -> np.ndarray:
    """One b ~ Bernoulli(r) with at least one cluster (retries, then `fallback`)."""
    for _ in range(20):
        b = rng.random(len(r)) < r
        if b.any():
            return b
    return np.asarray(fallback, dtype=bool)


def geometric_mask(
    centroids: np.ndarray, rng: np.random.Generator, min_size: int = 3
) -> np.ndarray:
    """A ball in cluster-centroid space: a random anchor cluster and its nearest clusters,
    log-uniform in number in [min_size, M] (as `log_uniform_size_mask`).

    Clusters close in input space tend to want the same expert, so small balls are the
    near-pure masks that random subsets of many clusters almost never are (at M = 80 a
    random 5-cluster mask is pure with probability ~(1/2)^4)."""
    centroids = np.asarray(centroids, dtype=np.float64).reshape(len(centroids), -1)
    n_clusters = len(centroids)
    size = int(log_uniform_size_mask(n_clusters, rng, min_size).sum())
    anchor = int(rng.integers(n_clusters))
    distance = np.sum((centroids - centroids[anchor]) ** 2, axis=1)
    mask = np.zeros(n_clusters, dtype=bool)
    mask[np.argsort(distance, kind="stable")[:size]] = True
    return mask
