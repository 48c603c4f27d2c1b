"""The leaderboard's references for series (`sgem.leaderboard.members` lists them all):
seasonal naive, and statsforecast's AutoETS / AutoTheta fitted on each window's own
history, as a saved combination refits them at forecast time (`sgem.moe.classical`). Each
series' origins share one fit (the first; the later ones run its parameters forward).

As every reference, each gives validation outputs from a fit on the training windows and
holdout outputs from a fit on train + validation, in the task's model units.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from ..data.task import ClusteredTask, Split
from ..methods.budget import MethodBudget
from ..methods.result import Fitted, MethodResult
from ..moe.classical import (
    NORMAL_DF,
    STATSFORECAST_FIX,
    ClassicalMember,
    statsforecast_missing,
)
from ..moe.classical_pool import Deadline, pool_workers, pooled_seconds
from .forecast_cost import FORECAST_SECONDS, expected_seconds

log = logging.getLogger(__name__)


def _x(split: Split) -> np.ndarray:
    return split.x.reshape(len(split.x), -1).astype(np.float64)


#: the leaderboard's names of the classical members (`sgem.moe.classical.NAMES`)
DISPLAY = {"SeasonalNaive": "seasonal naive"}
#: `MethodResult.extra`'s key of a reference scored on some of the series ("k of n series":
#: the budget ended first); its other windows' outputs are NaN, and a combination weighs it
#: on the windows of the series it reached (`sgem.leaderboard.combining._where_all_scored`)
SUBSET = "subset"
#: ... where it has at least this many validation and holdout windows, else it is skipped
MIN_SUBSET_WINDOWS = 30


class ClassicalReference:
    """AutoETS, AutoTheta or seasonal naive, fitted on each window's history (the same refit
    `sgem.moe.classical` does for a saved combination), with the season of the file's
    frequency where the task knows it; its interval spread and tails fitted on validation.
    Seasonal naive runs even past the budget's fence (it costs nothing), so every forecaster
    has a combinable reference."""

    kind = "classical"
    uses_domain_labels = False

    def __init__(self, member: str) -> None:
        self.member = member
        self.name = DISPLAY.get(member, member)

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        fields: dict[str, Any] = {"kind": self.kind, "crps_samples": budget.crps_samples}
        skipped = MethodResult(self.name, budget.seed, note="skipped: budget ended", **fields)

        ref = ClassicalMember(self.member)
        missing = None if ref.cheap else statsforecast_missing()
        if missing is not None:  # (said on the leaderboard, not faked by seasonal naive)
            note = f"skipped: statsforecast cannot be imported ({missing}); {STATSFORECAST_FIX}"
            log.warning("%s %s", self.name, note)
            return MethodResult(self.name, budget.seed, note=note, **fields)

        # the budget's fence, or the budget's own deadline for them (a wall-clock time, so
        # that the processes refitting them side by side read it too)
        at = (
            None if budget.deadline is None else time.time() + budget.deadline - time.perf_counter()
        )
        stop = None if ref.cheap else Deadline(at)
        if stop is not None and stop():
            return skipped
        horizon = int(task.test.y.shape[1])
        start = time.perf_counter()
        # local fits stop at the budget's fence: the series done by then (a random subset,
        # all their windows) are scored where they are enough, else the member is skipped
        val, test = _classical(ref, task, ("val", "test"), horizon, stop=stop, partial=True)
        done_val, done_test = (np.isfinite(o[:, :, 0]).all(1) for o in (val, test))
        whole = done_val.all() and done_test.all()
        if not whole and min(done_val.sum(), done_test.sum()) < MIN_SUBSET_WINDOWS:
            return skipped
        # spread and tails from validation
        tuned = ref.fit_tails(val[done_val], task.val.y[done_val])
        val, test = (tuned.outputs(o[..., 0], o[..., 1]) for o in (val, test))
        note = f"interval width x{tuned.spread:.2f}, Student-t df {tuned.df:g} (on validation)"
        note += _long_season_note(ref, _seasons(task, task.test))
        extra: dict[str, Any] = {}
        if not whole:
            done, every = _series_count(task, done_test), _series_count(task)
            extra[SUBSET] = f"{done} of {every} series"
            note = f"on {done} of {every} series (random; the budget ended); {note}"
        seconds = time.perf_counter() - start
        if not ref.cheap:  # what refitting it on every series will take at forecast time
            extra[FORECAST_SECONDS] = expected_seconds(ref.fit_seconds, _forecast_series(task))
        return MethodResult(
            self.name,
            budget.seed,
            seconds=seconds,
            val_output=val,
            test_output=test,
            note=note,
            fitted=Fitted(classical=tuned),
            extra=extra,
            **fields,
        )


def _series_count(task: ClusteredTask, rows: np.ndarray | None = None) -> int:
    """How many series the holdout windows `rows` (default all) come from."""
    ids = _origins(task, "test")[1]
    return len(np.unique(ids if rows is None else ids[rows]))


def _forecast_series(task: ClusteredTask) -> int:
    """How many series a forecast of the task's data refits on: each user series (also
    those too short for a held-out window), else each holdout window."""
    meta = task.meta if isinstance(task.meta, dict) else {}
    return len(meta.get("histories") or ()) or _series_count(task)


def classical_seconds(
    task: ClusteredTask,
    sample: int = 12,
    limit: float | None = None,
    enough: float | None = None,
) -> dict[str, float]:
    """What each `ClassicalReference` will take on this task, {member: seconds}, measured:
    AutoETS and AutoTheta timed on a few validation windows (as the leaderboard fits them;
    fewer once the timing has spent `limit` seconds, or once two say they exceed `enough`
    together) and scaled to one fit per series with held-out windows (its other origins run
    forward, at about a tenth of a fit), with a margin, on the processes they will be
    refitted in (`sgem.moe.classical_pool`; each member starts its own). A budget plan
    reserves it (local fits of seasonal models on thousands of series take tens of seconds)
    and plans each member on its own (`sgem.run.reference_plan`: AutoETS can cost ten times
    AutoTheta). Why `enough`: on 3000 daily series of up to 4000 days each timed fit took
    1.5 s, and twelve of them (20 s of a 2-minute budget) only refined an estimate of 6900 s
    that two already put far beyond the budget. {} where statsforecast is missing."""
    n = min(sample, len(task.val))
    if n == 0 or statsforecast_missing() is not None:  # (then they are skipped)
        return {}
    names = ("AutoETS", "AutoTheta")
    horizon = int(task.test.y.shape[1])
    index = np.linspace(0, len(task.val) - 1, n).astype(int)
    began = time.perf_counter()
    for name in names:  # warm-up: the first fit pays one-off start-up costs
        _classical(ClassicalMember(name), task, ("val",), horizon, index=index[:1])
    windows = len(task.val) + len(task.test)
    fits = len(np.unique(np.concatenate([_origins(task, p)[1] for p in ("val", "test")])))

    def estimate(per_fit: float) -> float:
        return pooled_seconds(
            1.5 * per_fit * (fits + 0.1 * (windows - fits)), pool_workers(windows)
        )

    spent, timed = dict.fromkeys(names, 0.0), 0

    def estimates() -> dict[str, float]:
        return {name: estimate(spent[name] / timed) for name in names}

    for j in range(n):
        if timed and limit is not None and time.perf_counter() - began > limit:
            break
        if timed >= 2 and enough is not None and sum(estimates().values()) > enough:
            break  # two fits already put them past `enough`
        for name in names:
            start = time.perf_counter()
            _classical(ClassicalMember(name), task, ("val",), horizon, index=index[j : j + 1])
            spent[name] += time.perf_counter() - start
        timed += 1
    return estimates()


def _long_season_note(ref: ClassicalMember, seasons: np.ndarray) -> str:
    """What the leaderboard says where AutoETS took a season beyond ETS's out by MSTL."""
    from ..baselines.statistical import ETS_LONGEST_SEASON

    longest = int(np.max(seasons, initial=0))
    if ref.name != "AutoETS" or longest <= ETS_LONGEST_SEASON:
        return ""
    return (
        f"; season {longest} (over ETS's {ETS_LONGEST_SEASON}) taken out by MSTL, AutoETS on "
        "the adjusted series"
    )


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
    ref: ClassicalMember,
    task: ClusteredTask,
    parts: tuple[str, ...],
    horizon: int,
    index: np.ndarray | None = None,
    stop=None,
    partial: bool = False,
) -> list[np.ndarray]:
    """A classical member's outputs (model units) on every window of each split in `parts`
    (or on the windows `index` of a single split), fitted on the series' whole history up to
    the window's end where the task keeps it (as a saved combination refits at forecast
    time; one fit per series, run forward to its later origins), else on the window's
    context."""
    histories, scales, seasons, series, sizes = [], [], [], [], []
    whole = True  # the task keeps whole histories (then origins of a series share a fit)
    for part in parts:
        split = getattr(task, part)
        rows = np.arange(len(split.y)) if index is None else np.asarray(index)
        known, ids, scale = _origins(task, part)
        whole = whole and known is not None
        own = known if known is not None else list(_x(split))
        histories += [own[i] for i in rows]
        scales.append(scale[rows])
        seasons.append(_seasons(task, split)[rows])
        series.append(ids[rows])
        sizes.append(len(rows))
    grouped = np.concatenate(series).tolist() if whole else None
    season = np.concatenate(seasons).tolist()
    loc, spread = ref.forecast(histories, horizon, season, stop, grouped, partial)
    scale = np.concatenate(scales)[:, None]
    out = np.stack([loc / scale, spread / scale, np.full_like(loc, NORMAL_DF)], -1)
    return np.split(out, np.cumsum(sizes)[:-1])


def _origins(task: ClusteredTask, part: str) -> tuple[list | None, np.ndarray, np.ndarray]:
    """(raw history up to each window's last context value, each window's series, each
    window's scale: model units = raw / scale) of a user's series task
    (`sgem.data.user_tasks.series_task` keeps them), else (None, each window's own index:
    no two windows share a fit, ones)."""
    meta = task.meta if isinstance(task.meta, dict) else {}
    windows = (meta.get("windows") or {}).get(part)
    series, offsets = meta.get("histories"), meta.get("history_offsets")
    n = len(getattr(task, part).y)
    if windows is None or series is None or offsets is None:
        return None, np.arange(n) + (0 if part == "val" else len(task.val)), np.ones(n)
    ends = windows.start + int(meta["context"])
    histories = [
        series[i][: max(int(e) - offsets[i], 1)] for i, e in zip(windows.series, ends, strict=True)
    ]
    return (
        histories,
        np.asarray(windows.series, dtype=np.int64),
        np.asarray(windows.scale, dtype=np.float64),
    )


__all__ = ["DISPLAY", "MIN_SUBSET_WINDOWS", "SUBSET", "ClassicalReference", "classical_seconds"]
