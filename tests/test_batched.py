"""Batched training of many candidates equals one-at-a-time training (float noise aside)."""

from __future__ import annotations

import numpy as np
import pytest

from sgem.data import make_toy_task
from sgem.execution.executors import BatchedExecutor, InlineExecutor, TrainJob, job_seed
from sgem.space import Arch, TabularSpace
from sgem.train import TrainConfig, Trainer
from sgem.train.batched import MAX_CELLS, BatchedTabularTrainer, plan_chunks

NO_DROPOUT = ("linear", "rbf", "identity", "square", "shift", "relu")


@pytest.fixture(scope="module")
def trainer() -> Trainer:
    return Trainer(make_toy_task(2), TabularSpace(op_names=NO_DROPOUT), TrainConfig(steps=40))


def _jobs(space, n, seed):
    rng = np.random.default_rng(seed)
    jobs = []
    for _ in range(n):
        arch = space.sample(rng)
        mask = rng.random(20) < rng.uniform(0.15, 0.9)
        mask[rng.integers(20)] = True
        jobs.append((arch, mask, job_seed(seed, arch, mask)))
    return jobs


@pytest.fixture(scope="module")
def region_trainer() -> Trainer:
    space = TabularSpace(op_names=NO_DROPOUT, frame="region")
    return Trainer(make_toy_task(2), space, TrainConfig(steps=40))


@pytest.mark.parametrize("frame", ["global", "region"])
def test_batched_equals_one_at_a_time(trainer, region_trainer, frame) -> None:
    trainer = trainer if frame == "global" else region_trainer  # region: each its own frame
    jobs = _jobs(trainer.space, 24, seed=0)
    # cover every op at every node position at least once
    jobs += [(Arch((op, "linear", op), (0, 1, 2)), np.ones(20, bool), 7) for op in NO_DROPOUT]
    ref = [trainer.train(a, m, s).losses for a, m, s in jobs]
    got = [o.losses for o in BatchedTabularTrainer(trainer, max_batch=8).train_many(jobs)]
    rel = np.array(
        [np.max(np.abs(r - g) / (np.abs(r) + 1e-3)) for r, g in zip(ref, got, strict=True)]
    )
    assert np.median(rel) < 1e-4
    assert rel.max() < 5e-2  # a few trainings amplify rounding differences, none diverge


def test_batch_order_and_chunking_do_not_change_results(trainer) -> None:
    jobs = _jobs(trainer.space, 10, seed=1)
    a = BatchedTabularTrainer(trainer, max_batch=3).train_many(jobs)
    b = BatchedTabularTrainer(trainer, max_batch=10).train_many(jobs[::-1])[::-1]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.losses, y.losses, rtol=1e-4, atol=1e-5)


def test_batched_executor_reports_a_bad_job_alone(trainer) -> None:
    jobs = [TrainJob(a, m, s) for a, m, s in _jobs(trainer.space, 3, seed=2)]
    bad = TrainJob(jobs[0].arch, np.zeros(20, bool), 1)  # empty mask: cannot train
    results = BatchedExecutor(trainer).run([*jobs, bad])
    assert all(r.error is None for r in results[:3])
    assert results[3].error is not None and "no cluster" in results[3].error
    inline = InlineExecutor(trainer).run(jobs)
    for r, i in zip(results[:3], inline, strict=True):
        np.testing.assert_allclose(r.losses, i.losses, rtol=5e-2, atol=1e-3)


def test_chunk_plan_is_balanced_and_honours_min_chunks() -> None:
    rows = [50, 10, 40, 30, 20, 60]
    assert plan_chunks(rows, max_batch=16, width=8) == [[1, 4, 3, 2, 0, 5]]
    two = plan_chunks(rows, max_batch=16, width=8, min_chunks=2)
    assert two == [[1, 4, 3], [2, 0, 5]]  # sorted by region size, cut in equal halves
    assert plan_chunks(rows[:1], max_batch=16, width=8, min_chunks=4) == [[0]]
    seventeen = plan_chunks(list(range(17)), max_batch=16, width=8)
    assert [len(c) for c in seventeen] == [9, 8]  # not 16 + 1
    assert plan_chunks([], max_batch=4, width=8) == []
    # a chunk whose padded states would exceed MAX_CELLS is cut further
    big = plan_chunks([MAX_CELLS // 8] * 3, max_batch=16, width=8)
    assert [len(c) for c in big] == [1, 1, 1]


def test_threads_do_not_change_results() -> None:
    """Chunks run side by side in threads compute exactly what they compute one after the
    other (dropout included: each chunk has its own generator)."""
    space = TabularSpace()  # with dropout
    tr = Trainer(make_toy_task(3), space, TrainConfig(steps=20, min_chunks=3))
    jobs = [TrainJob(a, m, s) for a, m, s in _jobs(space, 9, seed=4)]
    one = InlineExecutor(tr, threads=1)
    many = InlineExecutor(tr, threads=3)
    try:
        a, b = one.run(jobs), many.run(jobs)
    finally:
        one.close()
        many.close()
    for x, y in zip(a, b, strict=True):
        assert x.error is None and y.error is None
        np.testing.assert_array_equal(x.losses, y.losses)


def test_a_failing_chunk_beside_a_vectorised_one_stays_deterministic() -> None:
    """A chunk that falls back to one-at-a-time training (it seeds torch's global RNG) runs
    beside a vectorised chunk in another thread: both must give what they give alone (one
    lock guards the global RNG for both)."""
    space = TabularSpace()  # with dropout
    tr = Trainer(make_toy_task(2), space, TrainConfig(steps=30))
    jobs = [TrainJob(a, m, s) for a, m, s in _jobs(space, 5, seed=2)]
    bad = TrainJob(jobs[0].arch, np.zeros(20, bool), 1)  # fails its chunk's program
    runs = []
    for threads in (1, 2, 2, 2):
        ex = InlineExecutor(tr, threads=threads)
        try:
            runs.append([r.losses for r in ex.run([*jobs, bad])[:5]])
        finally:
            ex.close()
    for run in runs[1:]:
        for a, b in zip(runs[0], run, strict=True):
            np.testing.assert_array_equal(a, b)
