"""What was trained: every real training the search asks for, and what it measured.

All trainings go through `Ledger.train`, which reuses finished results (also from an
interrupted earlier process, via the store), runs the rest on the executor, retries a
failure once and makes results visible in request order, so a resumed run sees the same
data in the same order as an uninterrupted one.

`region_value` is the one definition of the *measured value of a region*: partition
jumps, finalist screening and the return rule all compare regions by it.

A pipelined search uses `submit` / `collect` instead of `train` (see `Ticket`): the batch is
started without waiting, finished chunks are committed whenever the search looks
(`harvest`), and results become visible only at `collect`, in request order. What the
search sees therefore depends on which batches it collected, never on when a worker
finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..execution.executors import (
    ChunkFuture,
    Executor,
    JobResult,
    TrainJob,
    job_seed,
    plan_jobs,
    submit_chunk,
)
from ..execution.timing import PhaseTimer
from ..space.arch import Arch
from ..train.time_fence import fence_passed
from .objective import measured_hard_objective
from .store import Observation, ObservationStore, mask_to_str

MAX_ATTEMPTS = 2  # a failed training is retried once

Job = tuple[Arch, np.ndarray, str]  # (architecture, training mask, phase)
Key = tuple[Arch, bytes]


def _key(arch: Arch, mask: np.ndarray) -> Key:
    return arch, np.asarray(mask, dtype=bool).tobytes()


def _cached(store: ObservationStore, arch: Arch, mask: np.ndarray) -> Observation | None:
    """A finished training of (arch, mask) in the store's cache, *without* making it
    visible (`store.reuse` would, and a pipelined batch must show results at collect only)."""
    return store._cache.get((arch, mask_to_str(mask)))


@dataclass
class _Chunk:
    """One planned chunk of a ticket's own trainings; `fresh` marks those not already in
    the store's cache (a resumed run reruns a chunk whole, so its numbers stay the same,
    but records only the fresh ones)."""

    jobs: list[tuple[TrainJob, str]]
    fresh: list[bool]
    rows: list[int | None]
    future: ChunkFuture | None
    recorded: bool = False


@dataclass
class Ticket:
    """A submitted batch (see `Ledger.submit`). Its own trainings are the jobs neither
    visible nor in flight in an earlier ticket when it was submitted: they are planned into
    chunks on that list, whatever the cache holds, so a resumed run trains them in the
    same chunks as an uninterrupted one."""

    jobs: list[Job]
    iteration: int
    chunks: list[_Chunk]
    own: set[Key]
    own_index: list[int]  # which of `jobs` it trains itself (first occurrences)
    results: dict[Key, Observation] = field(default_factory=dict)
    failed: list[tuple[TrainJob, str]] = field(default_factory=list)


def region_value(obs: Observation, region: np.ndarray, sizes: np.ndarray) -> float:
    """Measured value of `region` from one real training: minus the cluster-size-weighted
    validation loss on the region's clusters (higher is better; summed over regions, the
    measured objective J of a hard partition)."""
    return -float(np.sum(sizes[region] * obs.losses[region]))


class Ledger:
    """The store plus the executor: trains, reuses and retries, counting failures."""

    def __init__(
        self,
        store: ObservationStore,
        executor: Executor,
        seed: int,
        timer: PhaseTimer | None = None,
    ) -> None:
        self.store = store
        self.executor = executor
        self.seed = seed
        self.failures = 0
        self.timer = timer or PhaseTimer()  # the search's clock: trainings count here
        self._open: list[Ticket] = []  # submitted, not yet collected (in order)
        self._in_flight: set[Key] = set()

    def train(self, jobs: Sequence[Job], iteration: int) -> list[Observation | None]:
        """Train (or reuse) each (arch, mask) and make results visible in request order.

        A job that fails twice is recorded as failed (with its traceback) and returns None.
        """
        if self._open:
            raise RuntimeError("Ledger.train with submitted batches open: collect them first")
        store = self.store
        results: dict[int, Observation] = {}
        pending: list[tuple[int, TrainJob, str]] = []
        seen: dict[tuple, int] = {}
        for i, (arch, mask, phase) in enumerate(jobs):
            mask = np.asarray(mask, dtype=bool)
            key = (arch, mask.tobytes())
            if key in seen:
                continue
            seen[key] = i
            if store.lookup(arch, mask) is None and store.reuse(arch, mask) is None:
                seed = job_seed(self.seed, arch, mask)
                pending.append((i, TrainJob(arch, mask, seed), phase))
            else:
                results[i] = store.lookup(arch, mask)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            if not pending:
                break
            pending = self._attempt(pending, results, iteration, attempt)
        ordered: list[Observation | None] = []
        for arch, mask, _ in jobs:
            obs = results.get(seen[(arch, np.asarray(mask, dtype=bool).tobytes())])
            if obs is not None:
                store.reuse(obs.arch, obs.mask)  # visible, in request order
            ordered.append(obs)
        return ordered

    def _attempt(
        self,
        pending: list[tuple[int, TrainJob, str]],
        results: dict[int, Observation],
        iteration: int,
        attempt: int,
    ) -> list[tuple[int, TrainJob, str]]:
        """Run one attempt of the pending jobs; returns the ones that failed."""
        rows = [
            self.store.begin(job.arch, job.mask, job.seed, phase, iteration, attempt)
            for _, job, phase in pending
        ]
        with self.timer.phase("candidate_training"):
            outcomes = self.executor.run([job for _, job, _ in pending])
        retry = []
        for (i, job, phase), row, out in zip(pending, rows, outcomes, strict=True):
            obs = self._commit_outcome(row, job, phase, iteration, out)
            if obs is None:
                retry.append((i, job, phase))
            else:
                results[i] = obs
        return self._failed(retry)

    def _failed(self, failed: list) -> list:
        """The failed jobs to retry, counted as failures. Past the time budget's fence none:
        a training stopped there before its first evaluation was cut, not broken (its store
        row stays failed, so a resumed run trains it again), and a retry would be cut too."""
        if fence_passed():
            return []
        self.failures += len(failed)
        return failed

    def _commit_outcome(
        self, row: int | None, job: TrainJob, phase: str, iteration: int, out: JobResult
    ) -> Observation | None:
        """Commit one outcome to the store (not yet visible): the observation, or None
        for a failure (recorded with its traceback)."""
        if out.error is not None:
            self.store.fail(row, out.error)
            return None
        obs = Observation(
            job.arch,
            job.mask,
            np.asarray(out.losses),
            out.seconds,
            job.seed,
            phase,
            iteration,
            out.device,
        )
        self.store.complete(row, obs, visible=False)
        return obs

    # -- pipelined batches -----------------------------------------------------------------
    def submit(
        self, jobs: Sequence[Job], iteration: int, own: Sequence[int] | None = None
    ) -> Ticket:
        """Start a batch without waiting; `collect` (in submission order) returns what
        `train` would. A job already visible, or in flight in an earlier open ticket, is not
        trained again; it resolves when collected. `own` (a resumed run: the ticket's
        `own_index` from before) fixes which jobs the ticket trains itself."""
        if own is None:
            own, keys = [], set()
            for i, (arch, mask, _) in enumerate(jobs):
                key = _key(arch, mask)
                seen = key in keys or key in self._in_flight
                if seen or self.store.lookup(arch, mask) is not None:
                    continue
                keys.add(key)
                own.append(i)
        mine: list[tuple[TrainJob, str]] = []
        for i in own:
            arch, mask, phase = jobs[i]
            mask = np.asarray(mask, dtype=bool)
            mine.append((TrainJob(arch, mask, job_seed(self.seed, arch, mask)), phase))
        keys = {_key(j.arch, j.mask) for j, _ in mine}
        ticket = Ticket(list(jobs), iteration, [], keys, list(own))
        for plan in plan_jobs(self.executor, [job for job, _ in mine]):
            members = [mine[i] for i in plan]
            fresh = [_cached(self.store, j.arch, j.mask) is None for j, _ in members]
            rows = [
                self.store.begin(j.arch, j.mask, j.seed, phase, iteration) if new else None
                for (j, phase), new in zip(members, fresh, strict=True)
            ]
            future = submit_chunk(self.executor, [j for j, _ in members]) if any(fresh) else None
            chunk = _Chunk(members, fresh, rows, future)
            ticket.chunks.append(chunk)
            if future is None:
                self._record(ticket, chunk)
        self._open.append(ticket)
        self._in_flight |= keys
        return ticket

    def harvest(self) -> None:
        """Commit every finished chunk of the open tickets (crash safety: a resumed run
        reuses them); nothing becomes visible here."""
        for ticket in self._open:
            for chunk in ticket.chunks:
                if not chunk.recorded and chunk.future is not None and chunk.future.done():
                    self._record(ticket, chunk)

    def collect(self, ticket: Ticket) -> list[Observation | None]:
        """Wait for the oldest open ticket, retry its failures once, and make its results
        visible in request order (as `train`)."""
        if not self._open or self._open[0] is not ticket:
            raise RuntimeError("tickets are collected in the order they were submitted")
        with self.timer.phase("candidate_training"):
            for chunk in ticket.chunks:
                if not chunk.recorded:
                    self._record(ticket, chunk)
            self.harvest()
        pending = self._failed([(i, job, phase) for i, (job, phase) in enumerate(ticket.failed)])
        retried: dict[int, Observation] = {}
        for attempt in range(2, MAX_ATTEMPTS + 1):
            if not pending:
                break
            pending = self._attempt(pending, retried, ticket.iteration, attempt)
        for obs in retried.values():
            ticket.results[_key(obs.arch, obs.mask)] = obs
        self._open.pop(0)
        self._in_flight -= ticket.own
        ordered: list[Observation | None] = []
        for arch, mask, _ in ticket.jobs:
            obs = ticket.results.get(_key(arch, mask))
            if obs is None:  # visible at submission, or trained by an earlier ticket
                obs = self.store.lookup(arch, mask)
            if obs is not None:
                self.store.reuse(obs.arch, obs.mask)  # visible, in request order
            ordered.append(obs)
        return ordered

    @property
    def open_tickets(self) -> int:
        return len(self._open)

    def _record(self, ticket: Ticket, chunk: _Chunk) -> None:
        """Commit one chunk's results (waiting for them if need be)."""
        outs = chunk.future.result() if chunk.future is not None else [None] * len(chunk.jobs)
        for (job, phase), new, row, out in zip(
            chunk.jobs, chunk.fresh, chunk.rows, outs, strict=True
        ):
            key = _key(job.arch, job.mask)
            if not new:  # finished by an earlier, interrupted process
                cached = _cached(self.store, job.arch, job.mask)
                assert cached is not None
                ticket.results[key] = cached
                continue
            assert out is not None
            obs = self._commit_outcome(row, job, phase, ticket.iteration, out)
            if obs is None:
                ticket.failed.append((job, phase))
            else:
                ticket.results[key] = obs
        chunk.recorded = True

    def best_value(
        self, region: np.ndarray, sizes: np.ndarray, archs: Sequence[Arch] | None = None
    ) -> float | None:
        """Best `region_value` over the visible trainings on exactly `region` (only those of
        `archs`, in that order, if given); None if there is none."""
        if archs is None:
            trained = self.store.on_mask(region)
        else:
            trained = [o for a in archs if (o := self.store.lookup(a, region)) is not None]
        values = [region_value(o, region, sizes) for o in trained]
        return max(values) if values else None

    def measured_objective(
        self, archs: Sequence[Arch], assignment: np.ndarray, sizes: np.ndarray
    ) -> float | None:
        """Measured J of a hard iterate if each expert was trained on exactly its region."""
        rows = []
        for k, arch in enumerate(archs):
            region = assignment == k
            if not region.any():
                rows.append(np.zeros(len(assignment)))
                continue
            obs = self.store.lookup(arch, region)
            if obs is None:
                return None
            rows.append(obs.losses)
        return measured_hard_objective(assignment, np.stack(rows), sizes)


__all__ = ["MAX_ATTEMPTS", "Job", "Ledger", "Ticket", "region_value"]
