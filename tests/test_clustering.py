"""`cluster_splits`, the one clustering path of the tabular, image and forecasting builders."""

from __future__ import annotations

import numpy as np
import pytest

from sgem.data.clustering import (
    assign_to_centroids,
    cluster_purity,
    cluster_splits,
    fit_kmeans,
    majority_source_partition,
    merge_clusters_without_samples,
)
from sgem.errors import SgemUserError


def _splits(seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A big cloud and a far small one: some k-means clusters get no validation sample."""
    rng = np.random.default_rng(seed)
    z, src = {}, {}
    for part, n in (("train", 80), ("val", 12), ("test", 12)):
        far = 3 if part == "train" else 1
        z[part] = np.concatenate([rng.normal(0, 1, (n, 3)), rng.normal(8, 0.1, (far, 3))])
        src[part] = np.r_[np.zeros(n, np.int64), np.ones(far, np.int64)]
    return z, src


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cluster_splits_is_fit_assign_merge_purity(seed):
    """The same values as the sequence each builder used to run itself."""
    z, src = _splits(seed)
    got = cluster_splits(z, 14, seed, source=src)
    centroids, train_ids = fit_kmeans(z["train"], 14, seed=seed)
    ids = {"train": train_ids, **{s: assign_to_centroids(z[s], centroids) for s in ("val", "test")}}
    centroids, ids, merged = merge_clusters_without_samples(z, centroids, ids)
    m = len(centroids)
    assert got.merged == merged and got.n_clusters == m and got.n_requested == 14
    np.testing.assert_array_equal(got.centroids, centroids)
    for part in z:
        np.testing.assert_array_equal(got.ids[part], ids[part])
    np.testing.assert_array_equal(got.purity, cluster_purity(ids["train"], src["train"], m))
    np.testing.assert_array_equal(
        got.oracle_partition, majority_source_partition(ids["train"], src["train"], m)
    )
    # the policy: every cluster left has training and validation samples
    for part in ("train", "val"):
        assert (np.bincount(got.ids[part], minlength=m) > 0).all()


def test_cluster_splits_without_sources_and_too_few_left():
    z, _ = _splits(0)
    got = cluster_splits(z, 5, 0)
    assert not got.equal_count
    assert got.purity is None and got.oracle_partition is None and got.mean_purity("val") is None
    tiny = {"train": z["train"], "val": z["val"][:2], "test": z["test"]}
    with pytest.raises(
        SgemUserError,
        match=r"only 2 of the 6 k-means clusters kept training and "
        r"validation windows after merging \(2 validation windows\); fix it",
    ):
        cluster_splits(tiny, 6, 0, what="windows", fix="fix it")


def test_skewed_data_that_k_means_leaves_too_few_clusters_gets_equal_count_ones() -> None:
    """On a skewed column (235 households' income) k-means gave the few largest values a
    cluster of their own, no validation row fell in it, and a default `sgem fit` stopped
    with an error; equal-count clusters along the first principal component are used
    instead, every one with training and validation samples."""
    from sgem.data.clustering import (
        assign_to_centroids,
        balanced_centroids,
        fit_kmeans,
        merge_clusters_without_samples,
    )

    rng = np.random.default_rng(2)
    x = rng.lognormal(0.0, 1.5, (190, 1))
    z = {"train": x[:140], "val": x[140:]}
    centroids, train_ids = fit_kmeans(z["train"], 3, seed=0)
    ids = {"train": train_ids, "val": assign_to_centroids(z["val"], centroids)}
    assert len(merge_clusters_without_samples(z, centroids, ids)[0]) == 2  # k-means alone
    got = cluster_splits(z, 3, 0)
    assert got.n_clusters == 3 and got.equal_count
    for part in ("train", "val"):
        assert (np.bincount(got.ids[part], minlength=3) > 0).all()
    np.testing.assert_array_equal(got.centroids, balanced_centroids(z["train"], 3))
    np.testing.assert_array_equal(got.ids["val"], assign_to_centroids(z["val"], got.centroids))
    sizes = np.bincount(got.ids["train"])
    assert sizes.max() < 4 * sizes.min()  # comparable sizes, not one cluster of outliers


def test_kmeans_on_many_points_fits_a_sample_and_assigns_every_point(monkeypatch) -> None:
    """Beyond `KMEANS_MAX_VALUES` the centroids come from a seeded sample (a 160 000-row
    table spent 47 s of its budget in k-means); every training point still gets its nearest
    centroid, four far blobs are still found, and the same seed gives the same clusters."""
    import sgem.data.clustering as clustering

    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    blob = rng.integers(0, 4, 4000)
    x = centres[blob] + rng.normal(0, 0.5, (4000, 2))
    monkeypatch.setattr(clustering, "KMEANS_MAX_VALUES", 1000)  # 500 points of 2 features
    centroids, ids = fit_kmeans(x, 4, seed=3)
    np.testing.assert_array_equal(ids, assign_to_centroids(x, centroids))
    assert cluster_purity(ids, blob, 4).min() == 1.0
    again, ids_again = fit_kmeans(x, 4, seed=3)
    np.testing.assert_array_equal(again, centroids)
    np.testing.assert_array_equal(ids_again, ids)
