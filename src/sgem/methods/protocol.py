"""The one shape of a method: `fit_evaluate(task, budget) -> MethodResult`.

SGEM (`sgem.methods.sgem.SgemMethod`), every registered baseline (`sgem.baselines`) and
every reference of the leaderboard (`sgem.leaderboard.members`) implement it, so a
benchmark, the API and the leaderboard call every method the same way and read every
result through the same row (`MethodResult.row`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..data.task import ClusteredTask
from .budget import MethodBudget
from .result import MethodResult


@runtime_checkable
class Method(Protocol):
    """One method: fit on train (+ validation) within `budget`, evaluate once on test."""

    name: str
    uses_domain_labels: bool

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult: ...


def get_method(name: str, **options: object) -> Method:
    """A fresh method by name: "sgem" (`options` go to `SgemMethod`) or a registered
    baseline (`sgem.baselines.available()`)."""
    if name == "sgem":
        from .sgem import SgemMethod

        return SgemMethod(**options)  # type: ignore[arg-type]
    from ..baselines import get_baseline

    return get_baseline(name)


def available_methods() -> list[str]:
    """ "sgem" and every registered baseline, in registration order."""
    from ..baselines import available

    return ["sgem", *available()]


__all__ = ["Method", "available_methods", "get_method"]
