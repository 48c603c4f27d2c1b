"""One chunk of candidate trainings, in this process: what every executor runs.

Every backend (inline, processes, Ray) hands a chunk to a `ChunkRunner` where the chunk is
trained, so the numbers never depend on the backend; `plan` is how a batch is cut into
chunks (`sgem.train.batched.job_chunks`).
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .jobs import JobResult, TrainJob

if TYPE_CHECKING:
    from ..train.batched import BatchedTabularTrainer


def _run_one(trainer, job: TrainJob) -> JobResult:
    start = time.perf_counter()
    try:
        out = trainer.train(job.arch, job.mask, job.seed)
        return JobResult(out.losses, out.seconds, str(trainer.device))
    except Exception:
        return JobResult(
            None, time.perf_counter() - start, str(trainer.device), traceback.format_exc()
        )


def plan(task, space, train_config, jobs: Sequence[TrainJob]) -> list[list[int]]:
    """The chunks (lists of job indices) that `jobs` train in, whichever backend runs them."""
    from ..train.batched import job_chunks

    return job_chunks(task, space, train_config, [j.mask for j in jobs])


class ChunkRunner:
    """Trains one chunk in this process: several jobs as one vectorised program, a single
    job alone. If the program fails, its jobs run one at a time, so each reports its own
    error and one bad job never fails the others.

    Safe to call from several threads: vectorised programs share nothing mutable, and
    one-at-a-time training (which seeds torch's global RNG) holds
    `train.global_rng.GLOBAL_RNG_LOCK`, the lock vectorised chunks take to build networks."""

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self._batched: BatchedTabularTrainer | None = None
        self._lock = threading.Lock()

    def run(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        if len(jobs) > 1:
            try:
                outs = self._vectorised().train_many([(j.arch, j.mask, j.seed) for j in jobs])
                device = str(self.trainer.device)
                return [JobResult(o.losses, o.seconds, device) for o in outs]
            except Exception:
                pass
        from ..train.global_rng import GLOBAL_RNG_LOCK

        # one-at-a-time training seeds and draws from torch's global RNG: no other chunk
        # may touch it meanwhile (the inline executor trains chunks in threads)
        with GLOBAL_RNG_LOCK, self._threads():
            return [_run_one(self.trainer, job) for job in jobs]

    def _threads(self) -> contextlib.AbstractContextManager:
        """A tabular candidate trains on `batch_threads` intra-op threads whether its chunk
        is a vectorised program or a single job, so its numbers follow from the config, not
        from the process's thread count; other spaces keep the process's."""
        from ..train.batched import supports
        from ..train.trainer import intra_op_threads

        tr = self.trainer
        config = getattr(tr, "config", None)
        if config is None or not supports(tr.task, tr.space, config):
            return contextlib.nullcontext()
        return intra_op_threads(config.batch_threads)

    def _vectorised(self) -> BatchedTabularTrainer:
        with self._lock:
            if self._batched is None:
                from ..train.batched import BatchedTabularTrainer

                self._batched = BatchedTabularTrainer(self.trainer)
            return self._batched


__all__ = ["ChunkRunner", "plan"]
