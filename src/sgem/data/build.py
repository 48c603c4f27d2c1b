"""Build a `ClusteredTask` from a user's own arrays (the Python entry point, no CLI needed)."""

from __future__ import annotations

import numpy as np

from .clustering import (
    assign_to_centroids,
    cluster_purity,
    fit_kmeans,
    majority_source_partition,
)
from .task import ClusteredTask, LossKind, Split


def _as_array(name: str, a) -> np.ndarray:
    try:
        return np.asarray(a)
    except Exception as exc:  # pragma: no cover - numpy's own message is fine
        raise TypeError(f"{name} must be array-like: {exc}") from exc


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
            validation and test points go to the nearest centroid. Mutually exclusive with
            `clusters`.
        clusters: your own cluster id per sample in 0..M-1 (then test needs its own ids).
        source: optional ground-truth domain id per sample; only used for reports (purity,
            oracle partition by majority source), never by the search.
        test: an explicit test set `(x, y)` or `(x, y, source)` (or with cluster ids as a 4th
            element when `clusters` is given). Otherwise `test_fraction` of the data is held out.
        val_fraction, test_fraction: split fractions of the data passed in `x`.
    """
    x = _as_array("x", x)
    y = _as_array("y", y)
    if x.ndim == 1:
        raise ValueError(f"x must have shape (n_samples, n_features), got {x.shape}")
    if len(x) != len(y):
        raise ValueError(f"x and y disagree on the number of samples: {len(x)} vs {len(y)}")
    if (n_clusters is None) == (clusters is None):
        raise ValueError("give exactly one of n_clusters (k-means) or clusters (your own ids)")
    if not 0.0 < val_fraction < 1.0 or not 0.0 <= test_fraction < 1.0:
        raise ValueError("val_fraction must be in (0, 1) and test_fraction in [0, 1)")
    if val_fraction + test_fraction >= 1.0:
        raise ValueError("val_fraction + test_fraction must leave some training data")
    if test is None and test_fraction == 0.0:
        raise ValueError("give a test set (test=(x, y)) or a test_fraction > 0")
    if np.issubdtype(x.dtype, np.number) and x.size and not np.isfinite(x).all():
        raise ValueError("x contains NaN or inf. Impute or drop those samples first.")
    source = None if source is None else _as_array("source", source).astype(np.int64)
    own_clusters = None if clusters is None else _as_array("clusters", clusters).astype(np.int64)
    if loss == "cross_entropy":
        if not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"classification labels must be integers, got dtype {y.dtype}")
        if n_classes is None:
            n_classes = int(y.max()) + 1
        if y.min() < 0 or y.max() >= n_classes:
            raise ValueError(
                f"labels must lie in 0..{n_classes - 1}, found {y.min()}..{y.max()}. "
                "Re-encode them, e.g. with np.unique(y, return_inverse=True)."
            )

    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(x))
    n_val = round(val_fraction * len(x))
    n_test = round(test_fraction * len(x))
    test_idx, val_idx, train_idx = np.split(perm, [n_test, n_test + n_val])

    def take(idx: np.ndarray) -> tuple:
        src = None if source is None else source[idx]
        cl = None if own_clusters is None else own_clusters[idx]
        return x[idx], y[idx], src, cl

    parts = {"train": take(train_idx), "val": take(val_idx)}
    if test is not None:
        x_t, y_t = _as_array("test x", test[0]), _as_array("test y", test[1])
        has_source = len(test) > 2 and test[2] is not None
        s_t = _as_array("test source", test[2]).astype(np.int64) if has_source else None
        c_t = _as_array("test clusters", test[3]).astype(np.int64) if len(test) > 3 else None
        if own_clusters is not None and c_t is None:
            raise ValueError("with your own clusters, pass test=(x, y, source, clusters)")
        parts["test"] = (x_t, y_t, s_t, c_t)
    else:
        parts["test"] = take(test_idx)

    centroids = None
    if n_clusters is not None:
        centroids, train_clusters = fit_kmeans(parts["train"][0], n_clusters, seed=seed)
        ids = {"train": train_clusters}
        for split in ("val", "test"):
            ids[split] = assign_to_centroids(parts[split][0], centroids)
    else:
        n_clusters = int(own_clusters.max()) + 1
        ids = {split: parts[split][3] for split in parts}

    def make_split(split: str) -> Split:
        xs, ys, src, _ = parts[split]
        # int64 labels: what torch's cross-entropy expects, whatever integer type came in
        ys = ys.astype(np.int64) if loss == "cross_entropy" else ys.astype(np.float32)
        return Split(xs.astype(np.float32), ys, ids[split], src)

    meta: dict = {}
    oracle = None
    train = make_split("train")
    if source is not None:
        purity = cluster_purity(train.cluster, train.source, n_clusters)
        meta["purity_per_cluster"] = purity.round(4).tolist()
        meta["mean_purity"] = float(purity.mean())
        oracle = majority_source_partition(train.cluster, train.source, n_clusters)
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
