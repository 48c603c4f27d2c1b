"""Where candidate trainings run: inline, in local worker processes, or on Ray.

All backends take a batch of independent `TrainJob`s and return one `JobResult` per job,
in job order. A job that raises (or whose worker dies) comes back with its traceback;
retrying and recording are the search's business, so every backend behaves the same.
"""

from __future__ import annotations

import hashlib
import os
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .space.arch import Arch


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


def _run_one(trainer, job: TrainJob) -> JobResult:
    start = time.perf_counter()
    try:
        out = trainer.train(job.arch, job.mask, job.seed)
        return JobResult(out.losses, out.seconds, str(trainer.device))
    except Exception:
        return JobResult(
            None, time.perf_counter() - start, str(trainer.device), traceback.format_exc()
        )


class InlineExecutor:
    """Trains in the search process, one job after the other (tests, debugging)."""

    name = "inline"

    def __init__(self, trainer) -> None:
        self.trainer = trainer

    def run(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        return [_run_one(self.trainer, job) for job in jobs]

    def close(self) -> None:
        pass


class BatchedExecutor:
    """Trains a batch of small tabular candidates as one vectorised program (in-process).

    Same results as inline training up to floating-point summation order (dropout draws
    differ); see `sgem.train.batched`.
    """

    name = "batched"

    def __init__(self, trainer, max_batch: int = 16) -> None:
        from .train.batched import BatchedTabularTrainer

        self.batched = BatchedTabularTrainer(trainer, max_batch=max_batch)
        self.fallback = InlineExecutor(trainer)

    def run(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        if not jobs:
            return []
        try:
            outs = self.batched.train_many([(j.arch, j.mask, j.seed) for j in jobs])
        except Exception:
            # one bad job must not fail the batch: fall back to one-at-a-time, which
            # reports each job's own error
            return self.fallback.run(jobs)
        device = str(self.batched.device)
        return [JobResult(o.losses, o.seconds, device) for o in outs]

    def close(self) -> None:
        pass


# -- local processes ------------------------------------------------------------------------
_WORKER_TRAINER = None


def _worker_init(task, space, train_config, devices: list[str], threads: int) -> None:
    global _WORKER_TRAINER
    import torch

    from .train.trainer import Trainer

    torch.set_num_threads(threads)
    ident = os.getpid()
    device = devices[ident % len(devices)] if devices else "cpu"
    _WORKER_TRAINER = Trainer(task, space, train_config, device=device)


def _worker_run(job: TrainJob) -> JobResult:
    if os.environ.get("SGEM_TEST_CRASH_ARCH") == job.arch.key:
        os._exit(1)  # test hook: simulate a worker that dies mid-job
    return _run_one(_WORKER_TRAINER, job)


class ProcessExecutor:
    """A local pool of worker processes; each builds its own trainer once.

    With GPUs, worker i uses GPU (pid mod n_gpus). A worker that dies fails only the jobs
    it took; the pool is rebuilt for the next batch.
    """

    name = "processes"

    def __init__(self, task, space, train_config, workers: int = 2, threads: int = 1) -> None:
        import torch

        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        self._init_args = (task, space, train_config, devices, threads)
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            import multiprocessing as mp

            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=mp.get_context("spawn"),
                initializer=_worker_init,
                initargs=self._init_args,
            )
        return self._pool

    def _run_batch(self, jobs: Sequence[TrainJob]) -> tuple[list[JobResult], list[int]]:
        """Submit all jobs; returns results and the indices lost to a dying worker."""
        results: list[JobResult | None] = [None] * len(jobs)
        lost: list[int] = []
        pool = self._get_pool()
        futures = {pool.submit(_worker_run, job): i for i, job in enumerate(jobs)}
        for future in as_completed(futures):
            i = futures[future]
            try:
                results[i] = future.result()
            except BrokenProcessPool as exc:
                lost.append(i)
                results[i] = JobResult(None, 0.0, "?", f"worker process died: {exc!r}")
            except Exception:
                results[i] = JobResult(None, 0.0, "?", traceback.format_exc())
        if lost:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        return results, sorted(lost)  # type: ignore[return-value]

    def run(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        """A dying worker breaks the whole pool and fails every pending job with it; the
        jobs lost that way are re-run one at a time in fresh pools, so only the job that
        really kills its worker comes back failed."""
        results, lost = self._run_batch(jobs)
        if len(lost) > 1:
            for i in lost:
                (single,), _ = self._run_batch([jobs[i]])
                results[i] = single
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


# -- Ray ----------------------------------------------------------------------------------
_RAY_TRAINERS: dict = {}


def _ray_train(payload_box: list, job: TrainJob) -> JobResult:
    """Runs on a Ray worker: build the trainer once per worker and payload, then train."""
    import ray

    ref = payload_box[0]
    key = ref.hex()
    trainer = _RAY_TRAINERS.get(key)
    if trainer is None:
        import torch

        from .train.trainer import Trainer

        task, space, train_config = ray.get(ref)
        device = "cuda" if torch.cuda.is_available() and ray.get_gpu_ids() else "cpu"
        trainer = _RAY_TRAINERS[key] = Trainer(task, space, train_config, device=device)
    return _run_one(trainer, job)


class RayExecutor:
    """Trains on a Ray cluster (or a local Ray started here). Tasks declare their CPU and GPU
    needs; results come back to the search process, which stays the only writer."""

    name = "ray"

    def __init__(
        self,
        task,
        space,
        train_config,
        address: str | None = None,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        connect_timeout_s: float = 20.0,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise ImportError("the 'ray' executor needs Ray: pip install -e '.[ray]'") from exc
        self._ray = ray
        self._owns = False
        if not ray.is_initialized():
            if address is not None:
                _check_reachable(address, connect_timeout_s)
            try:
                ray.init(
                    address=address,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                )
            except Exception as exc:
                raise ConnectionError(
                    f"could not connect to a Ray cluster at {address!r}: {exc}. Start one with "
                    "`ray start --head`, or omit the address to start a local Ray."
                ) from exc
            self._owns = True
        self._payload = [ray.put((task, space, train_config))]
        self._remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_ray_train)

    def run(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        refs = [self._remote.remote(self._payload, job) for job in jobs]
        results = []
        for ref in refs:
            try:
                results.append(self._ray.get(ref))
            except Exception:
                results.append(JobResult(None, 0.0, "?", traceback.format_exc()))
        return results

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


def _check_reachable(address: str, timeout_s: float) -> None:
    """Fail fast with a clear message when nothing listens at a Ray address (Ray itself
    can wait a long time before giving up)."""
    import socket

    if address in ("auto", "local") or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        raise ConnectionError(
            f"no Ray cluster answers at {address!r} ({exc}). Check the address (host:port of "
            "the head node's GCS, e.g. 127.0.0.1:6379), start one with `ray start --head`, or "
            "omit the address to start a local Ray."
        ) from exc


def make_executor(
    kind: str,
    task,
    space,
    train_config,
    workers: int = 2,
    address: str | None = None,
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
    trainer=None,
) -> Executor:
    """Build the executor named `kind`: "inline", "batched", "processes" or "ray".

    In-process executors reuse `trainer` when given (no second copy of the data).
    """
    if kind in ("inline", "batched"):
        if trainer is None:
            from .train.trainer import Trainer

            trainer = Trainer(task, space, train_config)
        return InlineExecutor(trainer) if kind == "inline" else BatchedExecutor(trainer)
    if kind == "processes":
        return ProcessExecutor(task, space, train_config, workers=workers)
    if kind == "ray":
        return RayExecutor(
            task, space, train_config, address=address, num_cpus=num_cpus, num_gpus=num_gpus
        )
    raise ValueError(f"unknown executor {kind!r}; use 'inline', 'batched', 'processes' or 'ray'")
