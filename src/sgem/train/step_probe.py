"""What a cell's training will take, timed on a few optimiser steps of it.

A time budget prices what the leaderboard trains after the seed rounds with it (its global
networks, each expert's retrain for its validation outputs: `sgem.run.budget.seed_rounds_end`):
the plan's price, a candidate training of the pilot's random cells, was off by 2-4x either way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..space.arch import Arch

#: optimiser steps a cell is timed on (beyond two that pay its set-up)
PROBE_STEPS = 8


@dataclass(frozen=True)
class StepCost:
    """A cell's training on some data: seconds of set-up (building, first batches) and per
    optimiser step."""

    set_up: float
    per_step: float

    def seconds(self, steps: int) -> float:
        """One training of `steps` optimiser steps (0: the set-up alone)."""
        return self.set_up + self.per_step * max(int(steps), 0)


def step_cost(trainer, cell: Arch, x: torch.Tensor, y: torch.Tensor) -> StepCost:
    """`cell` trained on (x, y) for two steps, then `2 + PROBE_STEPS`, timed: the set-up
    from the first, each step from the difference."""
    took = []
    for n in (2, 2 + PROBE_STEPS):
        start = time.perf_counter()
        trainer.fit(cell, x, y, seed=0, steps=n)
        if x.device.type == "cuda":  # (CUDA returns before its queued steps are done)
            torch.cuda.synchronize(x.device)
        took.append(time.perf_counter() - start)
    per_step = (took[1] - took[0]) / PROBE_STEPS
    if per_step <= 0:  # timing noise: every second of the longer probe counted as steps
        per_step = took[1] / (2 + PROBE_STEPS)
    return StepCost(max(took[0] - 2 * per_step, 0.0), per_step)


__all__ = ["PROBE_STEPS", "StepCost", "step_cost"]
