"""The hard end of a time budget: after it, every training loop stops at its next step.

A budget plan (`sgem.run.budget`) sizes the search and the final stage from a pilot training,
and the EM loop stops at its own deadline; but an estimate can be wrong by a factor (a
slower cell, another process on the machine, a warm start that trains longer), and the
stages after the search used to run to completion whatever the clock said. The fence is
what makes a budget a promise: every loop that trains a network (`Trainer.optimise`,
the validation-tracked final lengths, the vectorised candidate trainer) asks
`fence_passed()` after each optimiser step and stops there, keeping the weights it has
(a tracked network keeps its best evaluation so far). What follows a fence (scoring,
saving, figures) is cheap and is reserved for by the plan.

The fence is a wall-clock time (`time.time()`), so worker processes share it: `set_fence`
also exports it in the environment, which the process executor's spawned workers inherit.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

ENV = "SGEM_TRAINING_FENCE"


def _from_env() -> float | None:
    value = os.environ.get(ENV)
    try:
        return float(value) if value else None
    except ValueError:
        return None


_fence: float | None = _from_env()


def set_fence(at: float | None) -> None:
    """Stop every training loop of this process (and of workers started after this call)
    once `time.time()` reaches `at`; None lifts the fence."""
    global _fence
    _fence = None if at is None else float(at)
    if at is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = repr(float(at))


def fence() -> float | None:
    """The wall-clock time (`time.time()`) at which training stops, or None."""
    return _fence


def fence_passed() -> bool:
    """True once the fence is set and reached (cheap: one clock read)."""
    return _fence is not None and time.time() >= _fence


@contextlib.contextmanager
def training_fence(at: float | None) -> Iterator[None]:
    """`set_fence(at)` for a block, restoring the previous fence afterwards."""
    before = _fence
    set_fence(at)
    try:
        yield
    finally:
        set_fence(before)


__all__ = ["ENV", "fence", "fence_passed", "set_fence", "training_fence"]
