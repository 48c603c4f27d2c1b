"""The search's step modules on their own, with a fake executor (no training): the ledger
(reuse, retry, request order, the one measured region value), the S-step's incumbent jobs,
partition measurement and the return rule."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from sgem.execution.executors import JobResult
from sgem.search import SearchConfig
from sgem.search.acquisition import acquire
from sgem.search.architecture import ExpertPool
from sgem.search.exploration import Explorer
from sgem.search.ledger import MAX_ATTEMPTS, Ledger, region_value
from sgem.search.selection import (
    canonical_partition,
    finalise,
    partition_value,
    region_jobs,
    visited_partitions,
)
from sgem.search.store import Observation, ObservationStore
from sgem.space import TabularSpace

M = 6


def fake_losses(arch, mask: np.ndarray) -> np.ndarray:
    """Deterministic per-cluster losses: an arch-dependent level, lower where trained."""
    level = 1.0 + (zlib.crc32(arch.key.encode()) % 7) / 10
    return level - 0.5 * np.asarray(mask, dtype=np.float64)


class FakeExecutor:
    """Returns `fake_losses`; fails the first `fail_first` attempts of archs in `flaky`."""

    name = "fake"

    def __init__(self, flaky: set[str] = frozenset(), fail_first: int = 1) -> None:
        self.flaky, self.fail_first, self.calls = flaky, fail_first, []
        self.attempts: dict[str, int] = {}

    def run(self, jobs):
        self.calls.append([(j.arch.key, j.mask.tobytes()) for j in jobs])
        out = []
        for j in jobs:
            n = self.attempts[j.arch.key] = self.attempts.get(j.arch.key, 0) + 1
            if j.arch.key in self.flaky and n <= self.fail_first:
                out.append(JobResult(None, 0.0, "cpu", "Traceback: boom"))
            else:
                out.append(JobResult(fake_losses(j.arch, j.mask), 0.1, "cpu"))
        return out

    def close(self) -> None:
        pass


class AlwaysFails(FakeExecutor):
    def run(self, jobs):
        return [JobResult(None, 0.0, "cpu", "Traceback: boom") for _ in jobs]


class FlatModel:
    """A stand-in surrogate: every architecture predicts the same losses."""

    clip_value_ = 10.0

    def predict(self, archs, masks):
        return np.ones((len(archs), M))


@pytest.fixture
def space() -> TabularSpace:
    return TabularSpace(n_nodes=2)


def _archs(space, n: int, seed: int = 0):
    return list(dict.fromkeys(space.sample_many(n, np.random.default_rng(seed))))


def _region(*clusters: int) -> np.ndarray:
    mask = np.zeros(M, dtype=bool)
    mask[list(clusters)] = True
    return mask


def test_region_value_is_minus_the_size_weighted_loss_on_the_region(space) -> None:
    arch = _archs(space, 1)[0]
    obs = Observation(arch, _region(0, 1), np.arange(1.0, M + 1), 0.0, 0, "init", 0)
    sizes = np.full(M, 10.0)
    assert region_value(obs, _region(0, 1), sizes) == -(10 * 1 + 10 * 2)
    assert region_value(obs, _region(5), sizes) == -60.0


def test_ledger_trains_duplicates_once_and_keeps_request_order(space) -> None:
    a, b = _archs(space, 2)
    executor = FakeExecutor()
    ledger = Ledger(ObservationStore(M), executor, seed=0)
    jobs = [(b, _region(1), "init"), (a, _region(0), "init"), (b, _region(1), "init")]
    done = ledger.train(jobs, 0)
    assert len(executor.calls) == 1 and len(executor.calls[0]) == 2
    assert [o.arch for o in done] == [b, a, b]
    assert [o.arch for o in ledger.store.observations] == [b, a]
    assert ledger.train([(a, _region(0), "s-step")], 1)[0] is done[1]  # reused, not retrained
    assert len(executor.calls) == 1


def test_ledger_retries_once_then_records_the_failure(space) -> None:
    good, flaky, broken = _archs(space, 3)
    executor = FakeExecutor({flaky.key, broken.key})
    executor.attempts[broken.key] = -5  # fails on every attempt it gets
    ledger = Ledger(ObservationStore(M), executor, seed=0)
    done = ledger.train([(a, _region(2), "init") for a in (good, flaky, broken)], 0)
    assert done[0] is not None and done[1] is not None and done[2] is None
    assert [len(c) for c in executor.calls] == [3, 2]  # one retry batch, then give up
    assert MAX_ATTEMPTS == 2 and ledger.failures == 3
    assert [o.arch for o in ledger.store.observations] == [good, flaky]


def test_past_the_fence_a_failed_training_is_cut_not_retried_nor_counted(space) -> None:
    """A training stopped at the time budget's fence before its first evaluation fails;
    retrying it would be cut too, and a user reading failed_trainings would look for a bug.
    Its store row stays failed, so a resumed run trains it again."""
    import time

    from sgem.train.time_fence import training_fence

    a, b = _archs(space, 2)
    executor = FakeExecutor({a.key, b.key}, fail_first=5)
    ledger = Ledger(ObservationStore(M), executor, seed=0)
    with training_fence(time.time() - 1):
        done = ledger.train([(a, _region(0), "init"), (b, _region(1), "init")], 0)
    assert done == [None, None] and len(executor.calls) == 1 and ledger.failures == 0
    assert ledger.store.lookup(a, _region(0)) is None  # trained again on resume


def test_best_value_and_measured_objective(space) -> None:
    a, b, c = _archs(space, 3)
    ledger = Ledger(ObservationStore(M), FakeExecutor(), seed=0)
    region, sizes = _region(0, 1, 2), np.arange(1.0, M + 1)
    done = ledger.train([(a, region, "x"), (b, region, "x")], 0)
    values = [region_value(o, region, sizes) for o in done]
    assert ledger.best_value(region, sizes) == max(values)
    assert ledger.best_value(region, sizes, [b, c]) == values[1]
    assert ledger.best_value(region, sizes, [c]) is None
    assert ledger.best_value(_region(4), sizes) is None
    assignment = np.array([0, 0, 0, 1, 1, 1])
    assert ledger.measured_objective([a, c], assignment, sizes) is None  # c never on {3,4,5}
    ledger.train([(c, assignment == 1, "x")], 0)
    assert ledger.measured_objective([a, c], assignment, sizes) is not None


def test_partition_value_and_region_jobs(space) -> None:
    a, b = _archs(space, 2)
    ledger = Ledger(ObservationStore(M), FakeExecutor(), seed=0)
    sizes = np.ones(M)
    assignment = np.array([0, 0, 1, 1, 1, 1])
    jobs = region_jobs(assignment, [a, b], n_experts=3)  # expert 2 has no region: no job
    assert [(j[0], j[1].tolist()) for j in jobs] == [
        (a, (assignment == 0).tolist()),
        (b, (assignment == 0).tolist()),
        (a, (assignment == 1).tolist()),
        (b, (assignment == 1).tolist()),
    ]
    assert partition_value(ledger, assignment, sizes, 2) is None
    ledger.train(jobs[:2], 0)
    assert partition_value(ledger, assignment, sizes, 2) is None
    assert partition_value(ledger, assignment, sizes, 2, untrained=float("-inf")) == -np.inf
    ledger.train(jobs[2:], 0)
    expected = ledger.best_value(assignment == 0, sizes) + ledger.best_value(assignment == 1, sizes)
    assert partition_value(ledger, assignment, sizes, 2) == expected


def test_visited_partitions_skip_relabellings_and_the_final_grouping() -> None:
    trace = [
        {"iteration": 1, "routing": [0, 0, 1, 1], "jump": None},
        {"iteration": 2, "routing": [1, 1, 0, 0], "jump": {"proposal": [0, 1, 0, 1]}},
        {"iteration": 3, "routing": [0, 1, 1, 1], "jump": {"proposal": [1, 0, 1, 0]}},
    ]
    assert visited_partitions(trace, np.array([0, 1, 1, 1])) == [
        (1, (0, 0, 1, 1)),
        (2, (0, 1, 0, 1)),
    ]
    assert canonical_partition([2, 2, 0]) == (0, 0, 1)


def test_the_s_step_measures_each_incumbent_on_its_hard_region(space) -> None:
    a, b = _archs(space, 2)
    cfg = SearchConfig(acquisitions_per_expert=0, measure_incumbents=True)
    pools = [ExpertPool([a], np.zeros(1), np.ones((1, M))), ExpertPool([b], np.zeros(1), None)]
    assignment = np.array([0, 0, 0, 0, 0, 0])  # expert 1 has no region
    jobs = acquire(None, cfg, 0, pools, None, None, assignment, None, None, 1)
    assert [(j[0], j[1].tolist(), j[2]) for j in jobs] == [(a, [True] * M, "incumbent")]


def test_an_unmeasurable_partition_is_worth_minus_infinity(space) -> None:
    a, b = _archs(space, 2)
    ledger = Ledger(ObservationStore(M), AlwaysFails(), seed=0)
    cfg = SearchConfig(pool_size=4)
    explorer = Explorer(ledger, space, FlatModel(), FlatModel(), cfg)
    assignment = np.array([0, 0, 0, 1, 1, 1])
    rng = np.random.default_rng(0)
    value, archs = explorer.measure_partition(assignment, [a, b], np.ones(M), rng, 1)
    assert value == -np.inf and archs == [a, b]


def test_the_return_rule_picks_the_best_measured_finalist(space) -> None:
    ledger = Ledger(ObservationStore(M), FakeExecutor(), seed=0)
    cfg = SearchConfig(
        n_iterations=2, final_candidates=3, refit_budget=3, finalist_budget=1, n_experts=2
    )
    incumbents = _archs(space, 2, seed=5)
    other = np.array([0, 1, 0, 1, 0, 1])
    final = np.array([0, 0, 0, 1, 1, 1])
    ledger.train(region_jobs(other, incumbents, 2), 1)  # so `other` can be screened
    trace = [{"iteration": 1, "routing": other.tolist(), "jump": None}]
    sizes = np.ones(M)
    chosen, archs, losses, selection = finalise(
        ledger, space, cfg, trace, final, incumbents, sizes, sizes, np.random.default_rng(0)
    )
    finalists = selection["finalists"]
    assert [f["partition"] for f in finalists] == [final.tolist(), other.tolist()]
    best = max(finalists, key=lambda f: f["measured_objective"])
    assert best["chosen"] and chosen.tolist() == best["partition"]
    assert selection["equals_final_iterate"] == (best["partition"] == final.tolist())
    for k, arch in enumerate(archs):  # the lowest region loss among everything on the region
        region = chosen == k
        on_region = ledger.store.on_mask(region)
        assert ledger.store.lookup(arch, region) is not None
        assert region_value(ledger.store.lookup(arch, region), region, sizes) == max(
            region_value(o, region, sizes) for o in on_region
        )
        assert losses[k] is not None


@pytest.mark.parametrize("champions", [True, False])
def test_finalists_share_the_champions_of_every_finalist_region(space, champions) -> None:
    """With `finalist_champions` the finalists are aligned to the final iterate and each
    slot's architecture set holds the best architecture measured on that slot's region of
    every finalist, so a champion of one finalist is also trained on the others' regions;
    without it, every region gets the incumbents plus the random ones."""
    ledger = Ledger(ObservationStore(M), FakeExecutor(), seed=0)
    cfg = SearchConfig(
        n_iterations=2,
        final_candidates=2,
        refit_budget=2,
        finalist_budget=1,
        n_experts=2,
        finalist_champions=champions,
    )
    incumbents = _archs(space, 2, seed=5)
    final = np.array([0, 0, 0, 1, 1, 1])
    other = np.array([1, 1, 0, 0, 0, 1])  # aligned to `final`: [0, 0, 1, 1, 1, 0]
    pool = [a for a in _archs(space, 12, seed=9) if a not in incumbents]
    ledger.train([(a, other == 1, "explore") for a in pool], 1)
    ledger.train(region_jobs(other, incumbents, 2), 1)
    best = max(
        [*pool, *incumbents],
        key=lambda a: region_value(ledger.store.lookup(a, other == 1), other == 1, np.ones(M)),
    )
    trace = [{"iteration": 1, "routing": other.tolist(), "jump": None}]
    _, _, _, selection = finalise(
        ledger,
        space,
        cfg,
        trace,
        final,
        incumbents,
        np.ones(M),
        np.ones(M),
        np.random.default_rng(0),
    )
    partitions = [f["partition"] for f in selection["finalists"]]
    assert partitions == [final.tolist(), [0, 0, 1, 1, 1, 0]]
    trained_on_final = ledger.store.lookup(best, final == 0) is not None
    assert trained_on_final == (champions or best in incumbents)
    if not champions:
        assert selection["slot_architectures"] == [3, 3]


def test_champions_come_from_exact_and_covering_masks(space) -> None:
    """A region's champions: the best architecture trained on exactly it, and the best on
    its clusters among every mask that covers it."""
    from sgem.search.exploration import champions

    ledger = Ledger(ObservationStore(M), FakeExecutor(), seed=0)
    archs = _archs(space, 8, seed=3)
    region = _region(0, 1, 2)
    assert champions(ledger, region, np.ones(M)) == []
    ledger.train([(a, region, "init") for a in archs[:4]], 0)
    ledger.train([(a, _region(0, 1, 2, 3), "init") for a in archs[4:]], 0)
    ledger.train([(a, _region(0, 1) | _region(4), "init") for a in archs], 0)  # not covering
    sizes = np.ones(M)

    def best(mask: np.ndarray, pool) -> object:
        return max(pool, key=lambda a: region_value(ledger.store.lookup(a, mask), region, sizes))

    exact = best(region, archs[:4])
    covering = max(
        [(exact, region), (best(_region(0, 1, 2, 3), archs[4:]), _region(0, 1, 2, 3))],
        key=lambda c: region_value(ledger.store.lookup(*c), region, sizes),
    )[0]
    assert champions(ledger, region, sizes) == list(dict.fromkeys([exact, covering]))


@pytest.mark.parametrize("equal_effort", [True, False])
def test_equal_effort_jumps_train_both_partitions_with_one_set(space, equal_effort) -> None:
    """With `equal_effort_jumps` the current and the proposed partition's regions k are
    trained with the same architectures; without, each with its incumbent and own pick."""
    a, b = _archs(space, 2)
    ledger = Ledger(ObservationStore(M), FakeExecutor(), seed=0)
    cfg = SearchConfig(pool_size=4, equal_effort_jumps="always" if equal_effort else "never")
    explorer = Explorer(ledger, space, FlatModel(), FlatModel(), cfg)
    current, proposal = np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 1, 1, 1, 1])
    ledger.train([(x, current == k, "init") for k in range(2) for x in _archs(space, 3, 7)], 0)
    record = explorer.evaluate_jump(
        [a, b], current, proposal, np.ones(M), np.random.default_rng(0), 1
    )
    trained = {
        name: [{o.arch for o in ledger.store.on_mask(p == k)} for k in range(2)]
        for name, p in (("current", current), ("proposal", proposal))
    }
    same = trained["proposal"][0] <= trained["current"][0]
    assert same == equal_effort
    if equal_effort:
        assert all(trained["proposal"][k] <= trained["current"][k] for k in range(2))
    assert record.accepted == (record.measured_proposal > record.measured_current)
    auto = SearchConfig(equal_effort_jumps="auto", geometric_above=40)
    assert not auto.equal_effort_for(20) and not auto.equal_effort_for(40)
    assert auto.equal_effort_for(41) and SearchConfig(n_experts=4).equal_effort_for(20)


def test_geometric_jumps_propose_the_centroid_split_in_the_first_round_only(space) -> None:
    """Coarse-to-fine: round one proposes K-means of the centroids, later rounds (and every
    round without the option) the affinity grouping."""
    from sgem.search.exploration import affinity_groups, align_labels
    from sgem.search.geometry import centroid_kmeans

    centroids = np.array([[9.0, 0], [0, 0], [0.1, 0], [0.2, 0], [0.3, 0], [9.1, 0]])
    split = (0, 1, 1, 1, 1, 0)
    assert canonical_partition(centroid_kmeans(centroids, 2, seed=0)) == split
    a, b = _archs(space, 2)
    current = np.array([0, 1, 0, 1, 0, 1])
    for enabled in (True, False):
        ledger = Ledger(ObservationStore(M), FakeExecutor(), seed=0)
        ledger.train([(a, _region(0, 1), "init"), (b, _region(2, 3, 4), "init")], 0)
        cfg = SearchConfig(pool_size=4, explore_every=4, geometric_jumps=enabled)
        explorer = Explorer(ledger, space, FlatModel(), FlatModel(), cfg, centroids=centroids)
        for t in (4, 8):
            affinity = align_labels(affinity_groups(ledger.store.losses, 2, 10.0), current, 2)
            proposal = explorer.proposal(current, t=t)
            if enabled and t == 4:
                assert canonical_partition(proposal) == split
            else:
                assert proposal.tolist() == affinity.tolist()


class RegionLosses(FakeExecutor):
    """Per-cluster losses set per trained region (every architecture alike), 1.0 elsewhere."""

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]]) -> None:
        super().__init__()
        self.table = table

    def run(self, jobs):
        out = []
        for j in jobs:
            losses = np.ones(M)
            for c, v in self.table[tuple(np.flatnonzero(j.mask))].items():
                losses[c] = v
            out.append(JobResult(losses, 0.1, "cpu"))
        return out


@pytest.mark.parametrize("moved_gain", [-0.05, 0.5])
def test_the_geometry_split_stays_unless_a_finalist_beats_it_clearly(space, moved_gain) -> None:
    """The final iterate moves cluster 2 from the geometry split's expert 0 to expert 1. Its
    regions' other clusters gain and lose by training noise (+0.15 net); the moved cluster
    itself loses 0.05 (a tie in the measured objective decided by noise: geometry stays) or
    gains 0.5 (more than two standard errors of that noise: the final iterate wins)."""
    geometry, final = np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 1, 1, 1, 1])
    table = {
        (0, 1, 2): {0: 0.5, 1: 0.5, 2: 0.5},
        (3, 4, 5): {3: 0.5, 4: 0.5, 5: 0.5},
        (0, 1): {0: 0.4, 1: 0.45},
        (2, 3, 4, 5): {2: 0.5 - moved_gain, 3: 0.45, 4: 0.5, 5: 0.55},
    }
    ledger = Ledger(ObservationStore(M), RegionLosses(table), seed=0)
    cfg = SearchConfig(n_iterations=2, refit_budget=2, finalist_budget=1, n_experts=2)
    chosen, _, _, selection = finalise(
        ledger,
        space,
        cfg,
        [],
        final,
        _archs(space, 2, seed=5),
        np.ones(M),
        np.ones(M),
        np.random.default_rng(0),
        geometry=geometry,
    )
    objective = {tuple(f["partition"]): f["measured_objective"] for f in selection["finalists"]}
    assert objective[tuple(final)] > objective[tuple(geometry)]  # the plain comparison's pick
    test = selection["geometry_test"]
    assert test["moved_clusters"] == 1
    assert test["gain"] == pytest.approx(0.15 + moved_gain)
    assert test["keeps_geometry"] == (moved_gain < 0)
    assert chosen.tolist() == (geometry if moved_gain < 0 else final).tolist()
    assert [f["chosen"] for f in selection["finalists"]].count(True) == 1
