"""Warm starts: every expert fine-tunes a global network of its cell.

Why: on forecasting mixtures one network trained on all windows beat every routed MoE whose
experts started from scratch on their regions (benchmarks/results/ts_main_offline-es.md),
while experts fine-tuned from that global network beat both (benchmarks/warm_start.py:
test NLL 0.157 vs 0.208 and 0.201 vs 0.272 from scratch, geometry split, 2 seeds). A region
holds a fraction of the windows; pooling first and specialising second keeps what the
regions share and still lets each expert own its clusters.

The protocol (`final_length: validation-warm`), per distinct cell among the experts:

1. the global network: the cell trained on ALL clusters with its length chosen on all
   validation samples (`final.length`, the same tracking run as an expert's), its
   weights at that length kept (`track_state`), then refitted on train + validation
   (`refit_state`);
2. each expert's tracking run fine-tunes `track_state` on its region's training samples,
   scored on the region's validation samples before the first step and as it trains, so
   "no fine-tuning" can win (0 steps);
3. the final expert fine-tunes `refit_state` on its region of train + validation for the
   chosen length (scaled to the larger set).

An expert whose region is every cluster (K = 1, Global single) IS the global network, so it
trains from scratch as before. The global network's seed is derived from the cell and the
run seed only (`sgem.execution.jobs.job_seed` with every cluster), so methods that share a
cell share its global network, and a comparison between them is about routing, not about luck.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data.task import ClusteredTask
from ..execution.jobs import job_seed
from ..space.arch import Arch
from ..train.trainer import Trainer
from .expert_fit import ExpertJob, WarmStart, fit_expert_jobs
from .length import ValidationLength


def global_starts(
    task: ClusteredTask,
    trainer: Trainer,
    architectures: Sequence[Arch],
    seed: int,
    *,
    steps: int,
    epochs: float | None,
    rule: ValidationLength,
    executor: object | None = None,
) -> dict[str, WarmStart]:
    """The global network of each distinct cell in `architectures` (step 1 above), by
    cell key (`WarmStart.length`: its tracking run's summary)."""
    every = np.ones(task.n_clusters, dtype=bool)
    distinct = list(dict.fromkeys(architectures))
    jobs = [
        ExpertJob(
            i,
            arch,
            every,
            job_seed(seed, arch, every),
            steps,
            epochs,
            rule,
            keep_track_state=True,
        )
        for i, arch in enumerate(distinct)
    ]
    fits = fit_expert_jobs(task, trainer, jobs, executor, desc="global networks")
    starts: dict[str, WarmStart] = {}
    for arch, fit in zip(distinct, fits, strict=True):
        refit = fit.weights()
        # no tracking run (no validation sample): the experts' runs start from the refit
        track = fit.track_state if fit.track_state is not None else refit
        starts[arch.key] = WarmStart(track_state=track, refit_state=refit, length=fit.length)
    return starts


def needs_warm_start(region: np.ndarray) -> bool:
    """An expert of some clusters fine-tunes the global network; one of every cluster is it."""
    return not bool(np.all(region))


__all__ = ["global_starts", "needs_warm_start"]
