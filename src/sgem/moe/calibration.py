"""Calibrated intervals and probabilities, and the numbers that say how calibrated they are.

Why: a network fitted by maximum likelihood on a few hundred rows is overconfident (80 %
intervals covered 0.43-0.50 of small tables' holdout targets). Both corrections below are
fitted on out-of-sample predictions of the validation split (where those come from:
`sgem.final.calibration`) and stored as plain numbers in model.json.

Intervals: split conformal on the Student-t quantiles, scale-relative CQR (Romano et al.
2019). For a central level L the raw interval is [lo, hi] = loc + scale * t_df^-1((1 -/+ L)
/ 2); a validation sample's score is max(lo - y, y - hi) / scale; the correction Q(L) is the
ceil((n + 1) L)-th smallest of n scores, and [lo - Q scale, hi + Q scale] then covers a new
exchangeable sample with probability >= L. The score is relative to the predicted scale, so
one correction serves windows and series of any size and keeps wide intervals wide. Each
cluster with at least `min_count` validation samples gets its own correction (where its
count reaches the level's rank); the others share the pooled one, fitted on their own
samples when those are at least `min_count`, else on all. Corrections are fitted on
a grid of levels; quantile q uses the level |2q - 1| (linear interpolation, 0 at the median:
the median is left as is), and the quantiles asked for are sorted per sample afterwards so
they never cross.

Probabilities: one temperature T (Guo et al. 2017) and a floor e, fitted together to
minimise the validation NLL of (1 - e) softmax(logits / T) + e / C (C classes). Neither
changes the argmax, so accuracy is unchanged. The floor says how often the network is
certain and wrong: an expert owns whole clusters and can give a row of a class its clusters
never had a probability near 0, which one temperature can only answer by flattening every
row. It is at least `MIN_FLOOR`, which caps one row's NLL at log(C / `MIN_FLOOR`).

Support: a target that never went below 0 in training (or never above 0) keeps its
predictions and quantiles on that side of 0 (values beyond are clipped to 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

from ..errors import SgemUserError

#: central interval levels the corrections are fitted on
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98)
#: validation samples a cluster needs for a correction of its own
MIN_COUNT = 30
#: bins of the expected calibration error
ECE_BINS = 15


def interval_scores(
    y: np.ndarray, loc: np.ndarray, scale: np.ndarray, df: np.ndarray, level: float
) -> np.ndarray:
    """Scale-relative CQR conformity scores of the raw central `level` interval: how far
    (in predicted scales) each target lies outside it (negative: inside)."""
    half = stats.t.ppf(0.5 + level / 2, df)
    return np.abs(np.asarray(y, dtype=np.float64) - loc) / scale - half


def conformal_quantile(scores: np.ndarray, level: float) -> float:
    """The ceil((n + 1) level)-th smallest score (the largest when n is too small for that
    rank: then the guarantee is only approximate)."""
    s = np.sort(np.asarray(scores, dtype=np.float64).ravel())
    k = int(np.ceil((len(s) + 1) * level))
    # a hair more, so the sample at the rank stays inside after float rounding
    return float(s[min(k, len(s)) - 1]) + 1e-9


def _rank_fits(n: int, level: float) -> bool:
    return int(np.ceil((n + 1) * level)) <= n


@dataclass(frozen=True)
class IntervalCalibration:
    """Conformal corrections Q(level) in predicted scales: pooled, and per cluster (a row
    of NaN where the cluster falls back to the pooled value)."""

    levels: tuple[float, ...]
    pooled: tuple[float, ...]
    per_cluster: dict[int, tuple[float, ...]] = field(default_factory=dict)
    min_count: int = MIN_COUNT

    @classmethod
    def fit(
        cls,
        y: np.ndarray,
        loc: np.ndarray,
        scale: np.ndarray,
        df: np.ndarray,
        cluster: np.ndarray,
        levels: Sequence[float] = LEVELS,
        min_count: int = MIN_COUNT,
    ) -> IntervalCalibration:
        """Fit on validation outputs: `y`, `loc`, `scale`, `df` of shape (n, ...) (a
        horizon per sample for forecasts), `cluster` (n,)."""
        y, loc, scale, df = (np.asarray(a, dtype=np.float64) for a in (y, loc, scale, df))
        cluster = np.asarray(cluster)
        if len(y) == 0:
            raise ValueError("calibration needs at least one validation sample")
        scores = {lv: interval_scores(y, loc, scale, df, lv).reshape(len(y), -1) for lv in levels}
        per_cluster: dict[int, tuple[float, ...]] = {}
        for c in np.unique(cluster):
            sel = cluster == c
            if sel.sum() < min_count:
                continue
            row = tuple(
                conformal_quantile(scores[lv][sel], lv)
                if _rank_fits(scores[lv][sel].size, lv)
                else float("nan")
                for lv in levels
            )
            per_cluster[int(c)] = row
        # the pooled correction serves the other clusters: fitted on their samples (so it
        # covers them, not a mix dominated by the large clusters) when they are enough
        rest = ~np.isin(cluster, list(per_cluster))
        rest = rest if rest.sum() >= min_count else np.ones(len(y), dtype=bool)
        pooled = tuple(conformal_quantile(scores[lv][rest], lv) for lv in levels)
        return cls(tuple(float(v) for v in levels), pooled, per_cluster, min_count)

    def correction(self, level: float, cluster: np.ndarray) -> np.ndarray:
        """Q(level) per sample (its cluster's, else the pooled one), interpolated between
        the fitted levels, 0 at level 0, held constant above the largest."""
        grid = np.r_[0.0, self.levels]
        pooled = float(np.interp(level, grid, np.r_[0.0, self.pooled]))
        out = np.full(len(cluster), pooled)
        for c, row in self.per_cluster.items():
            own = np.where(np.isnan(row), self.pooled, row)
            out[np.asarray(cluster) == c] = float(np.interp(level, grid, np.r_[0.0, own]))
        return out

    def to_json(self) -> dict:
        return {
            "levels": list(self.levels),
            "pooled": list(self.pooled),
            # NaN is not JSON: a missing level of a cluster is written as null
            "per_cluster": {
                str(c): [None if np.isnan(v) else v for v in row]
                for c, row in self.per_cluster.items()
            },
            "min_count": self.min_count,
        }

    @classmethod
    def from_json(cls, doc: dict) -> IntervalCalibration:
        per = {
            int(c): tuple(float("nan") if v is None else float(v) for v in row)
            for c, row in doc.get("per_cluster", {}).items()
        }
        return cls(
            tuple(float(v) for v in doc["levels"]),
            tuple(float(v) for v in doc["pooled"]),
            per,
            int(doc.get("min_count", MIN_COUNT)),
        )


def t_quantiles(
    loc: np.ndarray,
    scale: np.ndarray,
    df: np.ndarray,
    quantiles: Sequence[float],
    cluster: np.ndarray | None = None,
    calibration: IntervalCalibration | None = None,
) -> dict[float, np.ndarray]:
    """Student-t quantiles {q: array like loc}, widened or narrowed by `calibration`
    (None: the raw ones) and sorted across q per sample so they never cross."""
    loc, scale, df = (np.asarray(a, dtype=np.float64) for a in (loc, scale, df))
    qs = [float(q) for q in quantiles]
    values = []
    for q in qs:
        v = loc + scale * stats.t.ppf(q, df)
        if calibration is not None and q != 0.5:
            assert cluster is not None, "calibrated quantiles need each sample's cluster"
            shift = calibration.correction(abs(2 * q - 1), np.asarray(cluster))
            shift = shift.reshape((len(loc),) + (1,) * (loc.ndim - 1))
            v = v + np.sign(q - 0.5) * shift * scale
        values.append(v)
    order = np.argsort(qs, kind="stable")
    stacked = np.sort(np.stack([values[i] for i in order]), axis=0)
    sorted_values = {qs[i]: stacked[j] for j, i in enumerate(order)}
    return {q: sorted_values[q] for q in qs}  # in the order asked for


def quantile_levels(quantiles: Sequence[float]) -> tuple[float, ...]:
    """Quantile levels as floats, each strictly between 0 and 1 (0 and 1 are the support's
    ends: infinite for a Student-t), or a one-line refusal."""
    try:
        qs = tuple(float(q) for q in np.atleast_1d(np.asarray(quantiles, dtype=object)))
    except (TypeError, ValueError) as exc:
        raise SgemUserError(f"quantiles must be numbers like (0.1, 0.5, 0.9): {exc}") from exc
    if not qs or any(not 0.0 < q < 1.0 for q in qs):
        raise SgemUserError(f"quantiles must lie strictly between 0 and 1, got {qs}")
    return qs


def coverage(
    y: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    group: np.ndarray | None = None,
    name: str = "group",
) -> dict:
    """The share of targets inside [lo, hi]: "overall" and, with `group`, "per_<name>" (a
    sample's horizon steps count one by one)."""
    y = np.asarray(y).reshape(np.shape(lo))
    inside = ((y >= lo) & (y <= hi)).reshape(len(y), -1)
    out: dict = {"overall": float(inside.mean())}
    if group is not None:
        g = np.asarray(group)
        out[f"per_{name}"] = {str(k): float(inside[g == k].mean()) for k in np.unique(g)}
    return out


#: the prior's standard deviation of log T (`fit_probability_calibration`): one factor e
#: either way
TEMPERATURE_PRIOR_SD = 1.0
#: the least share of the uniform in calibrated probabilities: one row's NLL is at most
#: log(C / MIN_FLOOR) (9.2 for 10 classes), and a row predicted right with certainty pays
#: at most MIN_FLOOR. Why: on four mixed structures (`benchmarks/mixed_csv.py --kinds
#: linear ring parabola xor`, seed 1, K = 4) one of 800 holdout rows had NLL 249 under the
#: MoE, 0.31 of its mean 0.36; validation held no such row to fit a floor on
MIN_FLOOR = 1e-3
#: the most: beyond it the network would be mostly replaced by the uniform
MAX_FLOOR = 0.5


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """The temperature T of softmax(logits / T) on (logits, y), without a floor (what
    `fit_probability_calibration` fits beside one; the model card's "temperature only")."""
    return fit_probability_calibration(logits, y, min_floor=0.0, max_floor=0.0)[0]


def fit_probability_calibration(
    logits: np.ndarray,
    y: np.ndarray,
    min_floor: float = MIN_FLOOR,
    max_floor: float = MAX_FLOOR,
) -> tuple[float, float]:
    """(T, e) of (1 - e) softmax(logits / T) + e / C on (logits, y): T the maximum a
    posteriori under a N(0, `TEMPERATURE_PRIOR_SD`) prior on log T, never below 1 where
    every sample is classified right; for each T, e in [min_floor, max_floor] the maximum
    likelihood (the NLL is convex in e). Why the prior: where validation holds no error (a
    small clean table, whose validation also chose the cells) the likelihood keeps rising
    as T -> 0, and the bare maximum likelihood (0.037 on a 36-row wine validation split)
    made every probability 0 or 1: the one wrong holdout row got p = 0 and the NLL rose
    8-fold. Without an error there is no evidence for sharpening; the prior keeps a few
    errors from driving T to a bound."""
    logits = np.asarray(logits, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if len(y) == 0:
        return 1.0, min_floor
    n, classes = len(y), logits.shape[1]
    rows = np.arange(n)

    def floor_for(log_t: float) -> tuple[float, float]:
        p = np.exp(special.log_softmax(logits / np.exp(log_t), axis=1)[rows, y])
        if max_floor <= min_floor:
            return min_floor, floored_nll(p, min_floor, classes)
        res = optimize.minimize_scalar(
            lambda e: floored_nll(p, e, classes), bounds=(min_floor, max_floor), method="bounded"
        )
        return float(res.x), float(res.fun)

    def objective(log_t: float) -> float:
        return floor_for(log_t)[1] + 0.5 * (log_t / TEMPERATURE_PRIOR_SD) ** 2 / n

    no_error = bool((logits.argmax(1) == y).all())
    res = optimize.minimize_scalar(
        objective, bounds=(0.0 if no_error else -4.0, 4.0), method="bounded"
    )
    return float(np.exp(res.x)), floor_for(float(res.x))[0]


def floored_nll(p_true: np.ndarray, floor: float, classes: int) -> float:
    """Mean NLL of the true classes' probabilities `p_true` mixed with `floor` of the
    uniform distribution over `classes`."""
    return float(-np.log((1 - floor) * p_true + floor / classes).mean())


def with_floor(probs, floor: float):
    """Class probabilities (n, C; numpy or torch) mixed with `floor` of the uniform."""
    return probs if not floor else (1 - floor) * probs + floor / probs.shape[1]


def nll(logits: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log-likelihood of labels `y` under softmax(logits)."""
    logp = special.log_softmax(np.asarray(logits, dtype=np.float64), axis=1)
    return float(-logp[np.arange(len(y)), np.asarray(y, dtype=np.int64)].mean())


def probability_nll(probs: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log-likelihood of labels `y` under class probabilities (n, C)."""
    p = np.asarray(probs, dtype=np.float64)[np.arange(len(y)), np.asarray(y, dtype=np.int64)]
    return float(-np.log(p).mean())


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    return special.softmax(np.asarray(logits, dtype=np.float64) / temperature, axis=1)


def expected_calibration_error(probs: np.ndarray, y: np.ndarray, bins: int = ECE_BINS) -> float:
    """ECE of the top-label confidence: |accuracy - confidence| per equal-width bin,
    weighted by the bin's share of samples."""
    probs = np.asarray(probs, dtype=np.float64)
    if len(probs) == 0:
        return float("nan")
    conf = probs.max(1)
    correct = (probs.argmax(1) == np.asarray(y)).astype(np.float64)
    idx = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)
    n = np.bincount(idx, minlength=bins)
    gap = np.abs(np.bincount(idx, correct, bins) - np.bincount(idx, conf, bins))
    return float(gap.sum() / n.sum())


def support_of(y: np.ndarray) -> dict:
    """{"lower": 0.0} for a target never below 0, {"upper": 0.0} for one never above 0,
    else {} (what `clip_to_support` keeps predictions inside)."""
    y = np.asarray(y, dtype=np.float64)
    y = y[np.isfinite(y)]
    if y.size == 0:
        return {}
    if y.min() >= 0:
        return {"lower": 0.0}
    if y.max() <= 0:
        return {"upper": 0.0}
    return {}


def clip_to_support(values: np.ndarray, support: dict | None) -> np.ndarray:
    """`values` clipped into the support (`support_of`); None or {}: unchanged."""
    if not support:
        return values
    return np.clip(values, support.get("lower"), support.get("upper"))


def never_negative(series: object, context: np.ndarray) -> np.ndarray:
    """Per series: True when its whole history given (a 1-D array, a 2-D array of rows or
    a list of arrays) is never below 0; for any other input, its `context` (what the model
    read, (n, ...), scaled by a positive factor) decides."""
    ctx: np.ndarray = np.asarray((np.asarray(context).reshape(len(context), -1) >= 0).all(1))
    rows: list | None = None
    if isinstance(series, np.ndarray) and series.ndim in (1, 2):
        rows = [series] if series.ndim == 1 else list(series)
    elif isinstance(series, list | tuple):
        rows = list(series)
    if rows is None or len(rows) != len(ctx):
        return ctx
    try:
        hist = np.asarray([not (np.asarray(r, dtype=np.float64) < 0).any() for r in rows])
    except (TypeError, ValueError):
        return ctx
    return np.asarray(ctx & hist)


#: a forecaster's calibration source where its validation windows were drawn at random (one
#: or two series): the final MoE's holdout outputs at the series' ends
HOLDOUT_SOURCE = "the final MoE on the holdout at the series' ends (validation overlaps training)"


def card_lines(state: dict) -> list[str]:
    """The model card's lines on units and calibration (none for a model saved without)."""
    lines: list[str] = []
    units = state.get("target_units") or {}
    if units.get("test_rmse") is not None:
        lines.append(
            f"  holdout in the target's units: RMSE {units['test_rmse']:.4g}, MAE "
            f"{units['test_mae']:.4g}, CRPS {units['test_crps']:.4g} (test_nll: per sample of "
            "the standardised target)"
        )
    report = state.get("report") or {}
    val, hold = report.get("validation") or {}, report.get("holdout") or {}
    if report.get("skipped"):
        lines.append(f"  not calibrated: {report['skipped']}")
    if "ece_15" in val:
        ece = [d["ece_15"][k] for d in (val, hold) for k in ("raw", "calibrated")]
        lines.append(
            f"  probabilities: temperature {report['temperature']:.3f} and floor "
            f"{report.get('floor', 0.0):.3g} fitted on validation; ECE (15 bins) raw -> "
            "calibrated: validation {:.3f} -> {:.3f}, holdout {:.3f} -> {:.3f}".format(*ece)
        )
        if "nll" in hold:
            lines.append(
                "    the networks' holdout NLL raw {raw:.4f}, with the temperature only "
                "{temperature_only:.4f}, calibrated {calibrated:.4f}".format(**hold["nll"])
            )
    if "coverage_80" in val and report.get("source") == HOLDOUT_SOURCE:
        cov = [hold["coverage_80"][k]["overall"] for k in ("raw", "calibrated")]
        lines.append(
            "  the networks' 80 % interval coverage raw -> calibrated: holdout {:.2f} -> {:.2f} "
            "(where it was fitted: one or two series' validation windows overlap training)".format(
                *cov
            )
        )
    elif "coverage_80" in val:
        cov = [d["coverage_80"][k]["overall"] for d in (val, hold) for k in ("raw", "calibrated")]
        lines.append(
            "  the networks' 80 % interval coverage raw -> calibrated: validation {:.2f} -> "
            "{:.2f} (where it was fitted), holdout {:.2f} -> {:.2f}".format(*cov)
        )
        calibrated = hold["coverage_80"]["calibrated"]
        key = "per_domain" if calibrated.get("per_domain") else "per_cluster"
        if calibrated.get(key):  # series: per domain; tables: per cluster
            shown = ", ".join(f"{g} {v:.2f}" for g, v in calibrated[key].items())
            lines.append(f"    holdout {key.replace('_', ' ')}, calibrated: {shown}")
    return lines


__all__ = [
    "ECE_BINS",
    "HOLDOUT_SOURCE",
    "LEVELS",
    "MAX_FLOOR",
    "MIN_COUNT",
    "MIN_FLOOR",
    "IntervalCalibration",
    "card_lines",
    "clip_to_support",
    "conformal_quantile",
    "coverage",
    "expected_calibration_error",
    "fit_probability_calibration",
    "fit_temperature",
    "floored_nll",
    "interval_scores",
    "never_negative",
    "nll",
    "probability_nll",
    "quantile_levels",
    "softmax",
    "support_of",
    "t_quantiles",
    "with_floor",
]
