"""Per-sample losses and their per-cluster bucketing (paper Definition 1)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def per_sample_nll(output: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    """Negative log-likelihood of each sample. `output` is the network's raw output."""
    if kind == "cross_entropy":
        return F.cross_entropy(output, target, reduction="none")
    raise ValueError(f"no per-sample NLL for loss kind {kind!r} yet")


def bucket_by_cluster(values: torch.Tensor, cluster: torch.Tensor, n_clusters: int) -> torch.Tensor:
    """Mean of `values` within each cluster (NaN for a cluster with no sample)."""
    sums = torch.zeros(n_clusters, dtype=values.dtype, device=values.device)
    sums.index_add_(0, cluster, values)
    counts = torch.bincount(cluster, minlength=n_clusters).to(values.dtype)
    return sums / counts


def region_loss(losses: np.ndarray, mask: np.ndarray, weights: np.ndarray) -> float:
    """Size-weighted average of per-cluster losses over the clusters in `mask` (eq. scalar_u)."""
    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        raise ValueError("region_loss needs a non-empty mask")
    w = np.asarray(weights, dtype=np.float64) * mask
    return float((w * losses).sum() / w.sum())
