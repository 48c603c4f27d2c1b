"""How a user's series become training windows: context, padding, window and cluster counts.

`plan_series` takes the series as read (`SeriesData`) and the task's config section and
decides, before anything is trained, everything `series_task` needs: gaps filled (or
refused with `missing="error"`), the context (the frequency's default, capped where most
series are short), short histories left-padded so that no series is dropped for being
shorter than context + horizon, and how many windows and clusters the series can carry.
Every refusal is a `SgemUserError` naming the flag that fixes it, with numbers true for
the data.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SgemUserError
from .files_series import SeriesData, data_context
from .series_gaps import fill_series, pad_left
from .series_lengths import check_series_lengths
from .task import MIN_CLUSTERS
from .ts_windows import count_windows

log = logging.getLogger(__name__)

#: the train / validation / test fractions of `make_timeseries_task`
SPLIT = (0.70, 0.15, 0.15)
#: windows drawn by default (more when there are more series: one each)
DEFAULT_WINDOWS = 4000


@dataclass
class SeriesPlan:
    """What `series_task` builds from: padded, filled series with their observed masks
    (`names` order), the window lengths and counts, and a report for `task.meta`."""

    names: list[str]
    series: list[np.ndarray]
    observed: list[np.ndarray]
    context: int
    horizon: int
    n_windows: int
    n_clusters: int
    fix: str
    report: dict[str, Any] = field(default_factory=dict)
    #: the seasonal period the user gave (--season), None: from the frequency or history
    season: int | None = None


def _split_sizes(n: int) -> tuple[int, int]:
    """(training, validation) windows of `n`, rounded as `make_timeseries_task` splits."""
    n_val, n_test = round(SPLIT[1] * n), round(SPLIT[2] * n)
    return n - n_val - n_test, n_val


def _positive(cfg: dict[str, Any], key: str, flag: str, least: int) -> int | None:
    value = cfg.get(key)
    if value is None:
        return None
    if int(value) < least:
        raise SgemUserError(
            f"{key}={value}: it must be at least {least}; use {flag} {least} or more"
        )
    return int(value)


def pad_short(
    series: list[np.ndarray], observed: list[np.ndarray], context: int, horizon: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Left-pad each series (with its first value, marked as not observed: read, never
    scored) by just enough values that it yields min(context, length - horizon) windows.

    A series shorter than context + horizon would yield none; padded, every target with an
    observed value before it is a window. The padding shrinks as a series grows, so a series
    one value longer never yields fewer windows, and from 2 context + horizon - 1 values on
    nothing is padded.
    """
    out = []
    for s, o in zip(series, observed, strict=True):
        pad = min(context - 1, max(0, 2 * context + horizon - 1 - len(s)))
        out.append(pad_left(s, o, len(s) + pad))
    return [p[0] for p in out], [p[1] for p in out]


def _windows(series: list[np.ndarray], observed: list[np.ndarray], c: int, h: int) -> np.ndarray:
    padded, padded_observed = pad_short(series, observed, c, h)
    return count_windows(padded, c, h, padded_observed)


def _too_few_windows(
    available: int, n_windows: int, horizon: int, count: Callable[[int], int]
) -> SgemUserError:
    """The refusal when the windows cannot give every cluster a validation window; names
    the longest horizon that would (`count(h)`: the windows at horizon h, with the context
    the task would then use), if any."""
    remedies = []
    if _split_sizes(available)[1] >= MIN_CLUSTERS:
        remedies.append(f"use more windows (n_windows up to {available}, task section of --config)")
    for shorter in range(horizon - 1, 0, -1):
        more = count(shorter)
        if _split_sizes(more)[1] >= MIN_CLUSTERS:
            remedies.append(f"use a shorter horizon (--horizon {shorter} gives {more} windows)")
            break
    remedies.append("give more or longer series")
    return SgemUserError(
        f"{n_windows} windows with an observed {horizon}-step target "
        f"({_split_sizes(n_windows)[1]} for validation) are too few for {MIN_CLUSTERS} "
        f"clusters with a validation window each; {', or '.join(remedies)}"
    )


def plan_series(data: SeriesData, cfg: dict[str, Any]) -> SeriesPlan:
    """Fill, pad and count the series of `data` for the config section `cfg` (keys horizon,
    context, season, missing, n_windows, n_clusters; None or absent: from the data)."""
    horizon = _positive(cfg, "horizon", "--horizon", 1) or int(data.horizon or 0)
    season = _positive(cfg, "season", "--season", 1)
    if horizon < 1:
        raise SgemUserError("give the forecast horizon: --horizon N (steps to forecast)")
    filled = fill_series(data.series, cfg.get("missing") or "impute")
    if filled.empty:
        log.warning(
            "%d series have no value at all and are left out: %s",
            len(filled.empty),
            ", ".join(filled.empty[:5]),
        )
    if not filled.values:
        raise SgemUserError("no series holds a value; give series with numbers in the value column")
    if filled.n_filled:
        log.info(
            "filled %d missing values in %d series (they are read in contexts, never scored)",
            filled.n_filled,
            filled.with_gaps,
        )
    lengths = [len(v) for v in filled.values.values()]
    context = _positive(cfg, "context", "--context", 2) or data_context(data.freq, horizon, lengths)
    if cfg.get("context") and context + horizon > max(lengths):
        log.warning(
            "--context %d is longer than every series allows (the longest has %d values): each "
            "window is mostly padding, and a training costs as for %d values; --context %d "
            "(the longest minus the horizon) reads every value and no more",
            context, max(lengths), context, max(2, max(lengths) - horizon),
        )  # fmt: skip
    names = check_series_lengths(filled.values, context, horizon, drop_short=True, pad=True)
    series = [filled.values[n] for n in names]
    observed = [filled.observed[n] for n in names]
    per_series = _windows(series, observed, context, horizon)
    available = int(per_series.sum())
    n_padded = int(sum(len(s) < context + horizon for s in series))
    trainable = int((per_series > 0).sum())
    n_windows = _positive(cfg, "n_windows", "n_windows (task section of --config)", 1)
    if n_windows is None:
        n_windows = min(available, max(DEFAULT_WINDOWS, trainable))
    elif n_windows > available:
        raise SgemUserError(
            f"asked for {n_windows} windows but the series hold only {available} windows of "
            f"context + horizon = {context} + {horizon} with an observed target; set n_windows "
            f"to at most {available} (task section of --config)"
        )
    n_train, n_val = _split_sizes(n_windows)
    if n_val < MIN_CLUSTERS:

        def count(h: int) -> int:
            c = int(cfg.get("context") or data_context(data.freq, h, lengths))
            return int(_windows(series, observed, c, h).sum())

        raise _too_few_windows(available, n_windows, horizon, count)
    n_clusters = _positive(cfg, "n_clusters", "--clusters", MIN_CLUSTERS)
    if n_clusters is None:
        n_clusters = int(np.clip(n_windows // 100, 4, 30))  # `default_n_clusters`
        n_clusters = max(MIN_CLUSTERS, min(n_clusters, n_val // 2))
    elif n_clusters > n_train:
        raise SgemUserError(
            f"--clusters {n_clusters}: k-means needs a training window per cluster, and the "
            f"series give {n_train} of {n_windows} windows for training; use --clusters "
            f"{max(MIN_CLUSTERS, n_val // 2)} or fewer"
        )
    remedies = []
    if n_clusters > MIN_CLUSTERS:
        remedies.append(f"use fewer clusters (--clusters {MIN_CLUSTERS})")
    if n_windows < available:
        remedies.append(f"more windows (n_windows up to {available}, task section of --config)")
    remedies.append("give more or longer series")
    padded, padded_observed = pad_short(series, observed, context, horizon)
    kept = set(names)
    report = {
        **filled.report(),
        "series_short_padded": n_padded,
        "series_with_windows": trainable,
        "series_left_out": [n for n in data.series if n not in kept][:100],
        "windows_available": available,
    }
    return SeriesPlan(
        names,
        padded,
        padded_observed,
        context,
        horizon,
        n_windows,
        n_clusters,
        ", or ".join(remedies),
        report,
        season,
    )


__all__ = ["DEFAULT_WINDOWS", "SeriesPlan", "pad_short", "plan_series"]
