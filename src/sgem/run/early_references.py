"""The references a user would otherwise pick, fitted before the search: a fit that cannot
say whether it beat them is not done, so the budget spends their time first and never skips
them (`sgem.run.pipeline` calls these; the contest at the end scores them)."""

from __future__ import annotations

import copy
import hashlib
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..leaderboard.boosting_settings import tuning_seconds
from ..leaderboard.members import reference_methods
from ..leaderboard.table_members import MIN_SAMPLED_ROWS, SCIKIT_LEARN_VALUES_PER_SECOND
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from ..moe.classical import ClassicalMember
from ..space.timeseries import TimeSeriesSpace
from .budget_clock import BudgetClock
from .kept_references import read_references, write_references

log = logging.getLogger(__name__)

#: a table's fitted references by what they were fitted on, while `shared_table_references`
#: is open (None: not shared)
_SHARED: dict[str, list] | None = None


@contextmanager
def shared_table_references() -> Iterator[None]:
    """Within it, a table's scikit-learn references fitted by one run are reused by the next
    run on the same rows with the same seed (a budgeted fit's runs of each K,
    `sgem.run.experts_choice`): they do not depend on K. Why: refitted by every K's run,
    they took 13 s of each run's 3 minutes on 4000 rows of four mixed structures, and the
    estimate of what the next K needs counted them again, so K = 3 was not tried with 78 s
    left."""
    global _SHARED
    _SHARED = {}
    try:
        yield
    finally:
        _SHARED = None


def _rows_key(task, seed: int, crps_samples: int, values: int | None) -> str:
    """What a table's references depend on: its splits' rows, the seed, and the sample size
    a budget allows where the table is large enough to be sampled (`MIN_SAMPLED_ROWS`)."""
    digest = hashlib.sha256()
    for split in (task.train, task.val, task.test):
        for array in (split.x, split.y, split.cluster):
            digest.update(np.ascontiguousarray(array).tobytes())
    sampled = len(task.train) + len(task.val) > MIN_SAMPLED_ROWS
    return f"{digest.hexdigest()}|{seed}|{crps_samples}|{values if sampled else None}"


def table_references(
    task, space, seed: int, crps_samples: int, clock, kept: Path | None = None
) -> list | None:
    """A user's table's scikit-learn references, fitted before the budget is planned: they
    need no search, and a fit that cannot say whether it beat them is not done, so the
    budget spends their time first and never skips them (seconds even on 50 000 rows; at
    the end, a 48 000-row table's budget had left them no time and the saved MoE was 1.7x
    gradient boosting's RMSE). With a time budget, on a sample of a large table's rows
    sized to it (`SCIKIT_LEARN_VALUES_PER_SECOND`). Within `shared_table_references`, those
    an earlier run fitted on the same rows (copies). `kept` (`TABLE_FILE`): where they are
    kept, each as soon as it is fitted; a resumed run reads those it finds there. None for
    other tasks."""
    if task.name != "table" or isinstance(space, TimeSeriesSpace):
        return None
    values = None if clock.budget is None else int(SCIKIT_LEARN_VALUES_PER_SECOND * clock.budget)
    methods = reference_methods(space)
    key = f"{_rows_key(task, seed, crps_samples, values)}|{_names(methods)}"
    if _SHARED is not None and key in _SHARED:
        shared = copy.deepcopy(_SHARED[key])  # (never handed out itself: each run a copy)
        if kept is not None:
            write_references(kept, shared, key)
        return shared
    refs = _fitted(task, methods, seed, crps_samples, clock, values, kept, key)
    if refs is not None and _SHARED is not None:
        _SHARED[key] = copy.deepcopy(refs)
    return refs


def _fitted(
    task, methods: list, seed: int, crps_samples: int, clock, values, kept: Path | None, key: str
) -> list | None:
    """Each of `methods`' references not in `kept` fitted, and `kept` rewritten after each."""
    budget = MethodBudget(
        seed=seed,
        crps_samples=crps_samples,
        reference_values=values,
        reference_seconds=tuning_seconds(clock.budget),
    )
    with clock.timed("scikit_learn_references"):
        refs = _kept(kept, task, methods, key)
        for m in methods[len(refs) :]:
            refs.append(m.fit_evaluate(task, budget))
            if kept is not None:
                write_references(kept, refs, key)
    return None if any(r.val_output is None for r in refs) else refs


def classical_first(
    task, space, budget, plan: dict | None, clock: BudgetClock, kept: Path | None = None
) -> list | None:
    """A forecaster's classical references (seasonal naive, AutoETS, AutoTheta), fitted before
    the search: they need no search, and a fit that cannot say whether it beat them is not
    done, so the budget spends their time first (`budget.deadline`) and never skips them.
    None (they run at the end, if time is left) for other tasks, where the plan found no room
    for them (`plan_run`: the smallest search goes first), or where both AutoETS and
    AutoTheta ran past twice their estimate (a slow machine must not eat the search's time;
    where one of them was fitted, the other's row says it was skipped: running all three
    again at the end paid the fitted one twice). Where the plan has them
    on a subset (too many series for the budget), each costly member gets its share of their
    time and is scored on the random subset of the series it reaches
    (`sgem.leaderboard.series_members.SUBSET`). `kept`: where they are kept
    (`CLASSICAL_FILE`), each as soon as it is fitted: a resumed run reads those it finds
    there and fits the rest."""
    if not isinstance(space, TimeSeriesSpace):
        return None
    if plan and plan.get("costly_references_skipped"):  # (`sgem.run.reference_plan`)
        with clock.timed("classical_references"):
            return [_skipped_or_fitted(m, task, budget, plan) for m in reference_methods(space)]
    estimate = None if plan is None else plan.get("references_seconds_estimate", 0.0)
    if estimate == 0.0:
        return None
    methods = reference_methods(space)
    key = _names(methods)
    subset = bool(plan and plan.get("references_on_a_subset"))
    shares = (plan or {}).get("references_shares")  # (a plan written before: equal shares)
    left_out = (plan or {}).get("references_left_out") or {}
    until = None if estimate is None else time.perf_counter() + 2.0 * estimate + 5.0
    with clock.timed("classical_references"):
        refs = _kept(kept, task, methods, key)  # (a resumed run's: not fitted again)
        for m in methods[len(refs) :]:
            member = str(getattr(m, "member", m.name))  # (a `ClassicalReference`'s)
            if member in left_out:  # too costly for the subset's share: its row says why
                refs.append(_skipped(m, budget, left_out[member]))
                continue
            if subset and estimate is not None:  # each costly member its share of the time,
                # scored on the series it reaches in it (seasonal naive: free)
                share = estimate / max(len(methods) - 1, 1)
                if shares is not None and not ClassicalMember(member).cheap:
                    share = float(shares.get(member, share))
                until = time.perf_counter() + share
            refs.append(m.fit_evaluate(task, replace(budget, deadline=until)))
            if kept is not None:  # each kept as soon as it is fitted (a kill keeps the first)
                write_references(kept, refs, key)
    if not any(_fitted_costly(r) for r in refs):
        if kept is not None:
            kept.unlink(missing_ok=True)  # (a resume must not read them as fitted in time)
        return None  # (one of AutoETS / AutoTheta is enough: the other says it was skipped)
    return refs


def _names(methods: list) -> str:
    """What kept references are keyed by besides their rows: the members' names, in order."""
    return ",".join(getattr(m, "name", type(m).__name__) for m in methods)


def _kept(kept: Path | None, task, methods: list, key: str) -> list[MethodResult]:
    """The first of `methods`' references as `kept` holds them under `key` (a resumed
    run's), or none (no file, or one for other rows or members: fitted again)."""
    if kept is None or not kept.exists():
        return []
    return (read_references(kept, task, key) or [])[: len(methods)]


def _skipped_or_fitted(method, task, budget, plan: dict) -> MethodResult:
    """Seasonal naive fitted (it costs nothing); AutoETS / AutoTheta skipped with the plan's
    reason: too slow on these series for the budget to score them even on a subset."""
    if ClassicalMember(method.member).cheap:
        return method.fit_evaluate(task, budget)
    why = (plan.get("references_left_out") or {}).get(method.member)
    return _skipped(method, budget, why or plan["costly_references_skipped"])


def _skipped(method, budget, why: str) -> MethodResult:
    """A classical reference's row where the budget plan left it out, saying why."""
    return MethodResult(
        method.name,
        budget.seed,
        note=f"skipped: {why}",
        kind=method.kind,
        crps_samples=budget.crps_samples,
    )


def _fitted_costly(ref: MethodResult) -> bool:
    """AutoETS or AutoTheta with outputs (seasonal naive is fitted whatever the budget)."""
    member = ref.fitted.classical if ref.fitted is not None else None
    return ref.val_output is not None and member is not None and not member.cheap


__all__ = ["classical_first", "shared_table_references", "table_references"]
