"""Executors: processes and Ray give the same results as inline training; a dying worker or
a failing job is recorded with its traceback and retried once, never silently dropped."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from sgem.data import make_toy_task
from sgem.execution.executors import (
    InlineExecutor,
    ProcessExecutor,
    RayExecutor,
    TrainJob,
    job_seed,
)
from sgem.search import SGEM, SearchConfig
from sgem.search.store import ObservationStore
from sgem.space import Arch, TabularSpace
from sgem.train import TrainConfig, Trainer

TRAIN = TrainConfig(steps=15)


@pytest.fixture(scope="module")
def setup():
    task = make_toy_task(0)
    space = TabularSpace()
    rng = np.random.default_rng(0)
    jobs = []
    for _ in range(4):
        arch = space.sample(rng)
        mask = rng.random(task.n_clusters) < 0.5
        mask[0] = True
        jobs.append(TrainJob(arch, mask, job_seed(0, arch, mask)))
    reference = InlineExecutor(Trainer(task, space, TRAIN)).run(jobs)
    return task, space, jobs, reference


def test_job_seed_depends_on_content_only() -> None:
    a = Arch(("rbf", "linear"), (0, 1))
    m = np.array([True, False, True])
    assert job_seed(0, a, m) == job_seed(0, Arch(("rbf", "linear"), (0, 1)), m.copy())
    assert job_seed(0, a, m) != job_seed(1, a, m)
    assert job_seed(0, a, m) != job_seed(0, a, ~m)


def test_process_executor_matches_inline(setup) -> None:
    task, space, jobs, reference = setup
    ex = ProcessExecutor(task, space, TRAIN, workers=2, device="cpu")  # as the reference
    try:
        results = ex.run(jobs)
    finally:
        ex.close()
    for got, want in zip(results, reference, strict=True):
        assert got.error is None
        np.testing.assert_allclose(got.losses, want.losses, rtol=1e-5, atol=1e-6)


def test_the_search_process_trains_one_chunk_itself(setup) -> None:
    """With `caller_trains`, the last chunk trains in the calling process (same numbers); a
    batch of one chunk starts no worker at all."""
    task, space, jobs, reference = setup
    ex = ProcessExecutor(task, space, TRAIN, workers=2, device="cpu")
    try:
        assert ex.caller_trains  # CPU only, a tabular space: on by default
        ex.run(jobs[:1])
        assert ex._pool is None, "one chunk: no worker should have started"
        results = ex.run(jobs)  # two chunks: one here, one on a worker
    finally:
        ex.close()
    for got, want in zip(results, reference, strict=True):
        assert got.error is None
        np.testing.assert_allclose(got.losses, want.losses, rtol=1e-5, atol=1e-6)


def test_caller_trains_one_job_at_a_time_like_the_workers(setup) -> None:
    """Jobs trained one at a time (as in the image and forecasting spaces): the one the
    search process trains itself equals what inline training gives, bit for bit."""
    task, space, jobs, _ = setup
    single = replace(TRAIN, batch_candidates=1)
    reference = InlineExecutor(Trainer(task, space, single)).run(jobs)
    ex = ProcessExecutor(task, space, single, workers=2, device="cpu")
    try:
        assert ex.caller_trains
        results = ex.run(jobs)
    finally:
        ex.close()
    for got, want in zip(results, reference, strict=True):
        assert got.error is None
        np.testing.assert_array_equal(got.losses, want.losses)


def test_dying_worker_fails_only_its_own_job(setup, monkeypatch) -> None:
    """The jobs that shared a chunk with the dying one are re-run one at a time, so they
    match one-at-a-time training (not the vectorised chunk's float noise)."""
    task, space, jobs, _ = setup
    one_at_a_time = replace(TRAIN, batch_candidates=1)
    reference = InlineExecutor(Trainer(task, space, one_at_a_time)).run(jobs)
    monkeypatch.setenv("SGEM_TEST_CRASH_ARCH", jobs[1].arch.key)
    # one chunk of four: all three survivors shared the dying job's chunk
    ex = ProcessExecutor(
        task, space, replace(TRAIN, min_chunks=1), workers=2, caller_trains=False, device="cpu"
    )
    try:
        results = ex.run(jobs)
    finally:
        ex.close()
    assert results[1].error is not None and "died" in results[1].error
    for i in (0, 2, 3):
        if jobs[i].arch.key == jobs[1].arch.key:
            continue
        assert results[i].error is None, results[i].error
        np.testing.assert_allclose(results[i].losses, reference[i].losses, rtol=1e-5, atol=1e-6)


class _FlakyExecutor:
    """Fails every job of one architecture; counts calls."""

    name = "flaky"

    def __init__(self, inner, bad_key: str) -> None:
        self.inner, self.bad_key, self.calls = inner, bad_key, []

    def run(self, jobs):
        from sgem.execution.executors import JobResult

        self.calls.append([j.arch.key for j in jobs])
        out = self.inner.run(jobs)
        return [
            JobResult(None, 0.0, "cpu", "Traceback: boom") if j.arch.key == self.bad_key else r
            for j, r in zip(jobs, out, strict=True)
        ]

    def close(self) -> None:
        pass


def test_search_records_failures_and_retries_once(tmp_path) -> None:
    task = make_toy_task(1)
    space = TabularSpace()
    cfg = SearchConfig(
        n_iterations=1,
        n_init=6,
        pool_size=10,
        mc_masks=2,
        routing_steps=2,
        acquisitions_per_expert=1,
        explore=False,
        refit_budget=0,
        train=TrainConfig(steps=10),
    )
    store = ObservationStore(task.n_clusters, tmp_path / "store.sqlite")
    rng = np.random.default_rng(1)
    rng.normal(size=(task.n_clusters, 2))  # the search draws its routing logits first,
    space.sample_many(2, rng)  # then its two initial incumbents
    bad = space.sample(rng)  # ... then the first initial observation
    executor = _FlakyExecutor(InlineExecutor(Trainer(task, space, cfg.train)), bad.key)
    result = SGEM(space, cfg, seed=1, progress=False).fit(task, store=store, executor=executor)
    assert result.failures >= 2
    first_batch, retry_batch = executor.calls[0], executor.calls[1]
    assert bad.key in first_batch and retry_batch == [bad.key]
    import sqlite3

    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        rows = db.execute(
            "SELECT status, traceback, attempt FROM observations WHERE arch = ?", (bad.dumps(),)
        ).fetchall()
    assert sorted(r[2] for r in rows if r[0] == "failed") == [1, 2]
    assert all("boom" in r[1] for r in rows if r[0] == "failed")
    assert all(o.arch != bad for o in result.store.observations)


def test_ray_executor_matches_inline(setup) -> None:
    ray = pytest.importorskip("ray")
    task, space, jobs, reference = setup
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ex = RayExecutor(task, space, TRAIN, num_cpus=1)
        results = ex.run(jobs)
        ex.close()
    finally:
        ray.shutdown()
    for got, want in zip(results, reference, strict=True):
        assert got.error is None, got.error
        np.testing.assert_allclose(got.losses, want.losses, rtol=1e-5, atol=1e-6)


def test_unreachable_ray_address_fails_fast_and_clearly(setup) -> None:
    pytest.importorskip("ray")
    task, space, _, _ = setup
    with pytest.raises(ConnectionError, match=r"no Ray cluster answers at '127\.0\.0\.1:9'"):
        RayExecutor(task, space, TRAIN, address="127.0.0.1:9", connect_timeout_s=2)


@pytest.mark.parametrize("length", ["fixed", "validation", "validation-warm"])
def test_final_experts_retrained_on_workers_match_inline(setup, length, capsys) -> None:
    """The processes executor retrains the final MoE's experts side by side; the weights it
    sends back give exactly the model trained here one expert after another (and the
    progress bar counts each expert that comes back)."""
    from sgem.execution.progress import shown
    from sgem.final.moe_fit import train_final_moe

    task, space, jobs, _ = setup
    trainer = Trainer(task, space, TRAIN)
    assignment = np.arange(task.n_clusters) % 2
    archs = [jobs[0].arch, jobs[1].arch]
    kwargs = dict(steps=20, seed=3, length=length)
    moe_here, report_here = train_final_moe(task, trainer, assignment, archs, **kwargs)
    ex = ProcessExecutor(task, space, TRAIN, workers=2, device="cpu")
    try:
        with shown():
            moe_there, report_there = train_final_moe(
                task, trainer, assignment, archs, executor=ex, **kwargs
            )
    finally:
        ex.close()
    assert "final experts: 100%" in capsys.readouterr().err
    here, there = moe_here.state_dict(), moe_there.state_dict()
    assert here.keys() == there.keys()
    for key in here:
        assert torch.equal(here[key], there[key]), key
    assert report_here.test_nll == report_there.test_nll
    assert report_here.steps == report_there.steps
    assert report_here.final_length == report_there.final_length
    assert report_here.global_networks == report_there.global_networks


def test_auto_picks_workers_on_a_multicore_cpu_only(monkeypatch) -> None:
    import sgem.execution.executors as ex

    monkeypatch.setattr(ex, "default_threads", lambda: 2)
    assert ex.resolve_executor("auto", "cpu") == "processes"
    assert ex.resolve_executor("auto", "cuda") == "inline"
    assert ex.resolve_executor("auto", "cuda:0") == "inline"
    monkeypatch.setattr(ex, "default_threads", lambda: 1)
    assert ex.resolve_executor("auto", "cpu") == "inline"
    for kind in ("inline", "batched", "processes", "ray"):  # named kinds are kept
        assert ex.resolve_executor(kind, "cpu") == kind


def test_inline_background_chunks_equal_deferred_ones(setup) -> None:
    from sgem.execution.jobs import collect, submit
    from sgem.train.trainer import intra_op_threads

    task, space, jobs, reference = setup
    trainer = Trainer(task, space, TRAIN)
    background = InlineExecutor(trainer, threads=2)
    deferred = InlineExecutor(trainer, threads=2, background=False)
    with intra_op_threads(1):  # the chunks' thread count: background training allowed
        assert background._trains_in_background()
        assert not deferred._trains_in_background()
        try:
            a, b = collect(submit(background, jobs)), collect(submit(deferred, jobs))
        finally:
            background.close()
    for x, y, r in zip(a, b, reference, strict=True):
        np.testing.assert_array_equal(x.losses, y.losses)
        np.testing.assert_allclose(x.losses, r.losses, rtol=1e-5)
