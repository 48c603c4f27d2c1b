"""Seasonal naive: repeat the last season, the season chosen from the context alone.

No frequency metadata is used (it would reveal the domain): each window's period is the
candidate lag in `SEASONS` (weekly for daily data, yearly for monthly, daily for hourly)
with the highest autocorrelation of its context; a window with no positive seasonal
autocorrelation falls back to the last value. loc_h = x_{L - s + ((h - 1) mod s)}; the
spread is a * the RMS of the context's seasonal differences x_t - x_{t-s} (constant over
the horizon), with (a, df) fitted on train + validation like the naive baseline.
"""

from __future__ import annotations

import numpy as np

from .naive import MIN_SPREAD, SpreadForecaster

SEASONS = (7, 12, 24)


def choose_seasons(x: np.ndarray, seasons: tuple[int, ...] = SEASONS) -> np.ndarray:
    """Per window, the lag of highest positive autocorrelation (1 = none: last value)."""
    dev = x - x.mean(axis=1, keepdims=True)
    energy = np.maximum((dev**2).sum(axis=1), 1e-12)
    lags = [s for s in seasons if s < x.shape[1]]
    if not lags:
        return np.ones(len(x), dtype=np.int64)
    acf = np.stack([(dev[:, s:] * dev[:, :-s]).sum(axis=1) / energy for s in lags], axis=1)
    best = np.asarray(lags)[acf.argmax(axis=1)]
    return np.where(acf.max(axis=1) > 0, best, 1).astype(np.int64)


def seasonal_forecast(x: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(loc, base spread), each (B, H), of the seasonal-naive forecast of contexts x."""
    n, length = x.shape
    season = choose_seasons(x)
    h = np.arange(horizon)[None, :]
    idx = length - season[:, None] + (h % season[:, None])
    loc = np.take_along_axis(x, idx, axis=1)
    spread = np.empty(n)
    for s in np.unique(season):
        rows = season == s
        d = x[rows, s:] - x[rows, :-s]
        spread[rows] = np.sqrt(np.mean(d**2, axis=1))
    spread = np.maximum(spread, MIN_SPREAD)
    return loc, np.repeat(spread[:, None], horizon, axis=1)


class SeasonalNaive(SpreadForecaster):
    """Repeat the last season (period chosen per window from its autocorrelation)."""

    name = "seasonal_naive"

    def forecast(self, x: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        return seasonal_forecast(x.astype(np.float64), horizon)
