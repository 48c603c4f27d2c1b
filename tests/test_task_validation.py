"""Bad input fails early with a clear ValueError; partition metrics and affinity groups."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from sgem import SGEM, Arch, SearchConfig, TabularSpace
from sgem.data import ClusteredTask, Split, build_task
from sgem.metrics import partition_match
from sgem.search.exploration import (
    affinity_groups,
    align_labels,
    hard_logits,
    residual_profiles,
)


def blobs(n: int = 120, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = (x[:, 0] > 0).astype(np.int64)
    return x, y


def test_too_few_clusters():
    x, y = blobs()
    with pytest.raises(ValueError, match=r"n_clusters must be an integer >= 3"):
        build_task(x, y, n_clusters=2, test=blobs(20, 1))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_features(bad):
    x, y = blobs()
    x[5, 1] = bad
    with pytest.raises(ValueError, match="NaN or inf"):
        build_task(x, y, n_clusters=3, test=blobs(20, 1))


def test_non_finite_features_in_a_split():
    x = np.random.default_rng(0).normal(size=(9, 2)).astype(np.float32)
    y = np.zeros(9, dtype=np.int64)
    c = np.arange(9) % 3
    bad = x.copy()
    bad[[1, 4], 0] = np.nan
    with pytest.raises(ValueError, match=r"val: x contains NaN or inf in 2 sample"):
        ClusteredTask("t", Split(x, y, c), Split(bad, y, c), Split(x, y, c), 3, n_classes=2)


def test_negative_labels():
    x, y = blobs()
    y[3] = -1
    with pytest.raises(ValueError, match=r"labels must lie in 0\.\.1.*found -1\.\.1"):
        build_task(x, y, n_clusters=3, test=blobs(20, 1))


def test_n_classes_too_small():
    x, y = blobs()
    y[::7] = 2
    with pytest.raises(ValueError, match=r"labels must lie in 0\.\.1, found 0\.\.2"):
        build_task(x, y, n_clusters=3, test=blobs(20, 1), n_classes=2)


def test_test_labels_out_of_range():
    x, y = blobs()
    xt, yt = blobs(20, 1)
    yt[0] = 5
    with pytest.raises(ValueError, match=r"test labels must lie in 0\.\.1"):
        build_task(x, y, n_clusters=3, test=(xt, yt))


def test_float_labels_for_classification():
    x, y = blobs()
    with pytest.raises(ValueError, match="labels must be integers"):
        build_task(x, y.astype(np.float64), n_clusters=3, test=blobs(20, 1))


def test_cluster_without_validation_samples():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 2)).astype(np.float32)
    y = np.zeros(12, dtype=np.int64)
    train = Split(x, y, np.arange(12) % 3)  # clusters 0, 1, 2
    val = Split(x[:6], y[:6], np.array([0, 1, 0, 1, 0, 1]))  # cluster 2 missing
    with pytest.raises(ValueError, match=r"cluster\(s\) \[2\] have no validation samples"):
        ClusteredTask("t", train, val, train, 3, n_classes=2)


def test_cluster_without_training_samples():
    x = np.zeros((6, 2), dtype=np.float32)
    y = np.zeros(6, dtype=np.int64)
    train = Split(x, y, np.array([0, 0, 1, 1, 3, 3]))
    val = Split(x, y, np.array([0, 1, 2, 3, 0, 1]))
    with pytest.raises(ValueError, match=r"cluster\(s\) \[2\] have no training samples"):
        ClusteredTask("t", train, val, val, 4, n_classes=2)


def test_mismatched_lengths():
    x, y = blobs()
    with pytest.raises(ValueError, match="disagree on the number of samples: 120 vs 119"):
        build_task(x, y[:-1], n_clusters=3, test=blobs(20, 1))
    xs = np.zeros((6, 2), dtype=np.float32)
    good = Split(xs, np.zeros(6, dtype=np.int64), np.arange(6) % 3)
    short_y = Split(xs, np.zeros(5, dtype=np.int64), np.arange(6) % 3)
    with pytest.raises(ValueError, match="train: x, y and cluster ids must have the same"):
        ClusteredTask("t", short_y, good, good, 3, n_classes=2)
    short_c = Split(xs, np.zeros(6, dtype=np.int64), np.arange(5) % 3)
    with pytest.raises(ValueError, match="test: x, y and cluster ids must have the same"):
        ClusteredTask("t", good, good, short_c, 3, n_classes=2)


def test_cluster_ids_out_of_range_and_bad_oracle():
    xs = np.zeros((6, 2), dtype=np.float32)
    y = np.zeros(6, dtype=np.int64)
    good = Split(xs, y, np.arange(6) % 3)
    with pytest.raises(ValueError, match=r"cluster ids must lie in 0\.\.2, found 0\.\.3"):
        ClusteredTask("t", good, good, Split(xs, y, np.arange(6) % 4), 3, n_classes=2)
    with pytest.raises(ValueError, match="oracle_partition has length 2"):
        ClusteredTask("t", good, good, good, 3, n_classes=2, oracle_partition=np.array([0, 1]))
    with pytest.raises(ValueError, match="loss must be"):
        ClusteredTask("t", good, good, good, 3, loss="mse", n_classes=2)


def test_build_task_argument_errors():
    x, y = blobs()
    with pytest.raises(ValueError, match="exactly one of n_clusters"):
        build_task(x, y, test=blobs(20, 1))
    with pytest.raises(ValueError, match="give a test set"):
        build_task(x, y, n_clusters=3)
    with pytest.raises(ValueError, match="n_samples, n_features"):
        build_task(x[:, 0], y, n_clusters=3, test=blobs(20, 1))
    with pytest.raises(ValueError, match="cannot form 200 clusters"):
        build_task(x, y, n_clusters=200, test=blobs(20, 1))


def test_a_valid_task_builds():
    x, y = blobs()
    task = build_task(x, y, n_clusters=3, test=blobs(20, 1))
    assert task.n_clusters == 3 and task.n_classes == 2
    assert len(task.train) + len(task.val) == 120 and len(task.test) == 20
    assert task.cluster_sizes.sum() == len(task.train)
    assert (task.cluster_sizes > 0).all() and (task.val_cluster_sizes > 0).all()


def test_int32_labels_are_trainable():
    from sgem.train import TrainConfig, Trainer

    x, y = blobs()
    task = build_task(x, y.astype(np.int32), n_clusters=3, test=blobs(20, 1))
    trainer = Trainer(task, TabularSpace(n_nodes=1), TrainConfig(steps=1))
    trainer.train(Arch(("linear",), (0,)), np.ones(3, dtype=bool), seed=0)


def test_missing_n_classes_is_a_clear_value_error():
    xs = np.zeros((6, 2), dtype=np.float32)
    good = Split(xs, np.zeros(6, dtype=np.int64), np.arange(6) % 3)
    with pytest.raises(ValueError, match="n_classes"):
        ClusteredTask("t", good, good, good, 3)


def test_unknown_op_in_the_tabular_space():
    with pytest.raises(ValueError, match=r"unknown op\(s\) \['conv3x3'\]"):
        TabularSpace(op_names=["linear", "conv3x3"])
    space = TabularSpace(op_names=["linear", "rbf"], n_nodes=2)
    with pytest.raises(ValueError, match=r"unknown op\(s\) \['relu'\]"):
        space.validate(Arch(("linear", "relu"), (0, 1)))


def test_more_experts_than_clusters_fails_before_training():
    x, y = blobs()
    task = build_task(x, y, n_clusters=3, test=blobs(20, 1))
    search = SGEM(TabularSpace(n_nodes=2), SearchConfig(n_experts=4), seed=0, progress=False)
    with pytest.raises(ValueError, match=r"K=4 exceeds the number of clusters M=3"):
        search.fit(task)
    assert not hasattr(search, "store_")  # nothing was trained


# -- metrics and exploration ------------------------------------------------------------


def brute_force_match(assignment, oracle) -> float:
    """Best fraction of agreement over every one-to-one relabelling of the assignment."""
    a_labels, o_labels = sorted(set(assignment)), sorted(set(oracle))
    best = 0
    size = max(len(a_labels), len(o_labels))
    padded = o_labels + [None] * (size - len(o_labels))
    for perm in itertools.permutations(padded, len(a_labels)):
        mapping = dict(zip(a_labels, perm, strict=True))
        best = max(best, sum(mapping[a] == o for a, o in zip(assignment, oracle, strict=True)))
    return best / len(assignment)


def test_partition_match_relabelled_is_one():
    oracle = np.array([0, 0, 1, 1, 2, 2, 0])
    relabel = {0: 2, 1: 0, 2: 1}
    assert partition_match(np.array([relabel[o] for o in oracle]), oracle) == 1.0
    assert partition_match(oracle + 10, oracle) == 1.0


def test_partition_match_hand_count():
    # expert 0 <-> group 0 (2 agree), expert 2 <-> group 1 (2 agree), expert 1 unmatched
    assignment = np.array([0, 0, 1, 1, 2, 2])
    oracle = np.array([0, 0, 0, 1, 1, 1])
    assert partition_match(assignment, oracle) == pytest.approx(4 / 6)
    # all clusters on one expert: only the largest group can agree
    assert partition_match(np.zeros(5, int), np.array([0, 1, 1, 1, 0])) == pytest.approx(3 / 5)


def test_partition_match_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(30):
        m = int(rng.integers(3, 9))
        a = rng.integers(0, int(rng.integers(1, 4)), size=m)
        o = rng.integers(0, int(rng.integers(1, 4)), size=m)
        assert partition_match(a, o) == pytest.approx(brute_force_match(a.tolist(), o.tolist()))


def test_partition_match_shape_mismatch():
    with pytest.raises(ValueError, match="differ"):
        partition_match(np.zeros(3), np.zeros(4))


def test_residual_profiles_remove_each_observations_mean():
    losses = np.array([[1.0, 2.0, 6.0], [4.0, 4.0, 10.0]])  # (S=2 observations, M=3)
    profiles = residual_profiles(losses)
    np.testing.assert_allclose(profiles, [[-2.0, -2.0], [-1.0, -2.0], [3.0, 4.0]])
    clipped = residual_profiles(losses, clip=5.0)  # rows become [1, 2, 5] and [4, 4, 5]
    np.testing.assert_allclose(clipped, [[-5 / 3, -1 / 3], [-2 / 3, -1 / 3], [7 / 3, 2 / 3]])


def test_affinity_groups_recover_anticorrelated_groups():
    rng = np.random.default_rng(0)
    group_a, group_b = [0, 2, 5], [1, 3, 4]
    n_obs = 40
    signal = rng.normal(size=n_obs)
    offset = rng.normal(scale=5.0, size=n_obs)  # the global strength of each observation
    losses = offset[:, None] + 0.1 * rng.normal(size=(n_obs, 6))
    losses[:, group_a] += signal[:, None]
    losses[:, group_b] -= signal[:, None]
    groups = affinity_groups(losses, 2)
    assert groups.shape == (6,)
    assert len(set(groups[group_a])) == 1 and len(set(groups[group_b])) == 1
    assert groups[group_a[0]] != groups[group_b[0]]
    truth = np.isin(np.arange(6), group_b).astype(int)
    assert partition_match(groups, truth) == 1.0
    assert (affinity_groups(losses, 1) == 0).all()


def test_affinity_groups_clip_removes_an_outlier():
    rng = np.random.default_rng(1)
    n_obs = 40
    signal = rng.normal(size=n_obs)
    losses = 1.0 + 0.05 * rng.normal(size=(n_obs, 6))
    losses[:, :3] += 0.3 * signal[:, None]
    losses[:, 3:] -= 0.3 * signal[:, None]
    losses[0, 3] = 1e6  # one diverged run
    truth = np.array([0, 0, 0, 1, 1, 1])
    assert partition_match(affinity_groups(losses, 2, clip=2.0), truth) == 1.0
    assert partition_match(affinity_groups(losses, 2), truth) < 1.0


def test_align_labels_and_hard_logits():
    current = np.array([0, 0, 1, 1, 1, 0])
    proposal = np.array([1, 1, 0, 0, 0, 0])  # the same split with labels swapped, one moved
    aligned = align_labels(proposal, current, 2)
    np.testing.assert_array_equal(aligned, [0, 0, 1, 1, 1, 1])
    logits = hard_logits(np.array([2, 0]), 3, confidence=0.8)
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probs, [[0.1, 0.1, 0.8], [0.8, 0.1, 0.1]])


def test_reserved_characters_in_op_names_are_refused() -> None:
    from sgem.space import CellSpace

    with pytest.raises(ValueError, match=re.escape("free of '<' and '|'")):
        CellSpace(["x<0|y", "z"], n_nodes=2)


def test_mask_sampler_rejects_a_zero_minimum() -> None:
    from sgem.search.masks import log_uniform_size_mask

    with pytest.raises(ValueError, match="min_size >= 1"):
        log_uniform_size_mask(10, np.random.default_rng(0), min_size=0)


def test_joined_splits_keep_their_order_and_drop_a_half_known_source():
    a = Split(np.zeros((2, 3)), np.zeros(2), np.array([0, 1]), np.array([5, 6]))
    b = Split(np.ones((1, 3)), np.ones(1), np.array([2]), np.array([7]))
    both = a.joined(b)
    assert len(both) == 3 and both.cluster.tolist() == [0, 1, 2]
    assert both.source is not None and both.source.tolist() == [5, 6, 7]
    assert a.joined(Split(b.x, b.y, b.cluster)).source is None
