"""The champion cell: the best of a few random cells trained on every cluster.

Under warm starts (`sgem.final.warm_start`) every expert fine-tunes a global network of its
cell, so a cell is first judged by how good a network of ALL the data it makes. The
search's per-region cells are ranked by training from scratch on their region, which says
little about that; the champion is offered to every expert beside its own cell in the
final check (`final_check(extra_cells=...)`), which keeps, per expert, the cell whose warm
tracking run validates better. The random cells are drawn from the stream the baselines'
best-single-cell search uses and trained with the same content-derived seeds, so on a seed
SGEM's champion of `n` cells is the Geometry baseline's cell of budget `n`. The cells train
as independent jobs: on an executor's workers when the caller has one, else here through the
same `ChunkRunner`, so the numbers never depend on where they ran.
"""

from __future__ import annotations

import logging

import numpy as np

from ..data.task import ClusteredTask
from ..execution.chunk_runner import ChunkRunner, plan
from ..execution.jobs import (
    ChunkFuture,
    Deferred,
    Executor,
    JobResult,
    TrainJob,
    gather,
    job_seed,
    submit,
)
from ..execution.progress import stage_bar
from ..random_streams import Stream, stream_rng
from ..space.arch import Arch, CellSpace
from ..train.losses import region_loss
from ..train.trainer import Trainer

log = logging.getLogger(__name__)


def champion_cell(
    task: ClusteredTask,
    trainer: Trainer,
    space: CellSpace,
    n_cells: int,
    seed: int,
    executor: Executor | None = None,
) -> tuple[Arch, dict]:
    """The cell of lowest validation loss on every cluster among `n_cells` random ones
    (each trained on every cluster, early-stopped as candidates are); (cell, report).
    With `executor` the cells train side by side on its workers."""
    if n_cells < 1:
        raise ValueError(f"need n_cells >= 1, got {n_cells}")
    every = np.ones(task.n_clusters, dtype=bool)
    rng = stream_rng(seed, Stream.BEST_SINGLE_SEARCH)
    cells = list(dict.fromkeys(space.sample_many(n_cells, rng)))
    jobs = [TrainJob(arch, every, job_seed(seed, arch, every)) for arch in cells]
    results = _train(task, trainer, space, jobs, executor)
    sizes = task.val_cluster_sizes
    scored, failed = [], {}
    for i, (arch, res) in enumerate(zip(cells, results, strict=True)):
        if res.losses is None:  # one bad cell must not end a run at its final stage
            log.warning("champion cell %s failed to train; left out:\n%s", arch.key, res.error)
            failed[arch.key] = res.error
            continue
        scored.append((region_loss(res.losses, every, sizes), i, arch))
    if not scored:
        raise RuntimeError(f"every champion cell failed to train; the first:\n{results[0].error}")
    best = min(scored, key=lambda s: (s[0], s[1]))
    report = {
        "cell": best[2].key,
        "validation_loss": best[0],
        "trainings": len(cells),
        "scores": {a.key: v for v, _, a in scored},
    } | ({"failed": failed} if failed else {})
    return best[2], report


def _train(
    task: ClusteredTask,
    trainer: Trainer,
    space: CellSpace,
    jobs: list[TrainJob],
    executor: Executor | None,
) -> list[JobResult]:
    """One result per job, in job order, the bar advancing chunk by chunk."""
    if executor is None:
        runner = ChunkRunner(trainer)
        chunks = plan(task, space, trainer.config, jobs)
        futures: list[ChunkFuture] = [Deferred(runner.run, [jobs[i] for i in c]) for c in chunks]
    else:
        submission = submit(executor, jobs)
        chunks, futures = submission.chunks, submission.futures
    outs = []
    with stage_bar(len(jobs), "champion cell") as bar:
        for chunk, future in zip(chunks, futures, strict=True):
            outs.append(future.result())
            bar.update(len(chunk))
    return gather(len(jobs), chunks, outs)


__all__ = ["champion_cell"]
