"""What a saved forecaster will cost at forecast time, and the combination kept within it.

Why: a combination's AutoETS / AutoTheta are refitted on every series each time it forecasts
(`sgem.moe.classical`), so a fit's time budget bounded the fit but not the forecast that
follows: a 5-minute fit on 120 daily weather series took another 227 s to forecast, and a
collection of thousands of long series would take hours. The leaderboard has just timed each
member's local fits on the series' held-out windows (one per series); scaled to every series
on the processes a forecast uses, that is what the forecast will take, and the leaderboard
says it. Where the user sets a forecast budget (`forecast_budget`, `--forecast-budget`),
members beyond it are left out of the saved combination, the most expensive first; the
board still scores them. There is no such limit by default: leaving both members out of a
5-minute fit on the weather series forecast in 0.7 s instead of 221 s, at MASE 3.53
instead of 1.06.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..methods.result import MethodResult
from ..moe.classical_pool import pool_workers, pooled_seconds

#: `MethodResult.extra`'s key: a classical member's expected seconds to refit on every series
#: of the task at forecast time (`expected_seconds`)
FORECAST_SECONDS = "forecast_seconds"


def expected_seconds(fit_seconds: Sequence[float], series: int) -> float:
    """A classical member's seconds to refit on all `series` at forecast time, from the
    seconds of its local fits on held-out windows (`ClassicalMember.fit_seconds`, one per
    series): their mean after the first, on the processes a forecast refits in
    (`pooled_seconds`), plus what the first paid beyond it (start-up). Why not the
    member's wall clock scaled from the series it reached: where the budget let it reach
    36 of 6000 series, starting its worker processes was most of that clock, and the
    scaled estimate was 1240 s (statsforecast's AutoTheta fits 3000 such series in 19 s)."""
    if not len(fit_seconds):
        return 0.0
    rest = fit_seconds[1:] if len(fit_seconds) > 1 else fit_seconds
    per_fit = float(np.mean(rest))
    start_up = max(float(fit_seconds[0]) - per_fit, 0.0)
    return start_up + pooled_seconds(per_fit * series, pool_workers(series))


def within_allowance(
    members: Sequence[MethodResult], allowance: float | None
) -> tuple[list[MethodResult], dict[str, float]]:
    """(the members kept, {left-out member: its expected forecast seconds}): the costliest
    refitted members dropped until the others' expected forecast seconds sum to at most
    `allowance` (None: no limit). Members without a cost (scikit-learn, seasonal naive) stay."""
    cost = {m.method: float(m.extra.get(FORECAST_SECONDS) or 0.0) for m in members}
    total = sum(cost.values())
    left_out: dict[str, float] = {}
    for name in sorted(cost, key=lambda k: -cost[k]):
        if allowance is None or total <= allowance or not cost[name]:
            break
        left_out[name], total = cost[name], total - cost[name]
    return [m for m in members if m.method not in left_out], left_out


def forecast_report(
    refs: Sequence[MethodResult],
    saved: Iterable[str],
    left_out: dict[str, float],
    allowance: float | None,
) -> dict | None:
    """The leaderboard's "forecast" entry: the saved members' (names `saved`) expected
    seconds to refit on every series at forecast time, the allowance, and what it left out
    (None: no refitted member was a candidate)."""
    names = set(saved)
    costs = {
        m.method: round(float(m.extra[FORECAST_SECONDS]), 1)
        for m in refs
        if m.method in names and FORECAST_SECONDS in m.extra
    }
    if not costs and not left_out:
        return None
    return {
        "expected_seconds": costs,
        "allowance_seconds": allowance,
        "left_out": {k: round(v, 1) for k, v in left_out.items()},
    }


def forecast_lines(report: dict) -> list[str]:
    """The leaderboard's lines on forecast time (`sgem fit`, `sgem leaderboard`, the card)."""
    entry = report.get("forecast")
    if not entry:
        return []
    allowance = entry.get("allowance_seconds")
    limit = "no limit" if allowance is None else f"forecast budget {_seconds(allowance)}"
    costs = ", ".join(f"{k} ~{_seconds(v)}" for k, v in entry["expected_seconds"].items())
    how = "timed while fitting, on this machine; " if costs else ""
    more = "; --forecast-budget caps it, at a cost in accuracy" if costs else ""
    lines = [f"  refitted per series at forecast time: {costs or 'none'} ({how}{limit}{more})"]
    if entry.get("left_out"):
        out = ", ".join(f"{k} (~{_seconds(v)})" for k, v in entry["left_out"].items())
        lines.append(
            f"  left out of the combination to keep the forecast within its budget: {out}; "
            "a larger --forecast-budget keeps them"
        )
    return lines


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.2g} s"


__all__ = [
    "FORECAST_SECONDS",
    "expected_seconds",
    "forecast_lines",
    "forecast_report",
    "within_allowance",
]
