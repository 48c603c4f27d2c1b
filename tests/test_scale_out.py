"""Scale-out: batch acquisition, pipelined S-steps (the same search on every executor, exact
resume after a crash), and the default S-step unchanged."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import torch

from sgem.data import make_toy_task
from sgem.errors import SgemUserError
from sgem.execution.executors import (
    InlineExecutor,
    ProcessExecutor,
    TrainJob,
    collect,
    job_seed,
    submit,
)
from sgem.execution.latency import LatencyModel, synthetic_losses
from sgem.search import SGEM, SearchConfig
from sgem.search.acquisition import acquire, arch_similarity
from sgem.search.architecture import ExpertPool, draw_pool
from sgem.search.ledger import Ledger
from sgem.search.store import ObservationStore
from sgem.space import Arch, TabularSpace
from sgem.surrogate import SurrogateConfig
from sgem.train import TrainConfig, Trainer

TINY = {
    "n_iterations": 3,
    "n_init": 6,
    "pool_size": 10,
    "mc_masks": 2,
    "routing_steps": 2,
    "acquisitions_per_expert": 1,
    "explore_every": 2,
    "refit_budget": 2,
    "final_candidates": 2,
    "finalist_budget": 1,
    "train": TrainConfig(steps=10),
    "surrogate": SurrogateConfig(hidden=16, epochs_first=30, epochs_refit=10, mc_samples=4),
}


@pytest.fixture(autouse=True)
def one_thread():
    """Workers train on one thread: the search process too, so inline and processes compute
    bit for bit the same."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class _Crash(Exception):
    pass


class _CrashingInline:
    """Inline training (chunks run when collected), recording what it trained; it dies
    like a killed process at its `crash_at`-th call."""

    name = "crashing"

    def __init__(self, inner: InlineExecutor, crash_at: int = 0) -> None:
        self.inner, self.crash_at, self.calls = inner, crash_at, 0
        self.trained: list[str] = []

    def plan_jobs(self, jobs):
        return self.inner.plan_jobs(jobs)

    def run(self, jobs):
        return self._train(jobs, self.inner.run)  # a whole batch: the inner executor plans

    def submit_chunk(self, jobs):
        from sgem.execution.executors import Deferred

        # a planned chunk, trained as one when collected
        return Deferred(lambda chunk: self._train(chunk, self.inner.runner.run), jobs)

    def _train(self, jobs, train):
        self.calls += 1
        if self.calls == self.crash_at:
            raise _Crash
        self.trained += [j.arch.key for j in jobs]
        return train(jobs)

    def close(self) -> None:
        pass


class StubModel:
    """A deterministic stand-in for the surrogate: a mean from the cell's ops, noise from
    the seed (so the S-step's choice depends on the S-step's code only)."""

    net = None
    clip_value_ = 2.0

    def predict_mc(self, archs, masks, seed, n_samples=None):
        rng = np.random.default_rng(seed)
        masks = np.asarray(masks, dtype=np.float64)
        score = np.array(
            [sum(len(op) * (i + 1) for i, op in enumerate(a.ops)) % 17 / 17 for a in archs]
        )
        mean = score[:, None] + 0.3 * masks
        return mean[None] + 0.2 * rng.normal(size=(6, *masks.shape))


def s_step_jobs(config: SearchConfig) -> list[tuple[str, str, str]]:
    space = TabularSpace()
    rng = np.random.default_rng(7)
    m, k = 8, 2
    routing = rng.dirichlet(np.ones(k), size=m)
    q = rng.dirichlet(np.ones(k), size=m)
    sizes = rng.integers(20, 60, size=m).astype(np.float64)
    assignment = routing.argmax(axis=1)
    pools = []
    for e in range(k):
        archs = draw_pool(space, space.sample(rng), 12, rng)
        masks = (rng.random((3, m)) < routing[:, e]).astype(np.float64)
        scores = StubModel().predict_mc(archs, np.ones((len(archs), m)), seed=e).mean(0).mean(1)
        pools.append(ExpertPool(archs, scores, masks))
    jobs = acquire(StubModel(), config, 3, pools, q, routing, assignment, sizes, rng, 2)
    return [(a.key, "".join("1" if b else "0" for b in mask), phase) for a, mask, phase in jobs]


def test_the_default_s_step_is_unchanged() -> None:
    """Pinned with the code before batch acquisition existed (batch_size = 0)."""
    assert s_step_jobs(SearchConfig(acquisitions_per_expert=3, lcb_shortlist=5)) == [
        ("identity<0|relu<0|linear<2", "00001101", "incumbent"),
        ("shift<0|dropout<0|shift<1", "00001111", "s-step"),
        ("identity<0|relu<0|linear<2", "10001101", "s-step"),
        ("shift<0|linear<1|linear<1", "10001111", "s-step"),
        ("dropout<0|linear<1|shift<1", "11110010", "incumbent"),
        ("dropout<0|linear<1|shift<1", "00110000", "s-step"),
        ("identity<0|linear<0|shift<2", "01111110", "s-step"),
        ("rbf<0|rbf<1|rbf<1", "11111100", "s-step"),
    ]


@pytest.mark.parametrize("q", [1, 6, 9])
def test_batch_acquisition_proposes_q_distinct_jobs_spread_over_the_experts(q: int) -> None:
    jobs = s_step_jobs(SearchConfig(batch_size=q, lcb_shortlist=5))
    chosen = [j for j in jobs if j[2] == "s-step"]
    assert len(chosen) == q
    assert len({(a, m) for a, m, _ in jobs}) == len(jobs)
    incumbents = [j for j in jobs if j[2] == "incumbent"]
    assert len(incumbents) == 2 and jobs[:2] == incumbents
    # the experts take turns: expert 0's picks come at even positions, expert 1's at odd
    per_expert = [sum(1 for i in range(q) if i % 2 == e) for e in range(2)]
    assert sorted(per_expert) == sorted([q - q // 2, q // 2])


def test_the_believer_kernel_is_an_overlap_kernel() -> None:
    a = Arch(("rbf", "linear", "shift"), (0, 1, 1))
    assert arch_similarity(a, a) == 1.0
    assert arch_similarity(a, Arch(("rbf", "linear", "relu"), (0, 1, 1))) == pytest.approx(2 / 3)
    assert arch_similarity(a, Arch(("rbf", "linear", "shift"), (0, 0, 1))) == pytest.approx(2 / 3)
    archs = TabularSpace().sample_many(30, np.random.default_rng(0))
    gram = np.array([[arch_similarity(x, y) for y in archs] for x in archs])
    assert np.linalg.eigvalsh(gram).min() > -1e-9  # positive semi-definite


def test_bad_scale_out_settings_are_clear_errors() -> None:
    with pytest.raises(SgemUserError, match="batch_size"):
        SearchConfig(batch_size=-1)
    with pytest.raises(SgemUserError, match="batch_size"):
        SearchConfig(batch_size=2.5)  # type: ignore[arg-type]
    with pytest.raises(SgemUserError, match="pipeline"):
        SearchConfig(pipeline=-1)
    with pytest.raises(SgemUserError, match="pipeline"):
        SearchConfig(pipeline=True)  # a depth, not a switch: 1 is one batch ahead


def test_submitted_batches_reuse_in_flight_jobs_and_show_results_in_request_order() -> None:
    task, space = make_toy_task(0), TabularSpace()
    executor = _CrashingInline(InlineExecutor(LatencyModel(0.0)(task, space, TrainConfig(), "cpu")))
    store = ObservationStore(task.n_clusters)
    ledger = Ledger(store, executor, seed=0)
    rng = np.random.default_rng(1)
    a, b, c = space.sample_many(3, rng)
    mask = np.ones(task.n_clusters, dtype=bool)
    first = ledger.submit([(a, mask, "s-step"), (b, mask, "s-step")], 1)
    second = ledger.submit([(b, mask, "s-step"), (c, mask, "s-step")], 2)
    assert len(store) == 0 and ledger.open_tickets == 2
    with pytest.raises(RuntimeError, match="order"):
        ledger.collect(second)
    done_first = ledger.collect(first)
    done_second = ledger.collect(second)
    assert sorted(executor.trained) == sorted([a.key, b.key, c.key])
    assert done_second[0] is done_first[1]  # b was trained once, by the first batch
    assert [o.arch for o in store.observations] == [a, b, c]
    expected = synthetic_losses(c, mask, task.oracle_partition, task.cluster_sizes)
    np.testing.assert_allclose(done_second[1].losses, expected)


def test_submit_collect_equals_run() -> None:
    task, space = make_toy_task(0), TabularSpace()
    executor = InlineExecutor(Trainer(task, space, TrainConfig(steps=5)))
    rng = np.random.default_rng(2)
    jobs = []
    for arch in space.sample_many(3, rng):
        mask = rng.random(task.n_clusters) < 0.5
        mask[0] = True
        jobs.append(TrainJob(arch, mask, job_seed(0, arch, mask)))
    for got, want in zip(collect(submit(executor, jobs)), executor.run(jobs), strict=True):
        np.testing.assert_array_equal(got.losses, want.losses)


def _key_fields(result) -> dict:
    return {
        "assignment": result.assignment.tolist(),
        "architectures": [a.key for a in result.architectures],
        "n_trained": result.n_trained,
        "region_val_losses": result.region_val_losses,
        "trace": [
            {k: v for k, v in row.items() if k not in ("seconds", "phase_seconds")}
            for row in result.trace
        ],
    }


@pytest.fixture(scope="module")
def pipelined_inline() -> dict:
    task, space = make_toy_task(1), TabularSpace()
    cfg = SearchConfig(**TINY, batch_size=4, pipeline=1)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = SGEM(space, cfg, seed=1, progress=False).fit(task, executor="inline")
    finally:
        torch.set_num_threads(before)
    return _key_fields(result)


def test_pipelined_search_is_the_same_inline_and_on_processes(pipelined_inline) -> None:
    task, space = make_toy_task(1), TabularSpace()
    cfg = SearchConfig(**TINY, batch_size=4, pipeline=1)
    executor = ProcessExecutor(task, space, cfg.train, workers=2, device="cpu")
    try:
        result = SGEM(space, cfg, seed=1, progress=False).fit(task, executor=executor)
    finally:
        executor.close()
    assert _key_fields(result) == pipelined_inline
    trained = [row["trained"] for row in pipelined_inline["trace"]]
    assert len(trained) == TINY["n_iterations"] and min(trained) >= 4


def test_pipelined_resume_after_a_crash_reproduces_the_uninterrupted_search(
    pipelined_inline, tmp_path
) -> None:
    task, space = make_toy_task(1), TabularSpace()
    cfg = SearchConfig(**TINY, batch_size=4, pipeline=1)
    path = tmp_path / "store.sqlite"
    store = ObservationStore(task.n_clusters, path)
    search = SGEM(space, cfg, seed=1, progress=False)
    executor = _CrashingInline(InlineExecutor(Trainer(task, space, cfg.train)), crash_at=4)
    with pytest.raises(_Crash):
        search.fit(task, store=store, executor=executor)
    assert executor.trained, "nothing trained before the crash"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT MAX(iteration) FROM checkpoints").fetchone()[0] >= 1
        completed_before = db.execute(
            "SELECT COUNT(*) FROM observations WHERE status = 'complete'"
        ).fetchone()[0]
    store.close()
    store = ObservationStore(task.n_clusters, path)
    try:
        resumed = SGEM(space, cfg, seed=1, progress=False).fit(
            task, store=store, executor="inline", resume=True
        )
    finally:
        store.close()
    assert _key_fields(resumed) == pipelined_inline
    with sqlite3.connect(path) as db:
        keys = db.execute(
            "SELECT arch, mask FROM observations WHERE status = 'complete'"
        ).fetchall()
    assert len(keys) == len(set(keys)), "a finished training was trained again"
    assert completed_before > 0
