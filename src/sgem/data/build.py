"""Build a `ClusteredTask` from a user's own arrays (the Python entry point, no CLI needed).

Every problem a user can fix (wrong shapes or lengths, NaN or values too large for float32,
labels that are not class ids, more clusters than samples, ...) raises `SgemUserError`
with a message naming the problem and the fix, before any clustering or training.

Clustering is `sgem.data.clustering.cluster_splits`, shared with the forecasting and image
builders, with its one policy: a k-means cluster that gets no training or no validation
sample is merged into its neighbours, so the task may have fewer clusters than asked for.
`meta["n_clusters_requested"]` and `meta["merged_clusters"]` record it; fewer than 3
clusters left is an error.
"""

from __future__ import annotations

import contextlib
import numbers

import numpy as np

from ..errors import SgemUserError
from .clustering import cluster_purity, cluster_splits, majority_source_partition
from .task import MIN_CLUSTERS, ClusteredTask, LossKind, Split, bad_values_report

LOSSES = ("cross_entropy", "student_t")


def _as_array(name: str, a) -> np.ndarray:
    if a is None:
        raise SgemUserError(f"{name} is None; pass an array")
    try:
        return np.asarray(a)
    except Exception as exc:  # ragged lists and the like
        raise SgemUserError(
            f"{name} must be array-like with one row per sample (a rectangular array): {exc}"
        ) from None


def _features(name: str, a) -> np.ndarray:
    """Numeric features of shape (n_samples, ...features), finite and within float32."""
    x = _as_array(name, a)
    if x.ndim < 2:
        raise SgemUserError(
            f"{name} must have shape (n_samples, n_features), got {x.shape}. For a single "
            "feature pass x.reshape(-1, 1)."
        )
    if len(x) == 0:
        raise SgemUserError(f"{name} is empty (shape {x.shape}); pass at least one sample")
    if x.dtype == object:
        with contextlib.suppress(TypeError, ValueError):  # numbers stored as objects
            x = x.astype(np.float64)
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_) or np.iscomplexobj(x):
        raise SgemUserError(
            f"{name} must hold real numbers, got dtype {x.dtype}. Encode text or categorical "
            "columns as numbers (e.g. one-hot) first."
        )
    report = bad_values_report(x)
    if report is not None:
        fix = (
            "Impute or drop those samples first."
            if report.startswith("NaN")
            else "Rescale or standardise the features first."
        )
        raise SgemUserError(f"{name} contains {report}. {fix}")
    return x


def _ids(name: str, a, n: int, what: str) -> np.ndarray:
    """Non-negative integer ids, one per sample (whole-number floats such as 3.0 pass)."""
    ids = _as_array(name, a)
    if ids.shape != (n,):
        raise SgemUserError(
            f"{name} must hold one {what} per sample, shape ({n},), got shape {ids.shape}"
        )
    if n == 0:
        return ids.astype(np.int64)
    if np.issubdtype(ids.dtype, np.floating):
        bad = np.flatnonzero(~np.isfinite(ids) | (ids != np.round(ids)))
        if bad.size:
            raise SgemUserError(
                f"{name} must be whole numbers ({what}s 0, 1, 2, ...), but {bad.size} are not, "
                f"e.g. {ids[bad[:3]].tolist()} at positions {bad[:3].tolist()}. Map them to "
                "integer ids, e.g. np.unique(ids, return_inverse=True)[1]."
            )
    elif not np.issubdtype(ids.dtype, np.integer):
        raise SgemUserError(
            f"{name} must be integer {what}s, got dtype {ids.dtype}; map them to 0, 1, 2, ... "
            "e.g. with np.unique(ids, return_inverse=True)[1]"
        )
    if ids.min() < 0:
        raise SgemUserError(
            f"{name} must be >= 0 ({what}s 0, 1, 2, ...), found {ids.min()}; map them to "
            "0, 1, 2, ... e.g. with np.unique(ids, return_inverse=True)[1]"
        )
    return ids.astype(np.int64)


def _labels(name: str, y: np.ndarray, loss: str) -> np.ndarray:
    if loss == "cross_entropy":
        if y.ndim != 1:
            raise SgemUserError(
                f"{name}: classification labels must be one integer per sample, shape (n,), "
                f"got {y.shape}" + (" (use y.ravel())" if y.ndim == 2 and y.shape[1] == 1 else "")
            )
        if not np.issubdtype(y.dtype, np.integer):
            hint = "map them to 0..C-1, e.g. with np.unique(y, return_inverse=True)[1]"
            if np.issubdtype(y.dtype, np.floating) and np.isfinite(y).all():
                if (y == np.round(y)).all():
                    hint = "they are whole numbers: pass y.astype(int)"
                else:
                    hint += "; for a real-valued target use loss='student_t'"
            raise SgemUserError(
                f"{name}: classification labels must be integers, got dtype {y.dtype}; {hint}"
            )
        return y
    if not (np.issubdtype(y.dtype, np.number) or y.dtype == np.bool_) or np.iscomplexobj(y):
        raise SgemUserError(f"{name}: targets must be real numbers, got dtype {y.dtype}")
    report = bad_values_report(y.reshape(len(y), -1)) if y.ndim else None
    if report is not None:
        raise SgemUserError(
            f"{name}: targets contain {report.replace('feature column', 'target column')}. "
            "Drop or impute those samples (or rescale the target) first."
        )
    return y


def _check_fraction(name: str, value, low_open: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise SgemUserError(
            f"{name} must be a number in {'(' if low_open else '['}0, 1), got {value!r}"
        )
    return float(value)


def build_task(
    x,
    y,
    *,
    n_clusters: int | None = None,
    clusters=None,
    source=None,
    test: tuple | None = None,
    val_fraction: float = 0.2,
    test_fraction: float = 0.0,
    loss: LossKind = "cross_entropy",
    n_classes: int | None = None,
    seed: int = 0,
    name: str = "custom",
) -> ClusteredTask:
    """Split, cluster and validate arrays into a `ClusteredTask`.

    Args:
        x: features, shape (n, ...). y: integer labels 0..C-1 (classification) or targets.
        n_clusters: run k-means with this many clusters, fitted on the training split only;
            validation and test points go to the nearest centroid. A cluster left without
            training or validation samples is merged into its neighbours (module docstring),
            so the task may have fewer clusters. Mutually exclusive with `clusters`.
        clusters: your own cluster id per sample in 0..M-1 (then test needs its own ids);
            whole-number floats such as 3.0 are accepted.
        source: optional ground-truth domain id per sample; only used for reports (purity,
            oracle partition by majority source), never by the search.
        test: an explicit test set `(x, y)` or `(x, y, source)` (or with cluster ids as a 4th
            element when `clusters` is given). Otherwise `test_fraction` of the data is held out.
        val_fraction, test_fraction: split fractions of the data passed in `x`.

    Raises:
        SgemUserError: for anything in the arguments that the user can fix.
    """
    if loss not in LOSSES:
        raise SgemUserError(f"loss must be one of {list(LOSSES)}, got {loss!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise SgemUserError(f"seed must be an integer, got {seed!r}")
    x = _features("x", x)
    y = _labels("y", _as_array("y", y), loss)
    n = len(x)
    if y.ndim == 0 or len(y) != n:
        raise SgemUserError(
            f"x and y disagree on the number of samples: {n} vs {len(y) if y.ndim else 'a scalar'}"
        )
    if (n_clusters is None) == (clusters is None):
        raise SgemUserError("give exactly one of n_clusters (k-means) or clusters (your own ids)")
    if n_clusters is not None:
        if isinstance(n_clusters, bool) or not isinstance(n_clusters, numbers.Integral):
            raise SgemUserError(
                f"n_clusters must be an integer >= {MIN_CLUSTERS} (got {n_clusters!r}, a "
                f"{type(n_clusters).__name__}), e.g. n_clusters=20"
            )
        if n_clusters < MIN_CLUSTERS:
            raise SgemUserError(
                f"n_clusters must be an integer >= {MIN_CLUSTERS} (got {n_clusters!r}): SGEM "
                "routes clusters to experts, and with fewer than 3 clusters there is no routing "
                "to search. Use more clusters (e.g. n_clusters=20)."
            )
    val_fraction = _check_fraction("val_fraction", val_fraction, low_open=True)
    test_fraction = _check_fraction("test_fraction", test_fraction, low_open=False)
    if not 0.0 < val_fraction < 1.0 or not 0.0 <= test_fraction < 1.0:
        raise SgemUserError(
            f"val_fraction must be in (0, 1) and test_fraction in [0, 1), got {val_fraction} "
            f"and {test_fraction}"
        )
    if val_fraction + test_fraction >= 1.0:
        raise SgemUserError("val_fraction + test_fraction must leave some training data")
    if test is None and test_fraction == 0.0:
        raise SgemUserError("give a test set (test=(x, y)) or a test_fraction > 0")
    if test is not None and test_fraction > 0.0:
        raise SgemUserError(
            f"give either a test set (test=...) or a test_fraction (got {test_fraction}), not "
            "both: the held-out fraction would be thrown away"
        )
    source = None if source is None else _ids("source", source, n, "source (domain) id")
    own_clusters = None if clusters is None else _ids("clusters", clusters, n, "cluster id")
    if loss == "cross_entropy":
        classes = np.unique(y)
        if classes.size < 2:
            raise SgemUserError(
                f"classification needs at least 2 classes, but y holds only class "
                f"{classes[0]} (all {n} samples). Check the label column; for a real-valued "
                "target use loss='student_t'."
            )
        if n_classes is not None and (
            isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral)
        ):
            raise SgemUserError(f"n_classes must be an integer >= 2 or None, got {n_classes!r}")
        if n_classes is None:
            n_classes = int(y.max()) + 1
        if y.min() < 0 or y.max() >= n_classes:
            raise SgemUserError(
                f"labels must lie in 0..{n_classes - 1}, found {y.min()}..{y.max()}. "
                "Re-encode them, e.g. with np.unique(y, return_inverse=True)."
            )

    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    n_val = round(val_fraction * n)
    n_test = round(test_fraction * n)
    n_train = n - n_val - n_test
    for count, what, fix in (
        (n_val, "validation", "a larger val_fraction"),
        (n_test if test is None else 1, "test", "a larger test_fraction, or pass test=(x, y)"),
        (n_train, "training", "smaller val_fraction and test_fraction"),
    ):
        if count < 1:
            raise SgemUserError(
                f"{n} samples leave no {what} sample (val_fraction={val_fraction}, "
                f"test_fraction={test_fraction}); use more data or {fix}"
            )
    test_idx, val_idx, train_idx = np.split(perm, [n_test, n_test + n_val])
    if n_clusters is not None and n_clusters > n_train:
        held = f"{n_val} go to validation" + (f", {n_test} to test" if n_test else "")
        share = 1.0 - val_fraction - (test_fraction if test is None else 0.0)
        need = int(np.ceil(n_clusters / max(share, 1e-9)))
        fewer = n_clusters > MIN_CLUSTERS
        raise SgemUserError(
            f"cannot form {n_clusters} clusters from {n_train} training samples ({n} samples, "
            f"{held}). Every cluster needs training and validation samples: use "
            f"{'fewer clusters or ' if fewer else ''}more data (about {need} samples at least"
            f"{'' if fewer else f'; {MIN_CLUSTERS} clusters is the fewest'})."
        )

    def take(idx: np.ndarray) -> tuple:
        src = None if source is None else source[idx]
        cl = None if own_clusters is None else own_clusters[idx]
        return x[idx], y[idx], src, cl

    parts = {"train": take(train_idx), "val": take(val_idx)}
    if test is not None:
        parts["test"] = _test_part(test, x, loss, own_clusters is not None)
    else:
        parts["test"] = take(test_idx)

    centroids = None
    clustered = None
    meta: dict = {}
    if n_clusters is not None:
        z = {s: parts[s][0].reshape(len(parts[s][0]), -1).astype(np.float64) for s in parts}
        sources = None
        if source is not None:  # an explicit test set may come without sources
            sources = {s: parts[s][2] for s in parts if parts[s][2] is not None}
        fix = _fewer_clusters_fix(n_clusters, val_fraction, test_fraction)
        clustered = cluster_splits(z, n_clusters, seed, source=sources, fix=fix)
        ids, centroids = clustered.ids, clustered.centroids
        meta["n_clusters_requested"] = clustered.n_requested
        meta["merged_clusters"] = int(clustered.merged)
        if clustered.equal_count:  # (k-means left fewer than MIN_CLUSTERS with validation)
            meta["equal_count_clusters"] = True
        n_clusters = clustered.n_clusters
    else:
        n_clusters = int(own_clusters.max()) + 1
        ids = {split: parts[split][3] for split in parts}

    def make_split(split: str) -> Split:
        xs, ys, src, _ = parts[split]
        # int64 labels: what torch's cross-entropy expects, whatever integer type came in
        ys = ys.astype(np.int64) if loss == "cross_entropy" else ys.astype(np.float32)
        return Split(xs.astype(np.float32), ys, ids[split], src)

    oracle = None
    train = make_split("train")
    if source is not None:
        if clustered is not None and clustered.purity is not None:
            purity, oracle = clustered.purity, clustered.oracle_partition
        else:  # the user's own cluster ids
            purity = cluster_purity(train.cluster, train.source, n_clusters)
            oracle = majority_source_partition(train.cluster, train.source, n_clusters)
        meta["purity_per_cluster"] = purity.round(4).tolist()
        meta["mean_purity"] = float(purity.mean())
    return ClusteredTask(
        name=name,
        train=train,
        val=make_split("val"),
        test=make_split("test"),
        n_clusters=int(n_clusters),
        loss=loss,
        n_classes=n_classes,
        oracle_partition=oracle,
        centroids=centroids,
        meta=meta,
    )


def _fewer_clusters_fix(n_clusters: int, val_fraction: float, test_fraction: float) -> str:
    """What to change where too few clusters kept validation samples: never fewer than
    `MIN_CLUSTERS` clusters, and a validation share larger than the one in use (a small
    table's is 0.35 already)."""
    fewer = n_clusters > MIN_CLUSTERS
    more_val = round(val_fraction + 0.15, 2)
    if more_val + test_fraction >= 0.9:  # (no room left for a larger validation share)
        return "use more data" + (" or fewer clusters (--clusters)" if fewer else "")
    larger = f"a larger val_fraction (a --config file's task: {{val_fraction: {more_val}}})"
    if fewer:
        return f"use fewer clusters (--clusters), more data, or {larger}"
    return f"use more data or {larger} ({MIN_CLUSTERS} clusters is the fewest)"


def _test_part(test, x: np.ndarray, loss: str, own_clusters: bool) -> tuple:
    """The explicit test set `(x, y[, source[, clusters]])`, checked like the data."""
    if not isinstance(test, tuple | list) or not 2 <= len(test) <= 4:
        raise SgemUserError(
            "test must be a tuple (x, y), (x, y, source) or (x, y, source, clusters), got "
            f"{type(test).__name__}"
            + (f" of length {len(test)}" if hasattr(test, "__len__") else "")
        )
    x_t = _features("test x", test[0])
    if x_t.shape[1:] != x.shape[1:]:
        raise SgemUserError(
            f"test x has {x_t.shape[1:]} features per sample but x has {x.shape[1:]}; both "
            "need the same columns, in the same order"
        )
    n_t = len(x_t)
    y_t = _labels("test y", _as_array("test y", test[1]), loss)
    if y_t.ndim == 0 or len(y_t) != n_t:
        raise SgemUserError(
            f"test x and test y disagree on the number of samples: {n_t} vs "
            f"{len(y_t) if y_t.ndim else 'a scalar'}"
        )
    has_source = len(test) > 2 and test[2] is not None
    s_t = _ids("test source", test[2], n_t, "source (domain) id") if has_source else None
    c_t = _ids("test clusters", test[3], n_t, "cluster id") if len(test) > 3 else None
    if own_clusters and c_t is None:
        raise SgemUserError("with your own clusters, pass test=(x, y, source, clusters)")
    return x_t, y_t, s_t, c_t
