"""Student-t predictive distributions and forecasting scores (NLL, CRPS).

A forecaster of the time-series space (`sgem.space.timeseries`) returns, per forecast
step, a location-scale Student-t: loc mu, scale sigma > 0 and degrees of freedom nu > 2,
stacked on the last axis of a (batch, horizon, 3) tensor (`split_params`).

* `student_t_nll` (torch, differentiable): the negative log-density per element;
* `sample_student_t` (numpy): draws mu + sigma * T_nu;
* `crps_sample`: the sample-based CRPS E|X - y| - 1/2 E|X - X'| (the paper's metric),
  by sorting, in O(S log S) per element; the unbiased ("fair") estimator of E|X - X'|
  by default;
* `crps_student_t`: the closed-form CRPS of a location-scale Student-t (Jordan, Krüger
  and Lerch 2019, scoringRules `crps_t`);
* `weighted_quantile_loss`: GluonTS's normalised mean weighted quantile loss, which
  GluonTS reports as "CRPS" (mean_wQuantileLoss); it is not the CRPS above;
* `forecast_scores`: mean NLL, sample CRPS and closed-form CRPS of a network output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from scipy import special, stats

ArrayLike = np.ndarray | torch.Tensor | float | Sequence[float]


def split_params(output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loc, scale, df), each (batch, horizon), from a (batch, horizon, 3) output."""
    if output.ndim != 3 or output.shape[-1] != 3:
        raise ValueError(
            "a student_t output must have shape (batch, horizon, 3) holding (loc, scale, df), "
            f"got {tuple(output.shape)}"
        )
    return output[..., 0], output[..., 1], output[..., 2]


def student_t_nll(
    loc: torch.Tensor, scale: torch.Tensor, df: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """-log p(y) per element for a location-scale Student-t (broadcasting, differentiable).

    log p = lgamma((nu+1)/2) - lgamma(nu/2) - 1/2 log(nu pi) - log sigma
            - (nu+1)/2 log(1 + z^2 / nu),  z = (y - mu) / sigma.
    """
    z = (y - loc) / scale
    return (
        torch.lgamma(df / 2)
        - torch.lgamma((df + 1) / 2)
        + 0.5 * torch.log(df * math.pi)
        + torch.log(scale)
        + (df + 1) / 2 * torch.log1p(z * z / df)
    )


def _np(a: ArrayLike) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.detach().cpu().double().numpy()
    return np.asarray(a, dtype=np.float64)


def sample_student_t(
    loc: ArrayLike,
    scale: ArrayLike,
    df: ArrayLike,
    n_samples: int,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """`n_samples` draws of mu + sigma * T_nu, shape (n_samples, *broadcast shape)."""
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    rng = np.random.default_rng(rng)
    loc, scale, df = np.broadcast_arrays(_np(loc), _np(scale), _np(df))
    t = rng.standard_t(df, size=(n_samples, *loc.shape))
    return loc + scale * t


def crps_sample(samples: ArrayLike, y: ArrayLike, fair: bool = True) -> np.ndarray:
    """Sample CRPS per element: mean |x_i - y| - 1/2 * E|X - X'|, samples on axis 0.

    With the samples sorted, sum_{i<j} (x_(j) - x_(i)) = sum_i x_(i) (2i - S - 1)
    (i = 1..S), so E|X - X'| costs a sort. `fair=True` (default) divides the pair sum by
    S (S - 1), the unbiased estimator (the "fair" CRPS, unbiased for the CRPS of the
    distribution the samples come from); `fair=False` divides by S^2, which is the exact
    CRPS of the empirical distribution of the samples. `samples` has shape (S, *shape),
    `y` broadcasts against `shape`.
    """
    x = np.sort(_np(samples), axis=0)
    y = _np(y)
    s = x.shape[0]
    if s < 2 and fair:
        raise ValueError("the fair CRPS estimator needs at least 2 samples")
    abs_err = np.abs(x - y).mean(axis=0)
    weights = (2.0 * np.arange(1, s + 1) - s - 1).reshape((s,) + (1,) * (x.ndim - 1))
    pair_sum = 2.0 * (weights * x).sum(axis=0)  # sum over ordered pairs i != j of |x_i - x_j|
    spread = pair_sum / (s * (s - 1) if fair else s * s)
    return abs_err - 0.5 * spread


def crps_student_t(loc: ArrayLike, scale: ArrayLike, df: ArrayLike, y: ArrayLike) -> np.ndarray:
    """Closed-form CRPS of a location-scale Student-t, per element (broadcasting).

    For z = (y - mu) / sigma and the standard t with nu > 1 degrees of freedom (cdf F,
    density f):

        CRPS = sigma * [ z (2 F(z) - 1) + 2 f(z) (nu + z^2) / (nu - 1)
                         - 2 sqrt(nu) B(1/2, nu - 1/2) / ((nu - 1) B(1/2, nu/2)^2) ]

    (Jordan, Krüger and Lerch 2019, scoringRules `crps_t`). The beta-function term is
    evaluated in log space (stable for large nu). For nu <= 1 the CRPS is infinite (the
    mean does not exist): returns inf there.
    """
    loc, scale, df, y = np.broadcast_arrays(_np(loc), _np(scale), _np(df), _np(y))
    if (scale <= 0).any():
        raise ValueError("crps_student_t needs scale > 0")
    ok = df > 1
    nu = np.where(ok, df, 2.0)
    z = (y - loc) / scale
    first = z * (2.0 * stats.t.cdf(z, nu) - 1.0)
    second = 2.0 * stats.t.pdf(z, nu) * (nu + z * z) / (nu - 1.0)
    log_b = 0.5 * np.log(nu) + special.betaln(0.5, nu - 0.5) - 2.0 * special.betaln(0.5, nu / 2)
    third = 2.0 * np.exp(log_b) / (nu - 1.0)
    out = scale * (first + second - third)
    return np.where(ok, out, np.inf)


def weighted_quantile_loss(
    samples: ArrayLike,
    y: ArrayLike,
    quantiles: Sequence[float] = tuple(np.round(np.arange(0.1, 1.0, 0.1), 2)),
) -> float:
    """GluonTS's mean_wQuantileLoss: mean over levels q of 2 sum |QL_q| / sum |y|.

    QL_q = (y - x_q) (q - 1[y < x_q]) with x_q the empirical q-quantile of the samples
    (axis 0), summed over every element. A normalised approximation of the CRPS that
    GluonTS reports under the name "CRPS"; it is not `crps_sample`.
    """
    x = _np(samples)
    y = np.broadcast_to(_np(y), x.shape[1:])
    denom = np.abs(y).sum()
    if denom <= 0:
        raise ValueError("weighted_quantile_loss is undefined when sum |y| = 0")
    losses = []
    for q in quantiles:
        xq = np.quantile(x, q, axis=0)
        losses.append(2.0 * np.abs((y - xq) * (q - (y < xq))).sum() / denom)
    return float(np.mean(losses))


def forecast_scores(
    output: torch.Tensor,
    y: ArrayLike,
    n_samples: int = 100,
    rng: np.random.Generator | int | None = 0,
) -> dict[str, float]:
    """Mean NLL, sample CRPS (fair, `n_samples` draws) and closed-form CRPS of an output.

    `output` is a (batch, horizon, 3) forecaster output, `y` the (batch, horizon) targets;
    every score is the mean over all windows and steps, in the scaled units of `y`.
    """
    loc, scale, df = split_params(output.detach().double().cpu())
    y_t = torch.as_tensor(_np(y))
    nll = float(student_t_nll(loc, scale, df, y_t).mean())
    samples = sample_student_t(loc, scale, df, n_samples, rng)
    return {
        "nll": nll,
        "crps": float(crps_sample(samples, y_t.numpy()).mean()),
        "crps_closed_form": float(crps_student_t(loc, scale, df, y_t).mean()),
    }
