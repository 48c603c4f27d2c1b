"""The one search loop (`sgem.search.loop`): what a row reports at lag 0 and at lag 1, a
checkpoint written before the loop had a lag resumes exactly, and the typed hand-offs
keep the on-disk keys."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
import torch

from sgem.data import make_toy_task
from sgem.execution.executors import Deferred, InlineExecutor
from sgem.search import SGEM, SearchConfig
from sgem.search.checkpoint import decode_checkpoint, encode_checkpoint
from sgem.search.exploration import ExplorationBatch
from sgem.search.handoffs import InFlight, Iterate, TraceRow
from sgem.search.jump import Jump
from sgem.search.ledger import Ticket
from sgem.search.store import ObservationStore
from sgem.space import Arch, TabularSpace
from sgem.surrogate import SurrogateConfig
from sgem.train import TrainConfig, Trainer

TINY = {
    "n_iterations": 4,
    "n_init": 6,
    "pool_size": 10,
    "mc_masks": 2,
    "routing_steps": 2,
    "acquisitions_per_expert": 1,
    "explore_every": 1,
    "geometric_jumps": True,  # round one proposes the centroid split: on the toy, accepted
    "refit_budget": 1,
    "final_candidates": 1,
    "finalist_budget": 1,
    "train": TrainConfig(steps=10),
    "surrogate": SurrogateConfig(hidden=16, epochs_first=30, epochs_refit=10, mc_samples=4),
}
ROW_KEYS = [
    "iteration",
    "objective",
    "measured_objective",
    "routing",
    "oracle_match",
    "architectures",
    "routing_step_accepted",
    "kendall_tau",
    "jump",
    "trained",
    "n_trained",
    "failures",
    "seconds",
    "phase_seconds",
]


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class _Crash(Exception):
    pass


class _CrashingInline:
    """Inline training that dies like a killed process at its `crash_at`-th call."""

    name = "crashing"

    def __init__(self, inner: InlineExecutor, crash_at: int) -> None:
        self.inner, self.crash_at, self.calls = inner, crash_at, 0

    def plan_jobs(self, jobs):
        return self.inner.plan_jobs(jobs)

    def run(self, jobs):
        return self._train(jobs, self.inner.run)

    def submit_chunk(self, jobs):
        return Deferred(lambda chunk: self._train(chunk, self.inner.runner.run), jobs)

    def _train(self, jobs, train):
        self.calls += 1
        if self.calls == self.crash_at:
            raise _Crash
        return train(jobs)


def _fields(result) -> dict:
    return {
        "assignment": result.assignment.tolist(),
        "architectures": [a.key for a in result.architectures],
        "n_trained": result.n_trained,
        "trace": [
            {k: v for k, v in row.items() if k not in ("seconds", "phase_seconds")}
            for row in result.trace
        ],
    }


def _search(pipeline: int) -> SGEM:
    return SGEM(TabularSpace(), SearchConfig(**TINY, pipeline=pipeline), seed=2, progress=False)


@pytest.fixture(scope="module")
def task():
    return make_toy_task(2)


@pytest.fixture(scope="module")
def lag0(task) -> dict:
    return _fields(_search(0).fit(task, executor="inline"))


def _accepted(trace: list[dict]) -> list[dict]:
    return [row for row in trace if (row["jump"] or {}).get("accepted")]


def test_lag_0_rows_report_the_iterate_after_the_jump(lag0) -> None:
    """At lag 0 the next proposal starts from the jump's partition and cells: the row
    reports them (the synchronous loop's rows)."""
    accepted = _accepted(lag0["trace"])
    assert accepted, "the toy's centroid split should be accepted in round one"
    for row in accepted:
        assert row["routing"] == row["jump"]["proposal"]
        cells = [Arch.from_json(a).key for a in row["jump"]["architectures"]]
        assert row["architectures"] == cells
    untimed = [k for k in ROW_KEYS if k not in ("seconds", "phase_seconds")]
    assert all(list(row) == untimed for row in lag0["trace"])


def test_lag_1_rows_report_the_proposal_as_made(task) -> None:
    """At lag 1 the next proposals start before the batch is back: a row with an accepted
    jump still reports the partition it was proposed from."""
    trace = _search(1).fit(task, executor="inline").trace
    assert [row["iteration"] for row in trace] == list(range(1, TINY["n_iterations"] + 1))
    accepted = _accepted(trace)
    assert accepted
    assert any(row["routing"] != row["jump"]["proposal"] for row in accepted)
    assert all(list(row) == ROW_KEYS for row in trace)


def test_a_checkpoint_without_batches_in_flight_resumes_exactly(task, lag0, tmp_path) -> None:
    """The synchronous loop's checkpoints had no "in_flight" key: they resume as lag 0's."""
    path = tmp_path / "store.sqlite"
    store = ObservationStore(task.n_clusters, path)
    cfg = SearchConfig(**TINY)
    executor = _CrashingInline(InlineExecutor(Trainer(task, TabularSpace(), cfg.train)), 4)
    with pytest.raises(_Crash):
        _search(0).fit(task, store=store, executor=executor)
    store.close()
    with sqlite3.connect(path) as db:
        iteration, document = db.execute(
            "SELECT iteration, state FROM checkpoints ORDER BY iteration DESC LIMIT 1"
        ).fetchone()
        state = json.loads(document)
        assert iteration >= 1 and state.pop("in_flight") == []
        db.execute(
            "UPDATE checkpoints SET state = ? WHERE iteration = ?", (json.dumps(state), iteration)
        )
    store = ObservationStore(task.n_clusters, path)
    try:
        resumed = _search(0).fit(task, store=store, executor="inline", resume=True)
    finally:
        store.close()
    assert _fields(resumed) == lag0


def test_hand_offs_keep_the_on_disk_keys() -> None:
    space = TabularSpace()
    rng = np.random.default_rng(0)
    a, b = space.sample_many(2, rng)
    judged = Jump([0, 1, 1]).verdict((-2.0, [a, b]), (-1.0, [b, a]))
    assert judged.accepted and judged.architectures == [b, a]
    assert judged.to_json() == {
        "proposal": [0, 1, 1],
        "accepted": True,
        "measured_current": -2.0,
        "measured_proposal": -1.0,
        "architectures": [b.to_json(), a.to_json()],
    }
    same = Jump([0, 0, 1], reason="proposal equals the current routing")
    for jump in (judged, same):
        assert Jump.from_json(json.loads(json.dumps(jump.to_json()))) == jump
    iterate = Iterate(-3.5, [0, 1, 1], None, [a.key, b.key])
    row = TraceRow(2, iterate, None, True, 0.5, same, 3, 10, 0, 1.0, {"e_step": 0.1})
    assert list(row.to_json()) == ROW_KEYS
    mask = np.array([True, False, True])
    jobs = [(a, mask, "acquire"), (b, mask, "explore"), (a, ~mask, "jump"), (b, mask, "jump")]
    explored = ExplorationBatch([jobs[1]], [jobs[2]], [jobs[3]], Jump([1, 0, 0]))
    flight = InFlight(
        2, jobs[:1], explored, np.zeros((1, 3)), 0.7, [a, b], np.array([0, 1, 1]), True, iterate
    )
    flight.seconds, flight.phase_seconds = 1.0, {}
    flight.ticket = Ticket(flight.jobs, 2, [], set(), [0, 1, 2, 3])
    state = flight.to_state()
    assert set(state) == {"t", "jobs", "sizes", "predicted", "clip", "archs", "assignment"} | {
        "row",
        "jump",
        "own",
    }
    back = InFlight.from_state(decode_checkpoint(*encode_checkpoint({"iteration": 0, **state})))
    assert back.proposed == iterate and back.explored.jump == explored.jump
    assert [(x, m.tolist(), p) for x, m, p in back.jobs] == [(x, m.tolist(), p) for x, m, p in jobs]
