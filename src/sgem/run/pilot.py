"""Time one candidate training: the unit a time budget's plan is priced in
(`sgem.run.budget`)."""

from __future__ import annotations

import time

import numpy as np

from ..data.task import ClusteredTask
from ..random_streams import Stream, stream_rng

#: the pilot stops timing more cells once it has spent this share of the budget (what it
#: measured decides): a pilot of four slow cells took 46 s of a 40 s image budget, and the
#: refusal it led to came after the budget
PILOT_SHARE = 0.15
#: optimiser steps of the pilot's warm-up, which pays torch's one-time start-up (and one
#: evaluation of every cluster) before anything is timed
WARM_UP_STEPS = 10


class PilotCut(Exception):
    """The budget's fence stopped the pilot's training before its first evaluation."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"one candidate training took more than {seconds:.1f} s")
        self.seconds = seconds


def pilot_seconds(
    task: ClusteredTask,
    trainer,
    space,
    seed: int,
    repeats: int = 3,
    limit: float | None = None,
) -> float:
    """Wall clock of training one random candidate on every cluster: the mean of `repeats`
    random cells after a short warm-up training (`WARM_UP_STEPS`) that pays torch's one-time
    start-up (fewer once the pilot has spent `limit` seconds, never none). (The fastest of
    three was the rule: on monthly tourism series a cheap cell made it 2.3 s while the
    search's cells took 6.8 s on average, and the final stage was left no time. The warm-up
    was a whole candidate training, thrown away: 10 s of a 5-minute fit of 400 hourly
    series.) Raises `PilotCut` where the budget's fence stopped a training before it was
    ever evaluated."""
    from ..train.time_fence import fence_passed

    rng = stream_rng(seed, Stream.BUDGET_PILOT)
    times: list[float] = []
    began = time.perf_counter()
    every = np.ones(task.n_clusters, dtype=bool)
    warm_up = trainer.fit(
        space.sample(rng), trainer.x_train, trainer.y_train, seed=seed, steps=WARM_UP_STEPS
    )
    trainer.cluster_losses(warm_up)
    for _ in range(repeats):
        arch = space.sample(rng)
        start = time.perf_counter()
        try:
            trainer.train(arch, every, seed=seed)
        except RuntimeError:  # stopped by the fence before its first evaluation
            if not fence_passed():
                raise
            raise PilotCut(time.perf_counter() - start) from None
        times.append(time.perf_counter() - start)
        if limit is not None and time.perf_counter() - began > limit:
            break
    return float(np.mean(times))


__all__ = ["PILOT_SHARE", "WARM_UP_STEPS", "PilotCut", "pilot_seconds"]
