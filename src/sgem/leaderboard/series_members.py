"""The leaderboard's references for series (`sgem.leaderboard.members` lists them all):
seasonal naive, and statsforecast's AutoETS / AutoTheta fitted on each window's own
history, as a saved combination refits them at forecast time (`sgem.moe.classical`).

As every reference, each gives validation outputs from a fit on the training windows and
holdout outputs from a fit on train + validation, in the task's model units.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..data.task import ClusteredTask, Split
from ..methods.budget import MethodBudget
from ..methods.result import Fitted, MethodResult
from ..moe.classical import NORMAL_DF, ClassicalMember, Stopped
from ..train.time_fence import fence_passed


def _x(split: Split) -> np.ndarray:
    return split.x.reshape(len(split.x), -1).astype(np.float64)


class SeasonalNaiveReference:
    """Seasonal naive on every window's context, with its spread multiplier and df fitted
    on the fit's windows (as `sgem.baselines.SeasonalNaive` does): on the training windows
    for validation, on train + validation for the holdout."""

    name = "seasonal naive"
    kind = "classical"
    uses_domain_labels = False

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        from ..baselines.naive import fit_spread
        from ..baselines.seasonal_naive import seasonal_forecast

        horizon = int(task.test.y.shape[1])
        start = time.perf_counter()

        def naive(fit_on: list[Split], split: Split) -> np.ndarray:
            x = np.concatenate([_x(s) for s in fit_on])
            y = np.concatenate([np.asarray(s.y, dtype=np.float64) for s in fit_on])
            a, df = fit_spread(*seasonal_forecast(x, horizon), y)
            loc, base = seasonal_forecast(_x(split), horizon)
            return np.stack([loc, a * base, np.full_like(loc, df)], -1)

        val = naive([task.train], task.val)
        test = naive([task.train, task.val], task.test)
        return MethodResult(
            self.name,
            budget.seed,
            seconds=time.perf_counter() - start,
            val_output=val,
            test_output=test,
            kind=self.kind,
            crps_samples=budget.crps_samples,
        )


class ClassicalReference:
    """AutoETS or AutoTheta (statsforecast), fitted on each window's history (the same refit
    `sgem.moe.classical` does for a saved combination), with the season of the file's
    frequency where the task knows it; its interval spread and tails fitted on validation."""

    kind = "classical"
    uses_domain_labels = False

    def __init__(self, name: str) -> None:
        self.name = name

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        fields: dict[str, Any] = {"kind": self.kind, "crps_samples": budget.crps_samples}
        skipped = MethodResult(self.name, budget.seed, note="skipped: budget ended", **fields)

        def stop() -> bool:  # the budget's fence, or the budget's own deadline for them
            late = budget.deadline is not None and time.perf_counter() > budget.deadline
            return late or fence_passed()

        if stop():
            return skipped
        horizon = int(task.test.y.shape[1])
        seasons = _seasons(task, task.val), _seasons(task, task.test)
        start = time.perf_counter()
        ref = ClassicalMember(self.name)
        try:  # local fits stop at the budget's fence (a member cut short is not scored)
            val, test = (
                _classical(ref, task, part, horizon, season, stop=stop)
                for part, season in zip(("val", "test"), seasons, strict=True)
            )
        except Stopped:
            return skipped
        tuned = ref.fit_tails(val, task.val.y)  # spread and tails from validation
        val, test = (tuned.outputs(o[..., 0], o[..., 1]) for o in (val, test))
        return MethodResult(
            self.name,
            budget.seed,
            seconds=time.perf_counter() - start,
            val_output=val,
            test_output=test,
            note=f"interval width x{tuned.spread:.2f}, Student-t df {tuned.df:g} (on validation)",
            fitted=Fitted(classical=tuned),
            **fields,
        )


def classical_seconds(task: ClusteredTask, sample: int = 12) -> float:
    """What the `ClassicalReference`s will take on this task, measured: AutoETS and AutoTheta
    timed on a few validation windows (as the leaderboard fits them) and scaled to every
    validation and holdout window, with a margin. A budget plan reserves it (local fits
    of seasonal models on thousands of windows take tens of seconds)."""
    n = min(sample, len(task.val))
    if n == 0:
        return 0.0
    horizon = int(task.test.y.shape[1])
    index = np.linspace(0, len(task.val) - 1, n).astype(int)
    season = _seasons(task, task.val)[index]
    for name in ("AutoETS", "AutoTheta"):  # warm-up: the first fit pays one-off start-up costs
        _classical(ClassicalMember(name), task, "val", horizon, season[:1], index[:1])
    start = time.perf_counter()
    for name in ("AutoETS", "AutoTheta"):
        _classical(ClassicalMember(name), task, "val", horizon, season, index)
    per_window = (time.perf_counter() - start) / n
    return 1.5 * per_window * (len(task.val) + len(task.test))


def _seasons(task: ClusteredTask, split: Split) -> np.ndarray:
    """Each window's seasonal period: the file's frequency where the task knows it (a
    user's file: `freq`; a benchmark's domains: `seasonality` per domain), else the
    context's own autocorrelation (`choose_seasons`), as a saved combination does."""
    from ..baselines.seasonal_naive import choose_seasons
    from ..forecast import task_seasons
    from ..moe.classical import season_of

    meta = task.meta if isinstance(task.meta, dict) else {}
    season = season_of(meta)
    if season:
        return np.full(len(split.y), season, dtype=np.int64)
    per_domain = np.atleast_1d(np.asarray(task_seasons(task), dtype=np.int64))
    source = np.asarray(split.source)
    if meta.get("seasonality") is not None and source.max(initial=0) < len(per_domain):
        return per_domain[source]
    return choose_seasons(_x(split))


def _classical(
    ref,
    task: ClusteredTask,
    part: str,
    horizon: int,
    season: np.ndarray,
    index: np.ndarray | None = None,
    stop=None,
) -> np.ndarray:
    """A classical member's outputs (model units) on every window of split `part` (or its
    windows `index`), fitted on the series' whole history up to the window's end where the
    task keeps it (as a saved combination refits at forecast time), else on the window's
    context."""
    split = getattr(task, part)
    histories, scale = _histories(task, part)
    rows = np.arange(len(split.y)) if index is None else np.asarray(index)
    if histories is None:
        loc, spread = ref.forecast(list(_x(split)[rows]), horizon, season, stop)
    else:
        loc, spread = ref.forecast([histories[i] for i in rows], horizon, season, stop)
        loc, spread = loc / scale[rows, None], spread / scale[rows, None]
    return np.stack([loc, spread, np.full_like(loc, NORMAL_DF)], -1)


def _histories(task: ClusteredTask, part: str) -> tuple[list | None, np.ndarray]:
    """(raw history up to each window's last context value, the window's scale) of a user's
    series task (`sgem.data.user_tasks.series_task` keeps them), else (None, ones)."""
    meta = task.meta if isinstance(task.meta, dict) else {}
    windows = (meta.get("windows") or {}).get("val" if part == "val" else part)
    series, offsets = meta.get("histories"), meta.get("history_offsets")
    if windows is None or series is None or offsets is None:
        return None, np.ones(len(getattr(task, part).y))
    ends = windows.start + int(meta["context"])
    histories = [
        series[i][: max(int(e) - offsets[i], 1)] for i, e in zip(windows.series, ends, strict=True)
    ]
    return histories, np.asarray(windows.scale, dtype=np.float64)


__all__ = ["ClassicalReference", "SeasonalNaiveReference", "classical_seconds"]
