"""Where candidate trainings run: inline, in local worker processes, or on Ray.

All backends take a batch of independent `TrainJob`s and return one `JobResult` per job,
in job order. A job that raises (or whose worker dies) comes back with its traceback;
retrying and recording are the search's business, so every backend behaves the same.

Besides `run` (a whole batch, waiting), the built-in backends take chunks one at a time
(`submit_chunk` -> a `ChunkFuture`), so a pipelined search keeps batches in flight while it
refits: inline runs a chunk when its result is asked for, processes and Ray return futures.
`submit` / `collect` do that for a whole batch. What is computed never depends on when it
runs: the chunks follow from the job list alone.

Jobs travel in *chunks* (`sgem.train.batched.job_chunks`): where the space allows, a chunk
of small candidates trains as one vectorised program, else a chunk is one job. The chunks
follow from the job list alone and every backend runs a chunk through the same
`ChunkRunner`, so inline, processes and Ray compute the same numbers.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import (
    CancelledError,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    as_completed,
)
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from .chunk_runner import ChunkRunner, plan
from .jobs import (
    ChunkFuture,
    Deferred,
    Executor,
    JobResult,
    Submission,
    TrainerFactory,
    TrainJob,
    collect,
    gather,
    job_seed,
    make_trainer,
    plan_jobs,
    submit,
    submit_chunk,
)
from .ray_executor import RayExecutor

if TYPE_CHECKING:
    from ..final.expert_fit import ExpertFit, ExpertJob


def default_threads() -> int:
    """Threads for the inline executor: the usable cores, at most 4 (tiny programs gain
    little beyond)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


class InlineExecutor:
    """Trains in the search process. Chunks that are vectorised programs run side by side
    on `threads` threads (torch releases the GIL inside its kernels and the backward pass);
    the numbers do not depend on the thread count, since the chunks follow from the job
    list alone (`TrainConfig.min_chunks`) and each draws from its own generator.

    Submitted chunks (`submit_chunk`, what a pipelined search uses) start at once on those
    threads, so the search refits and proposes while they train: on a 2-core machine the
    refit no longer leaves a core idle. That needs `threads` > 1 and torch's process-wide
    intra-op thread count equal to the chunks' (`TrainConfig.batch_threads`, 1 by default):
    it is one setting for the whole process, and a chunk's summation order must not depend
    on what another thread set it to meanwhile. Otherwise a submitted chunk runs when its
    result is asked for. The numbers are the same either way (`sgem.train.global_rng`)."""

    name = "inline"

    def __init__(self, trainer, threads: int | None = None, background: bool = True) -> None:
        self.trainer = trainer
        self.runner = ChunkRunner(trainer)
        self.threads = default_threads() if threads is None else int(threads)
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.background = bool(background)
        self._pool: ThreadPoolExecutor | None = None

    def _thread_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="sgem-chunk")
        return self._pool

    def run(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        chunks = self.plan_jobs(jobs)
        parts = [[jobs[i] for i in c] for c in chunks]
        if self.threads > 1 and sum(len(p) > 1 for p in parts) > 1:
            from ..train.trainer import intra_op_threads

            pool = self._thread_pool()
            # torch's intra-op thread count is process-wide: set it once, around the pool
            with intra_op_threads(getattr(self.trainer.config, "batch_threads", 1)):
                outs = list(pool.map(self.runner.run, parts))
        else:
            outs = [self.runner.run(p) for p in parts]
        return gather(len(jobs), chunks, outs)

    def plan_jobs(self, jobs: Sequence[TrainJob]) -> list[list[int]]:
        tr = self.trainer
        return plan(tr.task, tr.space, tr.config, jobs)

    def submit_chunk(self, jobs: list[TrainJob]) -> ChunkFuture:
        if self._trains_in_background():
            return self._thread_pool().submit(self.runner.run, jobs)
        return Deferred(self.runner.run, jobs)

    def _trains_in_background(self) -> bool:
        import torch

        chunk_threads = getattr(getattr(self.trainer, "config", None), "batch_threads", 1)
        return self.background and self.threads > 1 and torch.get_num_threads() == chunk_threads

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


#: "batched" was the vectorised executor; inline now vectorises wherever it can
BatchedExecutor = InlineExecutor


# -- local processes ------------------------------------------------------------------------
_WORKER_RUNNER: ChunkRunner | None = None


def _worker_init(
    task,
    space,
    train_config,
    devices: list[str],
    threads: int,
    factory: TrainerFactory | None = None,
) -> None:
    global _WORKER_RUNNER
    import torch

    torch.set_num_threads(threads)
    ident = os.getpid()
    device = devices[ident % len(devices)] if devices else "cpu"
    _WORKER_RUNNER = ChunkRunner(make_trainer(factory, task, space, train_config, device))


def _worker_fit_expert(job: ExpertJob) -> ExpertFit:
    """Retrain one expert of the final MoE in a worker (`ProcessExecutor.fit_experts`)."""
    from ..final.expert_fit import fit_expert

    assert _WORKER_RUNNER is not None
    trainer = _WORKER_RUNNER.trainer
    return fit_expert(trainer.task, trainer, job).portable()


def _worker_run(jobs: list[TrainJob]) -> list[JobResult]:
    if any(os.environ.get("SGEM_TEST_CRASH_ARCH") == job.arch.key for job in jobs):
        os._exit(1)  # test hook: simulate a worker that dies mid-job
    assert _WORKER_RUNNER is not None
    return _WORKER_RUNNER.run(jobs)


class ProcessExecutor:
    """A local pool of worker processes; each builds its own trainer once.

    With GPUs, worker i uses GPU (pid mod n_gpus). A worker that dies fails only the jobs
    it took; the pool is rebuilt for the next batch.

    `caller_trains` (default: on without GPUs): the search process, which would only wait,
    trains the last chunk of each batch (and the last expert of the final retrain) itself
    while the workers take the others; a batch of one chunk needs no worker at all, and
    with two workers an odd batch no longer leaves a core idle for a whole round (the OS
    shares the two cores among three trainers). The numbers are the same: same chunks,
    same `ChunkRunner`, and the caller trains on the workers' thread count.
    """

    name = "processes"

    def __init__(
        self,
        task,
        space,
        train_config,
        workers: int = 2,
        threads: int = 1,
        trainer_factory: TrainerFactory | None = None,
        caller_trains: bool | None = None,
        device: str | None = None,
    ) -> None:
        import torch

        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        # the run's device: "cpu" keeps the workers on the CPU on a machine with GPUs too
        # (their numbers then equal the inline executor's); None or "cuda...": every GPU
        on_gpu = device is None or str(device).startswith("cuda")
        devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if on_gpu else []
        self._init_args = (task, space, train_config, devices, threads, trainer_factory)
        self._pool: ProcessPoolExecutor | None = None
        if caller_trains is None:
            caller_trains = not devices and trainer_factory is None
        self.caller_trains = bool(caller_trains)
        self.threads = threads
        self._caller: ChunkRunner | None = None

    def _as_a_worker(self) -> contextlib.AbstractContextManager:
        """The caller trains on the workers' intra-op thread count (same numbers)."""
        from ..train.trainer import intra_op_threads

        return intra_op_threads(self.threads)

    def _caller_runner(self) -> ChunkRunner:
        if self._caller is None:
            task, space, train_config = self._init_args[:3]
            trainer = make_trainer(self._init_args[5], task, space, train_config, "cpu")
            self._caller = ChunkRunner(trainer)
        return self._caller

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

    def _run_chunks(
        self, chunks: list[list[TrainJob]], local: int | None = None
    ) -> tuple[list[list[JobResult]], list[int]]:
        """Submit all chunks but `local` (which trains here, meanwhile); returns results
        per chunk and the chunks lost to a dying worker."""
        results: list[list[JobResult] | None] = [None] * len(chunks)
        lost: list[int] = []
        remote = [i for i in range(len(chunks)) if i != local]
        pool = self._get_pool() if remote else None
        futures = {pool.submit(_worker_run, chunks[i]): i for i in remote} if pool else {}
        if local is not None:
            with self._as_a_worker():
                results[local] = self._caller_runner().run(chunks[local])
        for future in as_completed(futures):
            i = futures[future]
            try:
                results[i] = future.result()
            except BrokenProcessPool as exc:
                lost.append(i)
                died = JobResult(None, 0.0, "?", f"worker process died: {exc!r}")
                results[i] = [died] * len(chunks[i])
            except Exception:
                results[i] = [JobResult(None, 0.0, "?", traceback.format_exc())] * len(chunks[i])
        if lost:
            assert self._pool is not None
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        return results, sorted(lost)  # type: ignore[return-value]

    def run(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        """A dying worker breaks the whole pool and fails every pending chunk with it; the
        jobs lost that way are re-run one at a time in fresh pools, so only the job that
        really kills its worker comes back failed."""
        chunks = self.plan_jobs(jobs)
        local = len(chunks) - 1 if self.caller_trains and chunks else None
        outs, lost = self._run_chunks([[jobs[i] for i in c] for c in chunks], local)
        if lost and (len(lost) > 1 or len(chunks[lost[0]]) > 1):
            for c in lost:
                outs[c] = [self._run_chunks([[jobs[i]]])[0][0][0] for i in chunks[c]]
        return gather(len(jobs), chunks, outs)

    def plan_jobs(self, jobs: Sequence[TrainJob]) -> list[list[int]]:
        task, space, train_config = self._init_args[:3]
        return plan(task, space, train_config, jobs)

    def fit_experts(
        self, jobs: Sequence[ExpertJob], on_done: Callable[[], object] | None = None
    ) -> list[ExpertFit | None]:
        """Retrain the final MoE's experts side by side on the workers (weights come back);
        None for an expert whose worker failed, which the caller then trains itself.
        `on_done()` after each expert that came back (a progress bar)."""
        done = on_done or (lambda: None)
        local = jobs[-1] if self.caller_trains and jobs else None
        remote = list(jobs[:-1]) if local is not None else list(jobs)
        pool = self._get_pool() if remote else None
        futures = [pool.submit(_worker_fit_expert, job) for job in remote] if pool else []
        mine: ExpertFit | None = None
        if local is not None:
            from ..final.expert_fit import fit_expert

            trainer = self._caller_runner().trainer
            with self._as_a_worker():  # the module itself: no weights to ship from here
                mine = fit_expert(trainer.task, trainer, local)
            done()
        fits: list[ExpertFit | None] = []
        for future in futures:
            try:
                fits.append(future.result())
                done()
            except Exception:
                fits.append(None)
        if any(f is None for f in fits) and self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)  # maybe broken: rebuild
            self._pool = None
        return fits if local is None else [*fits, mine]

    def submit_chunk(self, jobs: list[TrainJob]) -> ChunkFuture:
        pool = self._get_pool()
        return _PoolChunk(self, pool, pool.submit(_worker_run, jobs), jobs)

    def _lost(self, pool: ProcessPoolExecutor, jobs: list[TrainJob]) -> list[JobResult]:
        """A chunk whose pool broke (some worker died): the pool is replaced, and the chunk
        re-runs job by job, so only a job that kills its worker itself comes back failed."""
        if self._pool is pool:
            pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        return [self._run_chunks([[job]])[0][0][0] for job in jobs]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class _PoolChunk:
    """A chunk submitted to a process pool (see `ProcessExecutor.submit_chunk`)."""

    def __init__(
        self, owner: ProcessExecutor, pool: ProcessPoolExecutor, future: Future, jobs
    ) -> None:
        self.owner, self.pool, self.future, self.jobs = owner, pool, future, jobs
        self._out: list[JobResult] | None = None

    def done(self) -> bool:
        return self._out is not None or self.future.done()

    def result(self) -> list[JobResult]:
        if self._out is None:
            try:
                self._out = self.future.result()
            except (BrokenProcessPool, CancelledError):  # a worker died, or a retry's
                self._out = self.owner._lost(self.pool, self.jobs)  # rebuild cancelled it
            except Exception:
                self._out = [JobResult(None, 0.0, "?", traceback.format_exc())] * len(self.jobs)
        return self._out


def resolve_executor(kind: str, device: str) -> str:
    """The executor "auto" stands for: worker processes for a run on the CPU of a machine
    with two or more usable cores, else inline. Other kinds are returned as given.

    Why processes rather than inline threads on a multi-core CPU: small candidates train as
    thousands of tiny kernels issued from Python, and threads of one process take turns on
    the interpreter lock to issue them, while worker processes do not (the toy on 2 cores,
    same result: 19.6 s with 2 workers against 22.7 s inline). On a GPU one process keeps
    the device busy, and the workers' copies of the data would only cost memory."""
    if kind != "auto":
        return kind
    return "processes" if device == "cpu" and default_threads() >= 2 else "inline"


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
    trainer_factory: TrainerFactory | None = None,
    device: str | None = None,
) -> Executor:
    """Build the executor named `kind`: "inline", "batched" (the same as inline, which
    vectorises wherever it can), "processes" or "ray".

    In-process executors reuse `trainer` when given (no second copy of the data).
    `trainer_factory` replaces the real trainer everywhere (e.g.
    `sgem.execution.latency.LatencyModel`). `device`: the run's ("cpu" keeps process
    workers off the GPUs; None: every GPU there is).
    """
    if kind in ("inline", "batched"):
        if trainer is None:
            trainer = make_trainer(trainer_factory, task, space, train_config, "cpu")
        return InlineExecutor(trainer)
    if kind == "processes":
        return ProcessExecutor(
            task,
            space,
            train_config,
            workers=workers,
            trainer_factory=trainer_factory,
            device=device,
        )
    if kind == "ray":
        return RayExecutor(
            task,
            space,
            train_config,
            address=address,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            trainer_factory=trainer_factory,
        )
    raise ValueError(f"unknown executor {kind!r}; use 'inline', 'batched', 'processes' or 'ray'")


__all__ = [
    "BatchedExecutor",
    "ChunkFuture",
    "ChunkRunner",
    "Deferred",
    "Executor",
    "InlineExecutor",
    "JobResult",
    "ProcessExecutor",
    "RayExecutor",
    "Submission",
    "TrainJob",
    "TrainerFactory",
    "collect",
    "job_seed",
    "make_executor",
    "plan",
    "plan_jobs",
    "resolve_executor",
    "submit",
    "submit_chunk",
]
