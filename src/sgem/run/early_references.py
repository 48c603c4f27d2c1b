"""The references a user would otherwise pick, fitted before the search: a fit that cannot
say whether it beat them is not done, so the budget spends their time first and never skips
them (`sgem.run.pipeline` calls these; the contest at the end scores them)."""

from __future__ import annotations

import time
from dataclasses import replace

from ..leaderboard.members import reference_methods
from ..methods.budget import MethodBudget
from ..space.timeseries import TimeSeriesSpace
from .budget_clock import BudgetClock


def table_references(task, space, seed: int, crps_samples: int, clock) -> list | None:
    """A user's table's scikit-learn references, fitted before the budget is planned: they
    need no search, and a fit that cannot say whether it beat them is not done, so the
    budget spends their time first and never skips them (seconds even on 50 000 rows; at
    the end, a 48 000-row table's budget had left them no time and the saved MoE was 1.7x
    gradient boosting's RMSE). None for other tasks."""
    if task.name != "table" or isinstance(space, TimeSeriesSpace):
        return None
    budget = MethodBudget(seed=seed, crps_samples=crps_samples)
    with clock.timed("scikit_learn_references"):
        refs = [m.fit_evaluate(task, budget) for m in reference_methods(space)]
    return None if any(r.val_output is None for r in refs) else refs


def classical_first(task, space, budget, plan: dict | None, clock: BudgetClock) -> list | None:
    """A forecaster's classical references (seasonal naive, AutoETS, AutoTheta), fitted before
    the search: they need no search, and a fit that cannot say whether it beat them is not
    done, so the budget spends their time first (`budget.deadline`) and never skips them.
    None (they run at the end, if time is left) for other tasks, where the plan found no room
    for them (`plan_run`: the smallest search goes first), or where they ran past twice
    their estimate (a slow machine must not eat the search's time). Where the plan has them
    on a subset (too many series for the budget), each costly member gets its share of their
    time and is scored on the random subset of the series it reaches
    (`sgem.leaderboard.series_members.SUBSET`)."""
    if not isinstance(space, TimeSeriesSpace):
        return None
    estimate = None if plan is None else plan.get("references_seconds_estimate", 0.0)
    if estimate == 0.0:
        return None
    methods = reference_methods(space)
    subset = bool(plan and plan.get("references_on_a_subset"))
    refs = []
    until = None if estimate is None else time.perf_counter() + 2.0 * estimate + 5.0
    with clock.timed("classical_references"):
        for m in methods:
            if subset and estimate is not None:  # each costly member its share of the time,
                # scored on the series it reaches in it (seasonal naive: free)
                until = time.perf_counter() + estimate / max(len(methods) - 1, 1)
            refs.append(m.fit_evaluate(task, replace(budget, deadline=until)))
    return None if any(r.val_output is None for r in refs) else refs


__all__ = ["classical_first", "table_references"]
