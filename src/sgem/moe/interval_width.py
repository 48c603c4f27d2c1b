"""How wide a combination's intervals are: split-conformal factors on every quantile's
distance from the median, fit on held-out outputs so the central 80 % interval covers 80 %
of them (`Combination.interval_scale`), for a regression per bin of its prediction
(`Combination.width_edges` / `width_factors`, Mondrian conformal)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

#: a regression's width factors are fit in at most this many bins of its prediction
MAX_WIDTH_BINS = 5


def conformal_spread(quantiles: dict[float, np.ndarray], y: np.ndarray, level: float = 0.8):
    """The factor on every quantile's distance from the median that makes the central
    `level` interval cover `level` of these samples (split-conformal: the `level` quantile
    of each sample's needed factor)."""
    lo_q, hi_q = round((1 - level) / 2, 6), round((1 + level) / 2, 6)
    m, lo, hi = quantiles[0.5], quantiles[lo_q], quantiles[hi_q]
    y = np.asarray(y, dtype=np.float64).reshape(m.shape)
    below = (m - y) / np.maximum(m - lo, 1e-12)
    above = (y - m) / np.maximum(hi - m, 1e-12)
    need = np.maximum(np.maximum(below, above), 0.0).reshape(-1)
    return float(np.clip(np.quantile(need, level), 0.05, 100.0))


def binned_spreads(
    quantiles: dict[float, np.ndarray], y: np.ndarray, point: np.ndarray, min_rows: int
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """(bin edges of the point prediction, `conformal_spread` in each bin): up to
    `MAX_WIDTH_BINS` bins of equal counts with at least `min_rows` rows each, or None where
    there are not rows for two. Why: one factor covers 80 % on average, but a member's
    Normal of one scale is too wide where predictions are small and too narrow where they
    are large (doctor visits, 4038 test rows: 0.94 of the lowest fifth of predictions
    covered, 0.51 of the highest)."""
    p = np.asarray(point, dtype=np.float64).reshape(-1)
    bins = min(MAX_WIDTH_BINS, len(p) // max(min_rows, 1))
    if bins < 2:
        return None
    edges = np.unique(np.quantile(p, np.linspace(0, 1, bins + 1)[1:-1]))
    at = np.searchsorted(edges, p, side="right")
    if np.bincount(at, minlength=len(edges) + 1).min() < min_rows // 2:
        return None  # (ties: a bin too small to fit a factor on)
    flat = {q: np.asarray(v, dtype=np.float64).reshape(-1) for q, v in quantiles.items()}
    target = np.asarray(y, dtype=np.float64).reshape(-1)
    factors = [
        conformal_spread({q: v[at == b] for q, v in flat.items()}, target[at == b])
        for b in range(len(edges) + 1)
    ]
    return tuple(float(e) for e in edges), tuple(factors)


def width_bins(edges, factors) -> tuple[tuple[float, ...] | None, tuple[float, ...] | None]:
    """model.json's width bins, checked: both absent, or ascending finite edges and one
    positive factor more than edges; else ValueError."""
    if edges is None and factors is None:
        return None, None

    def numbers(v) -> bool:
        return isinstance(v, list) and all(type(x) in (int, float) and np.isfinite(x) for x in v)

    if not (
        numbers(edges)
        and numbers(factors)
        and 0 < len(factors) == len(edges) + 1 <= MAX_WIDTH_BINS
        and all(0 < f < 1e3 for f in factors)
        and all(a < b for a, b in pairwise(edges))
    ):
        raise ValueError("the combination's width_edges / width_factors are malformed")
    return tuple(float(e) for e in edges), tuple(float(f) for f in factors)


__all__ = ["MAX_WIDTH_BINS", "binned_spreads", "conformal_spread", "width_bins"]
