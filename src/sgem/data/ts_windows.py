"""Forecasting windows cut from several domains, and their descriptors.

`make_windows` samples the same number of windows from every domain, none containing a
missing value (nor a filled value in its target, given the `observed` masks of a user's
series), each scaled by its own context (floored relative to the series' level);
`count_windows` says how many it may cut from each series;
`unscale` maps scaled values back. `window_descriptors` summarises each scaled context by a
few statistics (level, spread, trend, autocorrelations, spectrum); k-means runs on these,
not on the raw windows. Everything here is also importable from `sgem.data.timeseries`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..errors import SgemUserError
from ..random_streams import series_window_rng
from .tsf import TSFData

__all__ = [
    "ACF_LAGS",
    "DESCRIPTOR_NAMES",
    "Domains",
    "Windows",
    "count_windows",
    "make_windows",
    "unscale",
    "window_descriptors",
]

Domains = Mapping[str, TSFData | Sequence[np.ndarray]]


# -- windows ------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Windows:
    """Scaled forecasting windows: `context` past values -> `target` next values.

    `raw = scaled * scale[:, None]` for both context and target: `unscale` maps forecasts
    back to the series' units. `source` is the domain id (index into `domain_names`);
    `series` and `start` say where in that domain each window was cut (`start` is the
    index of the first context value).
    """

    context: np.ndarray  # (n, context) float64, scaled
    target: np.ndarray  # (n, horizon) float64, scaled
    scale: np.ndarray  # (n,) float64
    source: np.ndarray  # (n,) int64
    series: np.ndarray  # (n,) int64
    start: np.ndarray  # (n,) int64
    domain_names: tuple[str, ...]
    floored: np.ndarray | None = None  # (n,) bool: scale is not the context's mean |x|
    filled: np.ndarray | None = None  # (n,) int: filled (not observed) context values

    def __len__(self) -> int:
        return int(self.context.shape[0])

    def subset(self, index: np.ndarray) -> Windows:
        return Windows(
            self.context[index],
            self.target[index],
            self.scale[index],
            self.source[index],
            self.series[index],
            self.start[index],
            self.domain_names,
            None if self.floored is None else self.floored[index],
            None if self.filled is None else self.filled[index],
        )


def unscale(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Map scaled windows or forecasts, shape (n, ...), back to the series' units."""
    scale = np.asarray(scale, dtype=np.float64)
    return np.asarray(values) * scale.reshape((-1,) + (1,) * (np.ndim(values) - 1))


def _series_of(domain: TSFData | Sequence[np.ndarray]) -> list[np.ndarray]:
    raw = domain.series if isinstance(domain, TSFData) else domain
    out = []
    for i, s in enumerate(raw):
        a = np.asarray(s, dtype=np.float64)
        if a.ndim != 1:
            raise SgemUserError(
                f"series {i} must be 1-D (one value per time step), got shape {a.shape}; pass "
                "a (T, C) multichannel series as C separate series, e.g. list(a.T)"
            )
        out.append(a)
    return out


def _valid_starts(
    series: list[np.ndarray],
    width: int,
    observed: list[np.ndarray] | None = None,
    context: int = 0,
) -> list[np.ndarray]:
    """Per series, the starts of every window of `width` values with no missing value and,
    with `observed` masks, no filled value among its last `width - context` (the target)."""
    starts = []
    for j, s in enumerate(series):
        if len(s) < width:
            starts.append(np.empty(0, dtype=np.int64))
            continue
        bad = np.concatenate([[0], np.cumsum(~np.isfinite(s))])
        ok = bad[width:] == bad[:-width]
        if observed is not None:
            filled = np.concatenate([[0], np.cumsum(~observed[j])])
            ok &= filled[width:] == filled[context : len(s) - width + 1 + context]
        starts.append(np.flatnonzero(ok).astype(np.int64))
    return starts


def count_windows(
    series: Sequence[np.ndarray],
    context: int,
    horizon: int,
    observed: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """Per series, how many windows `make_windows` may cut from it (same validity rule)."""
    arrays = [np.asarray(s, dtype=np.float64) for s in series]
    masks = None if observed is None else [np.asarray(m, dtype=bool) for m in observed]
    valid = _valid_starts(arrays, context + horizon, masks, context)
    return np.array([len(v) for v in valid], dtype=np.int64)


def _history_level(
    series: np.ndarray, ends: np.ndarray, observed: np.ndarray | None = None
) -> np.ndarray:
    """Mean |x| of `series[:end]` for every end (missing and filled values skipped; 0 if
    none)."""
    finite = np.isfinite(series) if observed is None else np.isfinite(series) & observed
    total = np.concatenate([[0.0], np.cumsum(np.where(finite, np.abs(series), 0.0))])
    count = np.concatenate([[0], np.cumsum(finite)])
    return total[ends] / np.maximum(count[ends], 1)


def _pick(
    rng: np.random.Generator, counts: np.ndarray, size: int, every_series: bool
) -> np.ndarray:
    """`size` distinct window numbers among `counts.sum()`, sorted; with `every_series`,
    one from every series that has a window before the rest are drawn."""
    total = int(counts.sum())
    if not every_series:
        return np.sort(rng.choice(total, size=size, replace=False))
    has = np.flatnonzero(counts)
    first = (np.cumsum(counts) - counts)[has] + (rng.random(len(has)) * counts[has]).astype(
        np.int64
    )
    if size <= len(first):
        return np.sort(rng.choice(first, size=size, replace=False))
    rest = np.setdiff1d(np.arange(total), first, assume_unique=True)
    return np.sort(np.concatenate([first, rng.choice(rest, size=size - len(first), replace=False)]))


def make_windows(
    domains: Domains,
    context: int = 96,
    horizon: int = 24,
    n_windows: int = 4000,
    seed: int = 0,
    min_scale: float = 1e-8,
    floor_fraction: float = 0.2,
    *,
    observed: Mapping[str, Sequence[np.ndarray]] | None = None,
    every_series: bool = False,
) -> Windows:
    """Sample `n_windows // len(domains)` windows from every domain, scaled per window.

    Balance: every domain contributes the same number of windows, whatever its size (one
    electricity series has more windows than the whole tourism file). Within a domain, a
    window is drawn uniformly among all valid (series, position) pairs, without
    replacement; a window is valid when none of its `context + horizon` values is missing
    (the weather stand-in has whole months missing), so series shorter than that are
    skipped. Each domain draws from its own generator (seeded by `seed` and the domain's
    position), so adding a domain does not change the others' windows.

    Scaling: context and target are divided by a per-window scale, the mean absolute value
    of the context, floored at `floor_fraction` (0.2) times the series' typical level,
    where the typical level is the mean |x| of the series' values *up to the end of the
    context* (its whole known history, missing values skipped). Series of very different
    magnitudes (tourism counts in the tens of thousands, air quality in µg/m³, temperatures
    in °C) must share one network, and both the context mean and the history mean are known
    at forecast time, so the target never leaks into the input. Why the floor: a near-zero
    context (a dry spell with one 0.2 mm shower in daily rainfall) has a mean |x| of ~0.002,
    and dividing by it turns the next storm into |y| ~ 5000, which then dominates every
    loss and every CRPS average. Relative to the series' own level, such a context is simply
    low, and it is scaled as such: with the floor the weather windows' scaled targets stay
    in the hundreds at most (rain is heavy-tailed: a 150 mm storm is ~100 times a station's
    mean), and the floor binds in ~1% of weather and ~4% of air-quality windows, never for
    electricity or tourism. A series that has been exactly zero all along has no level
    either; if the floored scale is <= min_scale, the scale is 1 (the convention of Chronos),
    i.e. the window stays in raw units. `Windows.floored` marks the windows whose scale is
    not their context's mean |x|.

    `domains` maps a domain name to a `TSFData` or to a list of 1-D arrays (NaN = missing);
    the domain id (`source`) is the position in the mapping.

    Filled values (a user's series with gaps filled or short histories padded,
    `sgem.data.series_gaps`): `observed` gives, per domain and series, a boolean mask of the
    values that were observed. A filled value may sit in a context (the model reads what a
    forecast will read) but never in a target (it would be scored as if measured), and the
    series' level skips it; `Windows.filled` counts each context's filled values.
    `every_series=True` draws one window from every series that has one before the rest
    (uniformly), so no series is left out when there are at least as many windows as series.
    """
    names = tuple(domains)
    n_domains = len(names)
    if n_domains == 0:
        raise ValueError("make_windows needs at least one domain")
    if context < 2 or horizon < 1:
        raise ValueError(f"need context >= 2 and horizon >= 1, got {context} and {horizon}")
    if floor_fraction < 0:
        raise ValueError(f"floor_fraction must be >= 0 (0 = no floor), got {floor_fraction}")
    per_domain = n_windows // n_domains
    if per_domain < 1:
        raise ValueError(f"n_windows={n_windows} is fewer than one window per domain")
    width = context + horizon
    cuts: list[tuple[int, int, np.ndarray]] = []
    for d, name in enumerate(names):
        series = _series_of(domains[name])
        masks = None if observed is None else [np.asarray(m, bool) for m in observed[name]]
        valid = _valid_starts(series, width, masks, context)
        counts = np.array([len(v) for v in valid], dtype=np.int64)
        total = int(counts.sum())
        if total < per_domain:
            longest = max((len(s) for s in series), default=0)
            raise ValueError(
                f"domain {name!r} has {total} windows of {width} values without a missing "
                f"value (longest series: {longest}), fewer than the {per_domain} asked for. "
                "Use fewer windows (n_windows) or a shorter context/horizon."
            )
        rng = series_window_rng(seed, d)
        pick = _pick(rng, counts, per_domain, every_series)
        which = np.searchsorted(np.cumsum(counts), pick, side="right")
        offsets = pick - (np.cumsum(counts) - counts)[which]
        for j in np.unique(which):
            cuts.append((d, j, valid[j][offsets[which == j]]))
    return cut_windows(domains, cuts, context, horizon, min_scale, floor_fraction, observed)


def cut_windows(
    domains: Domains,
    cuts: Sequence[tuple[int, int, np.ndarray]],
    context: int,
    horizon: int,
    min_scale: float = 1e-8,
    floor_fraction: float = 0.2,
    observed: Mapping[str, Sequence[np.ndarray]] | None = None,
) -> Windows:
    """The scaled `Windows` at the given (domain id, series, starts) cuts, in that order
    (the scaling rule of `make_windows`)."""
    names = tuple(domains)
    width = context + horizon
    windows, sources, series_ids, starts, levels, filled = [], [], [], [], [], []
    cache: dict[int, tuple[list[np.ndarray], list[np.ndarray] | None]] = {}
    for d, j, at in cuts:
        if d not in cache:
            masks = None if observed is None else observed[names[d]]
            cache[d] = (
                _series_of(domains[names[d]]),
                None if masks is None else [np.asarray(m, bool) for m in masks],
            )
        series, masks = cache[d]
        at = np.asarray(at, dtype=np.int64)
        windows.append(sliding_window_view(series[j], width)[at])
        levels.append(_history_level(series[j], at + context, None if masks is None else masks[j]))
        if masks is not None:
            filled.append((~sliding_window_view(masks[j], context)[at]).sum(axis=1))
        series_ids.append(np.full(len(at), j, dtype=np.int64))
        sources.append(np.full(len(at), d, dtype=np.int64))
        starts.append(at)
    raw = np.concatenate(windows)
    context_level = np.abs(raw[:, :context]).mean(axis=1)
    scale = np.maximum(context_level, floor_fraction * np.concatenate(levels))
    scale = np.where(scale > min_scale, scale, 1.0)
    scaled = raw / scale[:, None]
    return Windows(
        context=np.ascontiguousarray(scaled[:, :context]),
        target=np.ascontiguousarray(scaled[:, context:]),
        scale=scale,
        source=np.concatenate(sources),
        series=np.concatenate(series_ids),
        start=np.concatenate(starts),
        domain_names=names,
        floored=scale != context_level,
        filled=np.concatenate(filled).astype(np.int64) if observed is not None else None,
    )


# -- descriptors --------------------------------------------------------------------------

ACF_LAGS = (1, 2, 7, 12, 24)
DESCRIPTOR_NAMES: tuple[str, ...] = (
    "mean",
    "std",
    "min",
    "max",
    "last",
    "slope",
    *(f"acf_{k}" for k in ACF_LAGS),
    "frac_zero",
    "mean_abs_diff",
    "spectral_entropy",
    "dominant_power",
)


def window_descriptors(context: np.ndarray) -> np.ndarray:
    """Statistical descriptors of each (scaled) context window, shape (n, 15).

    Columns (`DESCRIPTOR_NAMES`), all computed from the window alone:

    * level and spread: mean, std, min, max, and the last value;
    * trend: least-squares slope against time rescaled to [0, 1] (the rise over the window);
    * autocorrelation at lags 1, 2, 7, 12 and 24, the same lags for every window (weekly
      for daily data, yearly for monthly, daily for hourly), so that no domain metadata
      such as the frequency is used; lags >= the window length read 0;
    * frac_zero: fraction of exactly-zero values (intermittent series such as rainfall);
    * mean_abs_diff: mean |x_t - x_{t-1}|, roughness;
    * spectral_entropy: Shannon entropy of the normalised periodogram of the de-meaned
      window (without the zero frequency), divided by its maximum: ~1 for noise, ~0 for a
      single sinusoid; dominant_power: the largest share of the periodogram at one
      frequency (strength of the main seasonality).

    A constant window has no autocorrelation or spectrum; those columns read 0 for it.
    Everything is scale-free on a context scaled by its mean |x|, and finite.
    """
    c = np.asarray(context, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] < 2:
        raise ValueError(f"context must have shape (n_windows, length >= 2), got {c.shape}")
    n, length = c.shape
    mean = c.mean(axis=1)
    dev = c - mean[:, None]
    energy = (dev**2).sum(axis=1)
    flat = energy <= 1e-12 * np.maximum(1.0, (c**2).sum(axis=1))
    safe = np.where(flat, 1.0, energy)
    t = np.linspace(0.0, 1.0, length)
    tc = t - t.mean()
    slope = dev @ tc / (tc @ tc)
    acf = [
        np.where(flat, 0.0, (dev[:, k:] * dev[:, :-k]).sum(axis=1) / safe)
        if k < length
        else np.zeros(n)
        for k in ACF_LAGS
    ]
    power = np.abs(np.fft.rfft(dev, axis=1)[:, 1:]) ** 2
    total = power.sum(axis=1, keepdims=True)
    share = power / np.where(total > 0, total, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(share > 0, share * np.log(share), 0.0)
    n_freq = power.shape[1]
    entropy = -plogp.sum(axis=1) / np.log(n_freq) if n_freq > 1 else np.zeros(n)
    entropy = np.where(flat, 0.0, entropy)
    dominant = np.where(flat, 0.0, share.max(axis=1))
    out = np.column_stack(
        [
            mean,
            np.sqrt(energy / length),
            c.min(axis=1),
            c.max(axis=1),
            c[:, -1],
            slope,
            *acf,
            (c == 0).mean(axis=1),
            np.abs(np.diff(c, axis=1)).mean(axis=1),
            entropy,
            dominant,
        ]
    )
    return out
