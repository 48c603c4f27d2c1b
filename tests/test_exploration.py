"""Partition jumps are decided on measured objective only."""

from __future__ import annotations

import numpy as np
import pytest

from sgem.data import make_toy_task
from sgem.search import SGEM, SearchConfig
from sgem.search.geometry import geometry_partition
from sgem.search.selection import canonical_partition
from sgem.space import Arch, TabularSpace
from sgem.train import TrainConfig

LINEAR_CELL = Arch(("linear", "identity", "identity"), (0, 0, 0))
RING_CELL = Arch(("rbf", "identity", "identity"), (0, 0, 0))


@pytest.fixture(scope="module")
def search():
    task = make_toy_task(0)
    cfg = SearchConfig(
        n_iterations=1,
        n_init=8,
        pool_size=20,
        mc_masks=2,
        routing_steps=2,
        acquisitions_per_expert=1,
        explore=False,
        refit_budget=0,
        train=TrainConfig(steps=120),
    )
    s = SGEM(TabularSpace(), cfg, seed=0, progress=False)
    s.fit(task)  # sets up trainer, store, surrogate
    return s, task


def test_a_worse_partition_is_rejected(search) -> None:
    s, task = search
    oracle = task.oracle_partition  # 0 = linear, 1 = ring
    worse = oracle.copy()
    ring = np.flatnonzero(oracle == 1)
    worse[ring[:3]] = 0  # three ring clusters handed to the linear expert
    sizes = task.cluster_sizes.astype(float)
    rng = np.random.default_rng(0)
    record = s.explorer_.evaluate_jump([LINEAR_CELL, RING_CELL], oracle, worse, sizes, rng, t=99)
    assert record.accepted is False
    assert record.measured_proposal < record.measured_current
    assert record.proposal == worse.tolist()


def test_a_better_partition_is_accepted(search) -> None:
    s, task = search
    oracle = task.oracle_partition
    scrambled = np.random.default_rng(3).permutation(oracle)
    sizes = task.cluster_sizes.astype(float)
    rng = np.random.default_rng(1)
    record = s.explorer_.evaluate_jump(
        [LINEAR_CELL, RING_CELL], scrambled, oracle, sizes, rng, t=99
    )
    assert record.accepted is True
    assert record.measured_proposal > record.measured_current


def test_identical_proposal_is_not_evaluated(search) -> None:
    s, task = search
    n_before = len(s.store_)
    record = s.explorer_.evaluate_jump(
        [LINEAR_CELL, RING_CELL],
        task.oracle_partition,
        task.oracle_partition.copy(),
        task.cluster_sizes.astype(float),
        np.random.default_rng(0),
        t=99,
    )
    assert record.accepted is False and len(s.store_) == n_before


def test_returned_partition_is_the_best_measured_finalist() -> None:
    """Finalists are re-measured with one common architecture set; the winner has the best
    measured objective, recomputed here from the store, and the final iterate is a finalist."""
    task = make_toy_task(4)
    cfg = SearchConfig(
        n_iterations=4,
        n_init=12,
        pool_size=30,
        mc_masks=4,
        routing_steps=10,
        acquisitions_per_expert=1,
        explore_every=2,
        refit_budget=2,
        final_candidates=3,
        train=TrainConfig(steps=60),
    )
    result = SGEM(TabularSpace(), cfg, seed=4, progress=False).fit(task)
    sizes = task.cluster_sizes.astype(float)
    selection = result.selection
    finalists = selection["finalists"]
    assert 1 <= len(finalists) <= 3 + 1  # final_candidates, plus the geometry split
    groupings = [canonical_partition(f["partition"]) for f in finalists]
    assert len(set(groupings)) == len(groupings), "a relabelled partition is not a new finalist"
    geometry = geometry_partition(task, 2, 4)  # the Geometry-routing baseline's split
    assert canonical_partition(geometry) in groupings
    final_iterate = result.trace[-1]["routing"]
    assert any(f["partition"] == final_iterate for f in finalists)
    assert selection["equals_final_iterate"] == (result.assignment.tolist() == final_iterate)

    common: dict[int, set] = {}  # per expert slot (finalists are aligned to the final iterate)
    for f in finalists:
        partition = np.array(f["partition"])
        total = 0.0
        for k in range(2):
            region = partition == k
            if not region.any():
                continue
            on_region = [o for o in result.store.observations if np.array_equal(o.mask, region)]
            archs = {o.arch for o in on_region}
            common[k] = common[k] & archs if k in common else archs
            total += max(-(sizes[region] * o.losses[region]).sum() for o in on_region)
        assert f["measured_objective"] <= total + 1e-9
    # every finalist's region k saw at least slot k's architecture set
    for k, n_slot in enumerate(selection["slot_architectures"]):
        assert len(common[k]) >= n_slot
    chosen = [f for f in finalists if f["chosen"]]
    assert len(chosen) == 1
    assert chosen[0]["partition"] == result.assignment.tolist()
    best = max(f["measured_objective"] for f in finalists)
    test = selection["geometry_test"]  # geometry stays unless beaten by two standard errors
    if test is not None and test["keeps_geometry"]:
        assert chosen[0]["geometry"] and test["gain"] <= 2 * test["standard_error"]
    else:
        assert chosen[0]["measured_objective"] == best


def test_canonical_partition_ignores_expert_labels() -> None:
    assert canonical_partition([1, 1, 0, 2]) == canonical_partition([0, 0, 2, 1]) == (0, 0, 1, 2)
    assert canonical_partition(np.array([0, 1, 0])) != canonical_partition([0, 0, 1])


def test_the_geometry_finalist_exists_on_series_too():
    """A time-series task keeps its centroids in `meta` (descriptor space), not in
    `task.centroids`: the finalist must still be the Geometry baseline's split (it was
    silently skipped on every forecasting search before)."""
    from helpers import small_ts_space, small_ts_task

    task = small_ts_task()
    assert task.centroids is None
    search = SGEM(small_ts_space(), SearchConfig(n_experts=3), seed=2, progress=False)
    np.testing.assert_array_equal(search._geometry(task), geometry_partition(task, 3, 2))
