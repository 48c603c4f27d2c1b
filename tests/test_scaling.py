"""Scaling pieces (issue 16): the mixture generator, geometric initial masks, the toy's
majority-source oracle, and the search options that switch them on."""

from __future__ import annotations

import numpy as np
import pytest

from sgem.data import make_toy_task
from sgem.data.mixtures import group_layout, make_mixture_task
from sgem.errors import SgemUserError
from sgem.metrics import partition_match
from sgem.search import SGEM, SearchConfig
from sgem.search.masks import geometric_mask
from sgem.space import TabularSpace
from sgem.train import TrainConfig


@pytest.mark.parametrize("k", [2, 4, 8])
def test_mixture_has_k_groups_two_classes_each_and_a_source_oracle(k) -> None:
    task = make_mixture_task(0, n_groups=k, n_per_group=300, n_test_per_group=50)
    assert task.n_clusters <= 10 * k
    assert task.n_classes == 2 * k
    assert sorted(np.unique(task.oracle_partition)) == list(range(k))
    assert task.meta["mean_purity"] > 0.9
    # a group's two classes come only from that group
    for split in (task.train, task.test):
        assert np.array_equal(split.y // 2, split.source)


def test_mixture_is_deterministic_per_seed() -> None:
    a = make_mixture_task(3, n_groups=4, n_per_group=200)
    b = make_mixture_task(3, n_groups=4, n_per_group=200)
    c = make_mixture_task(4, n_groups=4, n_per_group=200)
    assert np.array_equal(a.train.x, b.train.x) and np.array_equal(a.test.y, b.test.y)
    assert not np.array_equal(a.train.x, c.train.x)


def test_group_layout_spacing() -> None:
    for k in (2, 3, 8):
        centres = group_layout(k, spacing=9.0)
        gaps = np.linalg.norm(centres - np.roll(centres, 1, axis=0), axis=1)
        assert np.allclose(gaps, 9.0)


def test_geometric_mask_is_a_ball_of_log_uniform_size() -> None:
    rng = np.random.default_rng(0)
    centroids = rng.normal(size=(50, 2))
    sizes = []
    for _ in range(200):
        mask = geometric_mask(centroids, rng, min_size=3)
        size = int(mask.sum())
        sizes.append(size)
        assert 3 <= size <= 50
        # a ball: every member is closer to the members' anchor region than any outsider is
        # to it, i.e. the members are the `size` nearest clusters of some member
        inside = centroids[mask]
        anchors = [
            a
            for a in np.flatnonzero(mask)
            if set(np.argsort(np.sum((centroids - centroids[a]) ** 2, 1))[:size])
            == set(np.flatnonzero(mask))
        ]
        assert anchors, inside
    assert np.median(sizes) < 25  # log-uniform: most masks are small


def test_toy_source_oracle_equals_the_centroid_rule_at_the_paper_size() -> None:
    for seed in range(3):
        a = make_toy_task(seed)
        b = make_toy_task(seed, oracle="source")
        assert np.array_equal(a.oracle_partition, b.oracle_partition)
        assert np.array_equal(a.train.x, b.train.x)
    with pytest.raises(ValueError, match="oracle"):
        make_toy_task(0, oracle="nope")


def test_toy_centroid_rule_mislabels_tail_clusters_at_large_m() -> None:
    task = make_toy_task(0, n_per_cloud=4000, n_clusters=80, oracle="source")
    rule = (task.centroids[:, 0] >= -2.0).astype(np.int64)
    assert partition_match(rule, task.oracle_partition) < 1.0


def test_init_masks_option_is_validated() -> None:
    assert SearchConfig().init_masks == "auto"
    assert SearchConfig(init_masks="geometric").init_masks == "geometric"
    with pytest.raises(SgemUserError, match="init_masks"):
        SearchConfig(init_masks="balls")
    assert SearchConfig().geometric_jumps is False
    with pytest.raises(SgemUserError, match="geometric_jumps"):
        SearchConfig(geometric_jumps="yes")
    with pytest.raises(SgemUserError, match="geometric_above"):
        SearchConfig(geometric_above=0)


TINY = dict(
    n_iterations=1,
    n_init=6,
    pool_size=10,
    mc_masks=2,
    routing_steps=2,
    acquisitions_per_expert=1,
    explore=False,
    refit_budget=0,
    final_candidates=1,
    train=TrainConfig(steps=20),
)


@pytest.mark.parametrize(
    "mode, above, geometric", [("random", 40, False), ("geometric", 40, True), ("auto", 10, True)]
)
def test_initial_masks_follow_the_option(mode, above, geometric) -> None:
    task = make_toy_task(0, n_per_cloud=300, n_clusters=20)
    cfg = SearchConfig(init_masks=mode, geometric_above=above, **TINY)
    search = SGEM(TabularSpace(), cfg, seed=0, progress=False)
    search.fit(task)
    init = [o.mask for o in search.store_.observations if o.phase == "init"]
    d = ((task.centroids[:, None, :] - task.centroids[None, :, :]) ** 2).sum(-1)

    def is_ball(mask: np.ndarray) -> bool:
        size = int(mask.sum())
        return any(set(np.argsort(d[a])[:size]) == set(np.flatnonzero(mask)) for a in range(len(d)))

    balls = [is_ball(m) for m in init]
    assert all(balls) if geometric else not all(balls)


def test_auto_keeps_the_paper_masks_at_small_m() -> None:
    """Default behaviour at the paper's size is unchanged: random masks draw the same."""
    task = make_toy_task(0, n_per_cloud=300, n_clusters=20)
    stores = []
    for mode in ("random", "auto"):
        search = SGEM(TabularSpace(), SearchConfig(init_masks=mode, **TINY), seed=0, progress=False)
        search.fit(task)
        stores.append(np.stack([o.mask for o in search.store_.observations]))
    assert np.array_equal(*stores)
