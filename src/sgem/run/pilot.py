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
    random cells after one more that pays torch's one-time start-up (fewer once the pilot
    has spent `limit` seconds, never none: the start-up one overstates a cell). (The
    fastest of three was the rule: on monthly tourism series a cheap cell made it 2.3 s while
    the search's cells took 6.8 s on average, and the final stage was left no time.) Raises
    `PilotCut` where the budget's fence stopped a training before it was ever evaluated."""
    from ..train.time_fence import fence_passed

    rng = stream_rng(seed, Stream.BUDGET_PILOT)
    times: list[float] = []
    began = time.perf_counter()
    for _ in range(repeats + 1):
        arch = space.sample(rng)
        start = time.perf_counter()
        try:
            trainer.train(arch, np.ones(task.n_clusters, dtype=bool), seed=seed)
        except RuntimeError:  # stopped by the fence before its first evaluation
            if not fence_passed():
                raise
            raise PilotCut(time.perf_counter() - start) from None
        times.append(time.perf_counter() - start)
        if limit is not None and len(times) > 1 and time.perf_counter() - began > limit:
            break
    return float(np.mean(times[1:]))


__all__ = ["PILOT_SHARE", "PilotCut", "pilot_seconds"]
