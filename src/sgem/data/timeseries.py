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

The domains live in `sgem.data.ts_domains` and the windows and descriptors in
`sgem.data.ts_windows`; both are re-exported here, so ``from sgem.data.timeseries import
...`` reaches all of them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import SgemUserError
from ..forecast import seasonality
from ..random_streams import Stream, stream_rng
from .clustering import assign_to_centroids, cluster_splits
from .task import ClusteredTask, Split
from .ts_domains import (
    MONASH_FILES,
    MONASH_SOURCE,
    OFFLINE_FILES,
    OFFLINE_TIMESERIES_DIR,
    load_domains,
)
from .ts_end_split import end_split_windows
from .ts_windows import (
    ACF_LAGS,
    DESCRIPTOR_NAMES,
    Domains,
    Windows,
    make_windows,
    unscale,
    window_descriptors,
)

__all__ = [
    "ACF_LAGS",
    "DESCRIPTOR_NAMES",
    "MONASH_FILES",
    "MONASH_SOURCE",
    "OFFLINE_FILES",
    "OFFLINE_TIMESERIES_DIR",
    "SPLIT_NAMES",
    "Domains",
    "Windows",
    "assign_windows",
    "clustering_features",
    "load_domains",
    "make_timeseries_task",
    "make_windows",
    "unscale",
    "validation_at_random",
    "window_descriptors",
]

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


def _every_series_in_train(idx: dict[str, np.ndarray], win: Windows) -> dict[str, np.ndarray]:
    """Move one window of every series without a training window into the training split
    (from validation first), so that every series is trained on."""
    key = win.source * (int(win.series.max(initial=0)) + 1) + win.series
    moved: list[int] = []
    for part in ("val", "test"):
        absent = np.setdiff1d(key[idx[part]], np.concatenate([key[idx["train"]], key[moved]]))
        if len(absent) == 0:
            continue
        _, first = np.unique(key[idx[part]], return_index=True)
        take = idx[part][first[np.isin(key[idx[part]][first], absent)]]
        moved.extend(take.tolist())
        idx = {**idx, part: np.setdiff1d(idx[part], take)}
    return {**idx, "train": np.sort(np.concatenate([idx["train"], moved]).astype(np.int64))}


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


#: where a series task's held-out windows are (`make_timeseries_task`'s `held_out`), as
#: `meta["split"]` names it
SPLIT_NAMES = {
    "ends": "series ends",
    "holdout": "holdout at series ends, validation at random",
    "random": "random",
}


def validation_at_random(task: ClusteredTask) -> bool:
    """Whether a series task's validation windows were drawn at random before a holdout at
    the series' ends (`SPLIT_NAMES["holdout"]`): they overlap training windows, so networks
    look better there than on a forecast's question, and the holdout must judge them."""
    meta = task.meta if isinstance(task.meta, dict) else {}
    return meta.get("split") == SPLIT_NAMES["holdout"]


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
    observed: Mapping[str, Sequence[np.ndarray]] | None = None,
    every_series: bool = False,
    fix: str = "use more windows (n_windows), fewer clusters, or a larger validation fraction",
    held_out: str = "ends",
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
    cluster that gets no training or validation window is merged into its neighbours
    (`cluster_splits`, the policy of every builder); the task then has fewer than
    `n_clusters` clusters and `meta["merged_clusters"]` says how many went.

    `source` is the domain id (never shown to the search); `oracle_partition` labels each
    cluster with its majority domain. `meta` holds: domain_names, mean_purity,
    purity_per_cluster, scale (per split, `raw = scaled * scale`), windows (per split, the
    `Windows` with series and position of every window), descriptor_names,
    descriptor_mean/std and descriptor_centroids, all in `clustering_features` space
    (assign new windows with `assign_windows`), context, horizon, n_clusters_requested,
    merged_clusters.

    A user's series (`sgem.data.user_tasks.series_task`): `observed` marks the observed
    values of series whose gaps were filled (no target holds a filled value; see
    `make_windows`), and `every_series=True` gives every series a window and puts one of
    each series' windows in the training split, so no series is left out of training when
    there are at least as many windows as series. `fix` is the remedy named when too few
    clusters are left after merging.

    With `every_series` (and `held_out="ends"`, the default) validation and holdout windows
    are the last windows of the series (`sgem.data.ts_end_split`), never overlapping a
    training target; where too few series have room, or that leaves a cluster without
    validation windows, only the holdout stays at the ends and validation windows are drawn
    at random before it (`held_out="holdout"`); where no series has room for a holdout, or
    clusters are still left without validation windows, the split is random as below
    (`held_out="random"`). `meta["split"]` says which.

    Caveat: windows are split at random, so a test window may overlap a training window
    cut from the same series (they are sampled independently).
    """
    if len(split) != 3 or min(split) <= 0 or abs(sum(split) - 1.0) > 1e-6:
        raise ValueError(f"split must be three positive fractions summing to 1, got {split}")
    if domains is None or isinstance(domains, str | os.PathLike):
        domains = load_domains(domains, names=names, offline=offline)
    elif names is not None:
        domains = {n: domains[n] for n in names}
    if held_out not in SPLIT_NAMES:
        raise ValueError(f"held_out must be one of {', '.join(SPLIT_NAMES)}, got {held_out!r}")

    def at_ends(validation: str):
        return end_split_windows(
            domains,
            context,
            horizon,
            n_windows,
            seed,
            split,
            floor_fraction=floor_fraction,
            observed=observed,
            validation=validation,
        )

    ended = None
    if every_series and held_out != "random":  # a user's series: held out at their ends
        ended = at_ends("ends") if held_out == "ends" else None
        if ended is None:  # too few series for validation there: the holdout alone
            held_out, ended = "holdout", at_ends("random")
    if ended is None:
        held_out = "random"
    if ended is not None:
        win, idx = ended
    else:
        win = make_windows(
            domains,
            context,
            horizon,
            n_windows,
            seed,
            floor_fraction=floor_fraction,
            observed=observed,
            every_series=every_series,
        )
        split_idx = _split_indices(win.source, split, seed)
        idx = dict(zip(("train", "val", "test"), split_idx, strict=True))
        if every_series:
            idx = _every_series_in_train(idx, win)
    parts = {s: win.subset(i) for s, i in idx.items()}

    desc = {s: clustering_features(w.context) for s, w in parts.items()}
    d_mean, d_std = _standardise(desc["train"])
    z = {s: (d - d_mean) / d_std for s, d in desc.items()}
    try:
        clustered = cluster_splits(
            z,
            n_clusters,
            seed,
            source={s: w.source for s, w in parts.items()},
            what="windows",
            fix=fix,
        )
    except SgemUserError:
        if ended is None:
            raise
        # the held-out windows leave clusters without validation windows: validation at
        # random before the holdout, then wholly at random
        return make_timeseries_task(
            domains,
            n_windows=n_windows,
            n_clusters=n_clusters,
            context=context,
            horizon=horizon,
            split=split,
            seed=seed,
            name=name,
            floor_fraction=floor_fraction,
            observed=observed,
            every_series=every_series,
            fix=fix,
            held_out="holdout" if held_out == "ends" else "random",
        )
    ids, centroids, merged, m = (
        clustered.ids,
        clustered.centroids,
        clustered.merged,
        clustered.n_clusters,
    )

    def make_split(s: str) -> Split:
        w = parts[s]
        return Split(w.context.astype(np.float32), w.target.astype(np.float32), ids[s], w.source)

    train = make_split("train")
    purity = clustered.purity
    assert purity is not None  # the domains are the sources
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
        # where validation and holdout windows were cut (`sgem.data.ts_end_split`)
        "split": SPLIT_NAMES[held_out],
        # each domain's file frequency and its MASE period (`sgem.forecast.seasonality`, 1
        # where unknown): the data sets the period every scorer of the task uses
        "frequencies": [getattr(d, "frequency", None) for d in domains.values()],
        "seasonality": [seasonality(getattr(d, "frequency", None)) for d in domains.values()],
    }
    return ClusteredTask(
        name=name,
        train=train,
        val=make_split("val"),
        test=make_split("test"),
        n_clusters=m,
        loss="student_t",
        # one domain (a user's single file): no known grouping to match, so no oracle
        oracle_partition=clustered.oracle_partition if len(domains) > 1 else None,
        centroids=None,  # the centroids live in descriptor space: meta["descriptor_centroids"]
        meta=meta,
    )
