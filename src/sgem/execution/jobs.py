"""Jobs and how a batch of them travels: the types every executor shares.

A `TrainJob` is one (architecture, mask, seed) to train; a `JobResult` what came back. An
executor plans a batch into chunks (`plan_jobs`) and starts a chunk without waiting
(`submit_chunk` -> `ChunkFuture`); `submit` / `collect` do that for a whole batch. An
executor that has only `run` still works: its chunk runs when its result is asked for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..space.arch import Arch


@dataclass(frozen=True)
class TrainJob:
    arch: Arch
    mask: np.ndarray
    seed: int


@dataclass(frozen=True)
class JobResult:
    losses: np.ndarray | None
    seconds: float
    device: str
    error: str | None = None


def job_seed(run_seed: int, arch: Arch, mask: np.ndarray) -> int:
    """A training seed derived from the content of the job, not from its position in the
    run: the same (arch, mask) always trains identically, whichever worker runs it and
    whether or not the run was interrupted and resumed."""
    text = f"{run_seed}|{arch.key}|{''.join('1' if b else '0' for b in mask)}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") % (2**31 - 1)


class Executor(Protocol):
    name: str

    def run(self, jobs: Sequence[TrainJob]) -> list[JobResult]: ...

    def close(self) -> None: ...


#: builds the object that trains candidates in a worker: (task, space, train config, device)
#: -> something with `train(arch, mask, seed)` (default: `sgem.train.trainer.Trainer`). A
#: stand-in such as `sgem.execution.latency.LatencyModel` must be picklable (it travels to workers).
TrainerFactory = Callable[[Any, Any, Any, str], Any]


def make_trainer(factory: TrainerFactory | None, task, space, train_config, device: str):
    """The trainer a worker builds: `factory`'s, else the real `Trainer`."""
    if factory is not None:
        return factory(task, space, train_config, device)
    from ..train.trainer import Trainer

    return Trainer(task, space, train_config, device=device)


class ChunkFuture(Protocol):
    """One chunk on its way: `done()` never blocks; `result()` waits and never raises (a
    failure comes back as `JobResult`s with the traceback)."""

    def done(self) -> bool: ...

    def result(self) -> list[JobResult]: ...


class Deferred:
    """A chunk that runs when its result is first asked for (inline, and executors that
    only have `run`): in the caller's process, at a point fixed by the caller's code."""

    def __init__(self, run: Callable[[list[TrainJob]], list[JobResult]], jobs) -> None:
        self._run, self._jobs = run, list(jobs)
        self._out: list[JobResult] | None = None

    def done(self) -> bool:
        return self._out is not None

    def result(self) -> list[JobResult]:
        if self._out is None:
            self._out = self._run(self._jobs)
        return self._out


def plan_jobs(executor: Executor, jobs: Sequence[TrainJob]) -> list[list[int]]:
    """The chunks `executor` trains `jobs` in (one chunk of everything for an executor
    without `plan_jobs`: its `run` then plans by itself)."""
    planner = getattr(executor, "plan_jobs", None)
    if planner is None:
        return [list(range(len(jobs)))] if jobs else []
    return planner(jobs)


def submit_chunk(executor: Executor, jobs: Sequence[TrainJob]) -> ChunkFuture:
    """Start one chunk (see `plan_jobs`); an executor without `submit_chunk` runs it
    through `run` when the result is asked for (so an executor that has `plan_jobs` but
    no `submit_chunk` must train what `run` gets as one chunk: planning is not idempotent,
    `TrainConfig.min_chunks` splits a chunk again)."""
    start = getattr(executor, "submit_chunk", None)
    return Deferred(executor.run, jobs) if start is None else start(list(jobs))


@dataclass
class Submission:
    """A batch on its way: its chunks (job indices) and one future per chunk."""

    n_jobs: int
    chunks: list[list[int]]
    futures: list[ChunkFuture]


def submit(executor: Executor, jobs: Sequence[TrainJob]) -> Submission:
    """Start a whole batch without waiting; `collect` gives its results in job order."""
    chunks = plan_jobs(executor, jobs)
    futures = [submit_chunk(executor, [jobs[i] for i in c]) for c in chunks]
    return Submission(len(jobs), chunks, futures)


def collect(submission: Submission) -> list[JobResult]:
    """Wait for a submitted batch: one `JobResult` per job, in job order."""
    outs = [f.result() for f in submission.futures]
    return gather(submission.n_jobs, submission.chunks, outs)


def gather(n: int, chunks: list[list[int]], outs: list[list[JobResult]]) -> list[JobResult]:
    """Per-chunk results back in job order."""
    results: list[JobResult | None] = [None] * n
    for chunk, out in zip(chunks, outs, strict=True):
        for i, res in zip(chunk, out, strict=True):
            results[i] = res
    return results  # type: ignore[return-value]


__all__ = [
    "ChunkFuture",
    "Deferred",
    "Executor",
    "JobResult",
    "Submission",
    "TrainJob",
    "TrainerFactory",
    "collect",
    "gather",
    "job_seed",
    "make_trainer",
    "plan_jobs",
    "submit",
    "submit_chunk",
]
