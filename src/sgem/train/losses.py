"""Per-sample losses and their per-cluster bucketing (paper Definition 1)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..forecast import split_params, student_t_nll


def per_sample_nll(output: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    """Negative log-likelihood of each sample, shape (batch,).

    cross_entropy: `output` holds the logits. student_t: `output` is (batch, horizon, 3),
    the constrained (loc, scale, df) per step (`sgem.space.timeseries`), `target` is
    (batch, horizon); the NLL is averaged over the horizon (mean NLL per step).
    """
    if kind == "cross_entropy":
        return F.cross_entropy(output, target, reduction="none")
    if kind == "student_t":
        loc, scale, df = split_params(output)
        if target.shape != loc.shape:
            raise ValueError(
                f"student_t targets must have shape (batch, horizon) = {tuple(loc.shape)}, "
                f"got {tuple(target.shape)}"
            )
        return student_t_nll(loc, scale, df, target.to(loc.dtype)).mean(-1)
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
