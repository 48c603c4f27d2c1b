"""What was trained: every real training the search asks for, and what it measured.

All trainings go through `Ledger.train`, which reuses finished results (also from an
interrupted earlier process, via the store), runs the rest on the executor, retries a
failure once and makes results visible in request order, so a resumed run sees the same
data in the same order as an uninterrupted one.

`region_value` is the one definition of the *measured value of a region*: partition
jumps, finalist screening and the return rule all compare regions by it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..executors import Executor, TrainJob, job_seed
from ..space.arch import Arch
from ..store import Observation, ObservationStore
from ..timing import PhaseTimer
from .objective import measured_hard_objective

MAX_ATTEMPTS = 2  # a failed training is retried once

Job = tuple[Arch, np.ndarray, str]  # (architecture, training mask, phase)


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

    def train(self, jobs: Sequence[Job], iteration: int) -> list[Observation | None]:
        """Train (or reuse) each (arch, mask) and make results visible in request order.

        A job that fails twice is recorded as failed (with its traceback) and returns None.
        """
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
            if out.error is not None:
                self.store.fail(row, out.error)
                self.failures += 1
                retry.append((i, job, phase))
                continue
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
            results[i] = obs
        return retry

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


__all__ = ["MAX_ATTEMPTS", "Job", "Ledger", "region_value"]
