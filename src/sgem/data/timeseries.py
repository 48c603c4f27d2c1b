"""Time-series forecasting as a `ClusteredTask`: windows from several domains, clustered.

The paper mixes four Monash forecasting datasets (electricity hourly, KDD Cup 2018 air
quality, weather, tourism monthly) into one task: a sample is a window of `context` past
values, the target the next `horizon` values, and its domain is the hidden source. The
pieces, each usable on its own:

* `load_domains` reads the `.tsf` files (`MONASH_FILES` from a directory the user points
  at, or `OFFLINE_FILES`, real public stand-ins shipped for offline runs).
* `make_windows` samples the same number of windows from every domain, none containing a
  missing value, each scaled by its own context (floored relative to the series' level).
* `window_descriptors` summarises each scaled context by a few statistics (level, spread,
  trend, autocorrelations, spectrum); k-means runs on these, not on the raw windows.
* `make_timeseries_task` puts it together: split, descriptors, k-means fitted on the
  training windows only, validation and test windows assigned to the nearest centroid.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..errors import SgemUserError
from ..random_streams import Stream, series_window_rng, stream_rng
from .clustering import (
    assign_to_centroids,
    cluster_purity,
    fit_kmeans,
    majority_source_partition,
    merge_clusters_without_samples,
)
from .paths import shared_data_dir
from .task import MIN_CLUSTERS, ClusteredTask, Split
from .tsf import TSFData, read_tsf

# -- the datasets -------------------------------------------------------------------------

#: The paper's four Monash datasets: domain name -> file name in the user's directory.
MONASH_FILES: dict[str, str] = {
    "electricity_hourly": "electricity_hourly_dataset.tsf",
    "kdd_cup_2018": "kdd_cup_2018_dataset_with_missing_values.tsf",
    "weather": "weather_dataset.tsf",
    "tourism_monthly": "tourism_monthly_dataset.tsf",
}

#: Offline stand-ins for the same four domains (real public data of the same character,
#: see the README next to them): domain name -> file name in `OFFLINE_TIMESERIES_DIR`.
OFFLINE_FILES: dict[str, str] = {
    "electricity_hourly": "electricity_pjm_hourly.tsf",
    "kdd_cup_2018": "air_quality_beijing_hourly.tsf",
    "weather": "weather_australia_daily.tsf",
    "tourism_monthly": "tourism_monthly.tsf",
}

#: Where the offline stand-ins live: `$SGEM_TIMESERIES_DATA`, else the `timeseries` folder
#: of the shared data directory (`sgem.data.paths.shared_data_dir`).
OFFLINE_TIMESERIES_DIR = Path(
    os.environ.get("SGEM_TIMESERIES_DATA", shared_data_dir() / "timeseries")
)

MONASH_SOURCE = (
    "the Monash Time Series Forecasting Archive (https://forecastingdata.org/; the files are "
    "published on Zenodo, https://zenodo.org/communities/forecasting)"
)

Domains = Mapping[str, TSFData | Sequence[np.ndarray]]


def _looks_like_path(entry: str) -> bool:
    return entry.lower().endswith((".tsf", ".zip")) or "/" in entry or os.sep in entry


def load_domains(
    directory: str | os.PathLike | None = None,
    names: Sequence[str] | None = None,
    offline: bool = False,
) -> dict[str, TSFData]:
    """Read the forecasting domains, in order, as {domain name: TSFData}.

    Args:
        directory: where the files are. Required unless `offline=True` (then it defaults
            to `OFFLINE_TIMESERIES_DIR`).
        names: which domains, by the names of `MONASH_FILES` (default: all four, in that
            order). An entry ending in `.tsf` or `.zip`, or containing a path separator, is
            a file path instead (relative to `directory` when one is given); its domain
            name is the file's stem.
        offline: read the stand-ins of `OFFLINE_FILES` instead of the Monash files.

    A Monash file may also sit in the directory as the `.zip` the archive distributes
    (same stem). A missing file raises FileNotFoundError naming the file and where the
    dataset is published.
    """
    paths_only = names is not None and all(_looks_like_path(str(n)) for n in names)
    if directory is None and not offline and not paths_only:
        raise ValueError(
            "give the directory holding the Monash .tsf files (load_domains('path/to/dir'))"
            ", or offline=True for the offline stand-ins"
        )
    base = (
        Path(directory) if directory is not None else (OFFLINE_TIMESERIES_DIR if offline else None)
    )
    table = OFFLINE_FILES if offline else MONASH_FILES
    out: dict[str, TSFData] = {}
    for entry in list(table) if names is None else list(names):
        entry = str(entry) if isinstance(entry, str) else os.fspath(entry)
        if entry in table:
            name, path = entry, _locate(base, table[entry], entry, offline)
        elif _looks_like_path(entry):
            path = Path(entry)
            if base is not None and not path.is_absolute():
                path = base / path
            if not path.is_file():
                raise FileNotFoundError(f"no such .tsf file: {path}")
            name = path.name.split(".")[0]
        else:
            raise ValueError(
                f"unknown domain {entry!r}; expected one of {', '.join(table)}, or a path to a "
                ".tsf file"
            )
        if name in out:
            raise ValueError(f"domain {name!r} is given twice")
        out[name] = read_tsf(path)
    if not out:
        raise ValueError("no domains to load: names is empty")
    return out


def _locate(base: Path | None, file_name: str, name: str, offline: bool) -> Path:
    assert base is not None
    path = base / file_name
    if path.is_file():
        return path
    zipped = path.with_suffix(".zip")
    if zipped.is_file():
        return zipped
    if offline:
        raise FileNotFoundError(
            f"offline stand-in for domain {name!r} not found: expected {path}. The offline "
            f"data lives in $SGEM_TIMESERIES_DATA (default {OFFLINE_TIMESERIES_DIR}); point "
            "SGEM_TIMESERIES_DATA at it, or load the Monash files with offline=False."
        )
    raise FileNotFoundError(
        f"Monash dataset {name!r} not found: expected {path} (or {zipped.name}). Download "
        f"{file_name} from {MONASH_SOURCE} and put it (zipped or not) in {base}; or use "
        "offline=True for the offline stand-ins."
    )


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


def _valid_starts(series: list[np.ndarray], width: int) -> list[np.ndarray]:
    """Per series, the starts of every window of `width` values with no missing value."""
    starts = []
    for s in series:
        if len(s) < width:
            starts.append(np.empty(0, dtype=np.int64))
            continue
        bad = np.concatenate([[0], np.cumsum(~np.isfinite(s))])
        starts.append(np.flatnonzero(bad[width:] == bad[:-width]).astype(np.int64))
    return starts


def _history_level(series: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Mean |x| of `series[:end]` for every end (missing values skipped; 0 if none)."""
    finite = np.isfinite(series)
    total = np.concatenate([[0.0], np.cumsum(np.where(finite, np.abs(series), 0.0))])
    count = np.concatenate([[0], np.cumsum(finite)])
    return total[ends] / np.maximum(count[ends], 1)


def make_windows(
    domains: Domains,
    context: int = 96,
    horizon: int = 24,
    n_windows: int = 4000,
    seed: int = 0,
    min_scale: float = 1e-8,
    floor_fraction: float = 0.2,
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
    windows, sources, series_ids, starts, levels = [], [], [], [], []
    for d, name in enumerate(names):
        series = _series_of(domains[name])
        valid = _valid_starts(series, width)
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
        pick = np.sort(rng.choice(total, size=per_domain, replace=False))
        which = np.searchsorted(np.cumsum(counts), pick, side="right")
        offsets = pick - (np.cumsum(counts) - counts)[which]
        for j in np.unique(which):
            at = valid[j][offsets[which == j]]
            windows.append(sliding_window_view(series[j], width)[at])
            levels.append(_history_level(series[j], at + context))
            series_ids.append(np.full(len(at), j, dtype=np.int64))
            starts.append(at)
        sources.append(np.full(per_domain, d, dtype=np.int64))
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


# -- the task -----------------------------------------------------------------------------


def _standardise(train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = train.mean(axis=0)
    std = train.std(axis=0)
    return mean, np.where(std > 1e-12, std, 1.0)


def _split_indices(
    source: np.ndarray, fractions: tuple[float, float, float], seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random split, stratified by domain so that every split stays balanced."""
    rng = stream_rng(seed, Stream.SERIES_SPLIT)
    parts: tuple[list, list, list] = ([], [], [])
    for d in np.unique(source):
        idx = rng.permutation(np.flatnonzero(source == d))
        n_val = round(fractions[1] * len(idx))
        n_test = round(fractions[2] * len(idx))
        n_train = len(idx) - n_val - n_test
        for part, chunk in zip(parts, np.split(idx, [n_train, n_train + n_val]), strict=True):
            part.append(chunk)
    train, val, test = (np.sort(np.concatenate(p)) for p in parts)
    return train, val, test


def clustering_features(context: np.ndarray) -> np.ndarray:
    """What k-means sees before standardisation: `asinh` of the descriptors.

    asinh is nearly the identity on the bounded descriptors (autocorrelations, entropy,
    shares in [0, 1]) and logarithmic on the heavy-tailed ones (max, std and roughness of a
    rainfall window with one storm in a dry context reach ~100), which would otherwise pull
    k-means centroids onto single outlier windows.
    """
    return np.arcsinh(window_descriptors(context))


def assign_windows(task: ClusteredTask, context: np.ndarray) -> np.ndarray:
    """Cluster ids of new scaled context windows, for a task from `make_timeseries_task`."""
    meta = task.meta
    z = (clustering_features(context) - meta["descriptor_mean"]) / meta["descriptor_std"]
    return assign_to_centroids(z, meta["descriptor_centroids"])


def make_timeseries_task(
    domains: Domains | str | os.PathLike | None = None,
    *,
    offline: bool = False,
    names: Sequence[str] | None = None,
    n_windows: int = 4000,
    n_clusters: int = 30,
    context: int = 96,
    horizon: int = 24,
    split: tuple[float, float, float] = (0.70, 0.15, 0.15),
    seed: int = 0,
    name: str = "timeseries",
    floor_fraction: float = 0.2,
) -> ClusteredTask:
    """The multi-domain forecasting `ClusteredTask` (loss "student_t").

    Args:
        domains: {name: TSFData or list of arrays}, or a directory holding the Monash files
            (read with `load_domains(directory, names)`), or None with `offline=True` for
            the offline stand-ins.
        n_windows: total windows, split equally among the domains (`make_windows`).
        n_clusters: M, the k-means clusters.
        context, horizon: window lengths; x is (n, context), y is (n, horizon), both
            float32 and scaled by the context's mean |x| (floored at `floor_fraction` of
            the series' level so far; see `make_windows`).
        split: train / validation / test fractions, applied within each domain.

    Clustering: k-means on the standardised `clustering_features` (asinh of the
    `window_descriptors`) of the training windows only, standardised with the training
    windows' mean and std; validation and test windows go to the nearest centroid. A
    cluster that gets no validation window is merged: its centroid is dropped and every
    window re-assigned to the nearest remaining centroid, until each cluster has training
    and validation windows. The task then has fewer than `n_clusters` clusters;
    `meta["merged_clusters"]` says how many went.

    `source` is the domain id (never shown to the search); `oracle_partition` labels each
    cluster with its majority domain. `meta` holds: domain_names, mean_purity,
    purity_per_cluster, scale (per split, `raw = scaled * scale`), windows (per split, the
    `Windows` with series and position of every window), descriptor_names,
    descriptor_mean/std and descriptor_centroids, all in `clustering_features` space
    (assign new windows with `assign_windows`), context, horizon, n_clusters_requested,
    merged_clusters.

    Caveat: windows are split at random, so a test window may overlap a training window
    cut from the same series (they are sampled independently).
    """
    if len(split) != 3 or min(split) <= 0 or abs(sum(split) - 1.0) > 1e-6:
        raise ValueError(f"split must be three positive fractions summing to 1, got {split}")
    if domains is None or isinstance(domains, str | os.PathLike):
        domains = load_domains(domains, names=names, offline=offline)
    elif names is not None:
        domains = {n: domains[n] for n in names}
    win = make_windows(domains, context, horizon, n_windows, seed, floor_fraction=floor_fraction)
    idx = dict(zip(("train", "val", "test"), _split_indices(win.source, split, seed), strict=True))
    parts = {s: win.subset(i) for s, i in idx.items()}

    desc = {s: clustering_features(w.context) for s, w in parts.items()}
    d_mean, d_std = _standardise(desc["train"])
    z = {s: (d - d_mean) / d_std for s, d in desc.items()}
    centroids, train_ids = fit_kmeans(z["train"], n_clusters, seed=seed)
    ids = {"train": train_ids, **{s: assign_to_centroids(z[s], centroids) for s in ("val", "test")}}
    centroids, ids, merged = merge_clusters_without_samples(z, centroids, ids)
    m = len(centroids)
    if m < MIN_CLUSTERS:
        raise ValueError(
            f"only {m} of the {n_clusters} clusters kept validation windows after merging; "
            "use more windows (n_windows), fewer clusters, or a larger validation fraction"
        )

    def make_split(s: str) -> Split:
        w = parts[s]
        return Split(w.context.astype(np.float32), w.target.astype(np.float32), ids[s], w.source)

    train = make_split("train")
    purity = cluster_purity(train.cluster, train.source, m)
    meta = {
        "domain_names": list(win.domain_names),
        "mean_purity": float(purity.mean()),
        "purity_per_cluster": purity.round(4).tolist(),
        "scale": {s: w.scale for s, w in parts.items()},
        "windows": parts,
        "descriptor_names": list(DESCRIPTOR_NAMES),
        "descriptor_mean": d_mean,
        "descriptor_std": d_std,
        "descriptor_centroids": centroids,
        "context": context,
        "horizon": horizon,
        "floor_fraction": floor_fraction,
        "min_scale": 1e-8,  # make_windows' default, the rule a saved model reapplies
        "n_clusters_requested": n_clusters,
        "merged_clusters": merged,
    }
    return ClusteredTask(
        name=name,
        train=train,
        val=make_split("val"),
        test=make_split("test"),
        n_clusters=m,
        loss="student_t",
        oracle_partition=majority_source_partition(train.cluster, train.source, m),
        centroids=None,  # the centroids live in descriptor space: meta["descriptor_centroids"]
        meta=meta,
    )
