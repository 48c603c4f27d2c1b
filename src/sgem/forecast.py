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
* `forecast_scores`: mean NLL, sample CRPS and closed-form CRPS of a network output;
* `seasonality`: GluonTS's default seasonal period of a frequency (for MASE);
* `mase_per_window`, `student_t_quantiles`, `quantile_loss_sums`: the pieces of
  `original_unit_scores`, which scores forecasts the way GluonTS / Chronos / fev report
  them (MASE and mean weighted quantile loss, in the series' original units, per domain);
* `relative_geomean`: per domain divided by a reference method's score (seasonal naive),
  then the geometric mean across domains (the Chronos / fev aggregate).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

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
    from scipy import special, stats  # here, not at import: workers need none of scipy.stats

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
    xq = np.stack([np.quantile(x, q, axis=0) for q in quantiles])
    return float(np.mean(quantile_loss_sums(xq, y, quantiles).sum(axis=1)) / denom)


def quantile_loss_sums(
    quantile_forecasts: ArrayLike, y: ArrayLike, quantiles: Sequence[float]
) -> np.ndarray:
    """GluonTS's QuantileLoss 2 |(y - x_q)(q - 1[y < x_q])| per level and per window.

    `quantile_forecasts` has shape (Q, n, ...) (level first, window second), `y` (n, ...);
    returns (Q, n): the loss summed over every axis after the window's. Dividing the sum
    over windows by sum |y| gives the weighted quantile loss of a level.
    """
    xq = _np(quantile_forecasts)
    if xq.ndim == 1:  # one scalar forecast per level
        xq = xq[:, None]
    y = np.broadcast_to(_np(y), xq.shape[1:])
    q = np.asarray(quantiles, dtype=np.float64).reshape((-1,) + (1,) * y.ndim)
    if len(q) != len(xq):
        raise ValueError(f"{len(xq)} quantile forecasts for {len(q)} levels")
    loss = 2.0 * np.abs((y - xq) * (q - (y < xq)))
    return loss.reshape(len(xq), len(y), -1).sum(axis=2)


#: The nine levels of the mean weighted quantile loss (GluonTS, Chronos, fev).
WQL_QUANTILES: tuple[float, ...] = tuple(float(q) for q in np.round(np.arange(0.1, 1.0, 0.1), 2))

#: GluonTS's default seasonalities (`gluonts.time_feature.get_seasonality`): base pandas
#: frequency -> period. Daily is 1 in GluonTS (AutoGluon and fev use 7); anything else
#: (seconds, yearly, ...) is 1.
GLUONTS_SEASONALITIES: dict[str, int] = {
    "T": 1440,
    "H": 24,
    "D": 1,
    "W": 1,
    "M": 12,
    "B": 5,
    "Q": 4,
}

#: the periods a classical forecaster models (`sgem.moe.classical.season_of`): GluonTS's,
#: but a day's week, as AutoGluon and Nixtla's examples give statsforecast, and a week's
#: year. AutoETS and AutoTheta test for the season themselves (AICc / a seasonality test)
#: and drop it where the data have none; given 1, they could not see a weekly cycle in
#: daily sales at all. Weekly: on 300 seeded weekly series with a yearly cycle AutoTheta's
#: MASE was 0.892 at season 1 and 0.734 at 52; on 300 random walks 0.446 at both. (AutoETS
#: cannot fit a season over 24: a combination's AutoETS takes it out by MSTL first,
#: `sgem.baselines.statistical.SeasonallyAdjustedAutoETS`.)
MODEL_SEASONALITIES: dict[str, int] = {**GLUONTS_SEASONALITIES, "D": 7, "W": 52}

#: Monash `@frequency` names -> pandas frequency strings (the archive's own FREQUENCY_MAP).
MONASH_FREQUENCIES: dict[str, str] = {
    "4_seconds": "4S",
    "minutely": "1T",
    "10_minutes": "10T",
    "half_hourly": "30T",
    "hourly": "1H",
    "daily": "1D",
    "weekly": "1W",
    "monthly": "1M",
    "quarterly": "1Q",
    "yearly": "1Y",
}

_PANDAS_ALIASES = {"MIN": "T", "H": "H", "D": "D", "W": "W", "M": "M", "ME": "M", "MS": "M"}


def seasonality(frequency: str | None, periods: dict[str, int] = GLUONTS_SEASONALITIES) -> int:
    """The MASE seasonal period of a frequency, by GluonTS's defaults (`periods`: another
    table of base frequency -> period, e.g. `MODEL_SEASONALITIES`).

    `frequency` is a Monash `@frequency` name ("hourly", "10_minutes", ...) or a pandas
    frequency string ("H", "2H", "30T", "1M", ...); None or an unknown name gives 1. A
    multiple divides the base period when it can ("2H" -> 12, "30T" -> 48), else 1, as in
    GluonTS.
    """
    if frequency is None:
        return 1
    f = MONASH_FREQUENCIES.get(str(frequency).strip().lower(), str(frequency).strip())
    digits = ""
    while f and f[0].isdigit():
        digits, f = digits + f[0], f[1:]
    n = int(digits) if digits else 1
    base = f.split("-")[0]
    base = _PANDAS_ALIASES.get(base.upper(), base.upper()) if base.upper() != "S" else "S"
    if base in ("QE", "QS"):
        base = "Q"
    period = periods.get(base, 1)
    if n < 1:
        return 1
    s, rest = divmod(period, n)
    return s if not rest and s >= 1 else 1


def seasonal_error(context: ArrayLike, season: int) -> np.ndarray:
    """Per window, mean |x_t - x_{t-m}| over the context (GluonTS's in-sample seasonal error).

    A season as long as the context or longer falls back to m = 1 (GluonTS does the same).
    `context` has shape (n, L).
    """
    x = _np(context)
    m = int(season) if 1 <= int(season) < x.shape[1] else 1
    return np.abs(x[:, m:] - x[:, :-m]).mean(axis=1)


def mase_per_window(
    point: ArrayLike, y: ArrayLike, context: ArrayLike, season: int | ArrayLike
) -> np.ndarray:
    """MASE of every window: mean |y - point| over the horizon / the context's seasonal
    error (`seasonal_error`); `season` is one period or one per window. Windows whose
    seasonal error is 0 (a constant context) read NaN: GluonTS drops such invalid values
    when it aggregates. Scale-free, so scaled and original units give the same value."""
    point, y, context = _np(point), _np(y), _np(context)
    seasons = np.broadcast_to(np.asarray(season, dtype=np.int64), (len(y),))
    err = np.empty(len(y))
    for m in np.unique(seasons):
        rows = seasons == m
        err[rows] = seasonal_error(context[rows], int(m))
    num = np.abs(y - point).reshape(len(y), -1).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(err > 0, num / np.where(err > 0, err, 1.0), np.nan)


def student_t_quantiles(
    loc: ArrayLike, scale: ArrayLike, df: ArrayLike, quantiles: Sequence[float] = WQL_QUANTILES
) -> np.ndarray:
    """Exact quantiles mu + sigma * t_nu^{-1}(q), shape (Q, *broadcast shape)."""
    from scipy import stats

    loc, scale, df = np.broadcast_arrays(_np(loc), _np(scale), _np(df))
    return np.stack([loc + scale * stats.t.ppf(q, df) for q in quantiles])


def original_unit_scores(
    output: torch.Tensor,
    context: ArrayLike,
    y: ArrayLike,
    scale: ArrayLike,
    source: ArrayLike | None = None,
    seasons: Sequence[int] | int = 1,
    quantiles: Sequence[float] = WQL_QUANTILES,
) -> dict:
    """MASE and mean weighted quantile loss of Student-t forecasts, in original units.

    `output` is (n, H, 3) in the per-window scaled units of `context` (n, L) and `y`
    (n, H); `scale` (n,) maps them back (raw = scaled * scale). The point forecast is the
    median (loc), the quantile forecasts the exact Student-t quantiles (`quantiles`, the
    nine levels 0.1..0.9 by default). Per domain (`source`; one domain if None):

    * MASE: the mean over windows of `mase_per_window`, the seasonal period of the domain
      being `seasons[domain]` (an int applies to every domain); windows with a constant
      context are skipped (`n_mase_skipped`);
    * wQL: mean over levels of sum 2|QL_q| / sum |y| over the domain's windows and steps,
      in original units (so a window counts by its magnitude, as in GluonTS).

    Returns {"mase", "wql"} over all windows (MASE: mean over windows; wQL pooled) and
    {"per_domain_mase", "per_domain_wql", "n_mase_skipped"} keyed by domain id. The
    seasonal error uses the context only (GluonTS uses the whole past of the series).
    """
    loc, sc, df = (a.numpy() for a in split_params(output.detach().double().cpu()))
    context, y, scale = _np(context), _np(y), _np(scale).reshape(-1)
    n = len(y)
    if not (len(context) == len(scale) == len(loc) == n):
        raise ValueError(
            f"output, context, y and scale must have the same number of windows, got "
            f"{len(loc)}, {len(context)}, {n} and {len(scale)}"
        )
    source = np.zeros(n, dtype=np.int64) if source is None else np.asarray(source).reshape(-1)
    domains = [int(d) for d in np.unique(source)]
    if isinstance(seasons, int | np.integer):
        season_of = {d: int(seasons) for d in domains}
    else:
        season_of = {d: int(seasons[d]) for d in domains}
    window_season = np.array([season_of[int(d)] for d in source], dtype=np.int64)
    mase = mase_per_window(loc, y, context.reshape(n, -1), window_season)
    raw_y = y * scale[:, None]
    xq = student_t_quantiles(loc, sc, df, quantiles) * scale[None, :, None]
    ql = quantile_loss_sums(xq, raw_y, quantiles)  # (Q, n)
    abs_y = np.abs(raw_y).sum(axis=1)

    def wql(rows: np.ndarray) -> float | None:
        denom = abs_y[rows].sum()
        return float(ql[:, rows].sum(axis=1).mean() / denom) if denom > 0 else None

    def mean_mase(rows: np.ndarray) -> float | None:
        vals = mase[rows]
        vals = vals[np.isfinite(vals)]
        return float(vals.mean()) if len(vals) else None

    every = np.ones(n, dtype=bool)
    return {
        "mase": mean_mase(every),
        "wql": wql(every),
        "per_domain_mase": {d: mean_mase(source == d) for d in domains},
        "per_domain_wql": {d: wql(source == d) for d in domains},
        "n_mase_skipped": {d: int((~np.isfinite(mase[source == d])).sum()) for d in domains},
    }


def relative_geomean(scores: dict, reference: dict) -> float | None:
    """Geometric mean over domains of score / reference score (the Chronos / fev relative
    aggregate; 1 = as good as the reference). Domains missing, None or non-positive in
    either are skipped; None if none is left."""
    ratios = []
    for d, v in scores.items():
        r = reference.get(d)
        if v is None or r is None or not (v > 0 and r > 0):
            continue
        ratios.append(math.log(v / r))
    return math.exp(sum(ratios) / len(ratios)) if ratios else None


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


def task_seasons(task) -> list[int] | int:
    """The MASE periods of a forecasting task's domains: `task.meta["seasonality"]` (one
    per domain id, e.g. set from the files' `@frequency` with `seasonality`), else 1."""
    seasons = task.meta.get("seasonality") if task.meta else None
    if seasons is None:
        return 1
    if isinstance(seasons, dict):
        names = task.meta.get("domain_names") or sorted(seasons)
        return [int(seasons[n]) for n in names]
    return [int(s) for s in seasons]


def task_test_scores(output: torch.Tensor, task) -> dict | None:
    """`original_unit_scores` of test forecasts of a forecasting task (None unless the task
    is "student_t" with per-window test scales in `meta["scale"]["test"]`), plus the
    per-window test NLL and closed-form CRPS (means over the horizon, scaled units) that
    paired window-level comparisons need, and the seasonal periods used."""
    if task.loss != "student_t" or not task.meta or "scale" not in task.meta:
        return None
    if "context" not in task.meta or task.test.x.ndim != 2:  # not a windowed forecasting task
        return None
    scale = task.meta["scale"].get("test") if isinstance(task.meta["scale"], dict) else None
    if scale is None or len(scale) != len(task.test.y):
        return None
    seasons = task_seasons(task)
    out = original_unit_scores(
        output,
        task.test.x.reshape(len(task.test.y), -1),
        task.test.y,
        scale,
        task.test.source,
        seasons,
    )
    loc, sc, df = split_params(output.detach().double().cpu())
    y = torch.as_tensor(_np(task.test.y))
    out["per_window_nll"] = student_t_nll(loc, sc, df, y).mean(dim=1).numpy().tolist()
    out["per_window_crps_closed_form"] = crps_student_t(loc, sc, df, y).mean(axis=1).tolist()
    out["mase_seasons"] = seasons
    return out
