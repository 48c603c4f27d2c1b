"""Exploration of the mask space (paper appendix "Exploration Mechanisms in SGEM").

All three mechanisms read only the search's own observations, never domain labels:
cluster affinities -> exploration masks and candidate partitions (jumps); the jump is
accepted on *measured* objective only, so a mis-calibrated surrogate can waste budget but
cannot move the routing to a worse partition.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import AgglomerativeClustering


def residual_profiles(losses: np.ndarray, clip: float | None = None) -> np.ndarray:
    """Cluster x observation matrix of losses with each observation's mean removed.

    `losses` is (S, M) (one row per observation). Removing the observation (column) mean
    takes out the global strength of an architecture, leaving how each cluster *reacts*.
    """
    y = np.asarray(losses, dtype=np.float64)
    if clip is not None:
        y = np.minimum(y, clip)
    y = y.T  # (M, S)
    return y - y.mean(axis=0, keepdims=True)


def affinity_groups(losses: np.ndarray, n_groups: int, clip: float | None = None) -> np.ndarray:
    """Group clusters whose residual profiles correlate (agglomerative, average linkage).

    Returns a group label per cluster (length M).
    """
    profiles = residual_profiles(losses, clip)
    m = profiles.shape[0]
    n_groups = int(min(max(n_groups, 1), m))
    if n_groups == 1:
        return np.zeros(m, dtype=np.int64)
    centred = profiles - profiles.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(centred, axis=1, keepdims=True)
    unit = centred / np.where(norms > 0, norms, 1.0)
    corr = np.clip(unit @ unit.T, -1.0, 1.0)
    distance = 1.0 - corr
    np.fill_diagonal(distance, 0.0)
    model = AgglomerativeClustering(n_clusters=n_groups, metric="precomputed", linkage="average")
    return model.fit_predict(distance).astype(np.int64)


def align_labels(proposal: np.ndarray, current: np.ndarray, n_experts: int) -> np.ndarray:
    """Relabel a proposed partition so that its regions overlap most with the current
    experts' regions (Hungarian), keeping each expert's incumbent architecture meaningful."""
    overlap = np.zeros((n_experts, n_experts))
    np.add.at(overlap, (proposal, current), 1)
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    mapping = np.empty(n_experts, dtype=np.int64)
    mapping[rows] = cols
    return mapping[proposal]


def hard_logits(assignment: np.ndarray, n_experts: int, confidence: float = 0.9) -> np.ndarray:
    """Routing logits whose softmax puts `confidence` on the assigned expert."""
    rest = (1.0 - confidence) / max(n_experts - 1, 1)
    logits = np.full((len(assignment), n_experts), np.log(rest))
    logits[np.arange(len(assignment)), assignment] = np.log(confidence)
    return logits
