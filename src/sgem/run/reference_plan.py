"""How much of a forecaster's time budget its classical references (AutoETS, AutoTheta) get
before the search, and on how many series: all of them where they fit, else a random subset
whose size each member's own cost decides (`subset_shares`).

Why per member: their costs differ by an order of magnitude (on 6000 monthly series AutoETS
about 375 s of fits, AutoTheta about 40 s). An equal split of a 12-s subset share, each
member paying a process start of its own, left AutoETS too few held-out windows to be
scored; both were dropped and the saved model was seasonal naive alone.
"""

from __future__ import annotations

import logging

from ..data.task import ClusteredTask
from ..moe.classical_pool import process_start

log = logging.getLogger(__name__)

#: a forecaster's classical references (AutoETS, AutoTheta) come before the search where
#: they take at most this share of the budget: the saved model is never worse than what they
#: give, and a fit that cannot say whether it beat them is not done (the search gets the
#: rest, cut short by the budget's fence if it is less than its smallest run)
REFERENCES_SHARE = 0.8
#: ... and where they would take more, they are scored on the random subset of the series
#: that this share of the budget allows (`sgem.leaderboard.series_members.SUBSET`)
SUBSET_SHARE = 0.2


def reference_seconds(task: ClusteredTask, space, limit: float, enough: float) -> dict[str, float]:
    """Each classical forecaster's seconds on every validation and holdout window, measured
    on a few (`sgem.leaderboard.series_members.classical_seconds`); {} for other kinds."""
    from ..space.timeseries import TimeSeriesSpace

    if not isinstance(space, TimeSeriesSpace):
        return {}
    from ..leaderboard.series_members import classical_seconds

    return classical_seconds(task, limit=limit, enough=enough)


def subset_shares(
    costs: dict[str, float], windows: int, seconds: float
) -> tuple[dict[str, float], dict[str, str]]:
    """({member: its seconds}, {member left out: why}) of members whose every-series
    `costs` do not fit the budget, given `seconds` between them. Each kept member pays its
    process start (`process_start`), then fits the same share of the series as the others
    (the share that makes the least-scored member's windows as many as they can be), or all
    of them where that share is the whole; the costliest is left out while that share of
    the `windows` (held-out windows per split) falls short of `MIN_SUBSET_WINDOWS`. (No
    margin on top: the costs are priced 1.5x what was timed and ran 2-3x the fits' real
    seconds on 3000 and 6000 monthly series; with a margin of 1.5 windows as well, AutoETS
    was left out on 3000 series, where it reached enough windows to be scored and weighed.)"""
    from ..leaderboard.series_members import MIN_SUBSET_WINDOWS

    kept = sorted(costs, key=lambda m: costs[m])
    left_out: dict[str, str] = {}
    need = MIN_SUBSET_WINDOWS
    while kept:
        starts = {m: process_start(costs[m]) for m in kept}
        fits = {m: max(costs[m] - starts[m], 1e-9) for m in kept}
        room = seconds - sum(starts.values())
        share = min(room / sum(fits.values()), 1.0) if room > 0 else 0.0
        if share * windows >= need:
            return {m: starts[m] + share * fits[m] for m in kept}, left_out
        costliest = kept.pop()
        reach = max(share * windows, 0.0)
        left_out[costliest] = (
            f"{costliest} on every series would take about {costs[costliest]:.0f} s; in the "
            f"{seconds:.0f} s a random subset of the series could have"
            f"{' beside ' + ' and '.join(kept) if kept else ''} it would reach about "
            f"{reach:.0f} held-out windows, fewer than the {need} needed to score it, so it "
            "is skipped and the search gets that time"
        )
    return {}, left_out


def plan_references(
    task: ClusteredTask,
    costs: dict[str, float],
    seconds: float,
    budget: float,
    smallest_search: float = 0.0,
) -> tuple[float, dict]:
    """(seconds reserved for the references before the search, the plan's fields on them),
    `seconds`: what the budget leaves after reading the data, the pilot and the tail;
    `smallest_search`: what the search's smallest run needs. Where the search cannot have
    even that, the fit will lean on the references, so a subset of the series gets
    `REFERENCES_SHARE` of the seconds, not `SUBSET_SHARE` (at 30 s on the 645 M3 yearly
    series, 3 s left AutoETS and AutoTheta out, and the fit stopped as too small)."""
    every = sum(costs.values())
    fields: dict = {
        "references_on_a_subset": False,
        "references_every_series_seconds": round(every, 1),  # (what a forecast refits)
        "references_seconds_by_member": {m: round(s, 1) for m, s in costs.items()},
    }
    if not (every and every > REFERENCES_SHARE * seconds):
        return every, fields
    # the search first; the references on the series a share of it allows
    full = budget + every - (1 - REFERENCES_SHARE) * seconds
    windows = min(len(task.val), len(task.test))
    share = REFERENCES_SHARE if seconds < smallest_search else SUBSET_SHARE
    shares, left_out = subset_shares(costs, windows, share * seconds)
    fields["references_on_a_subset"] = True
    fields["references_shares"] = {m: round(s, 1) for m, s in shares.items()}
    fields["references_left_out"] = left_out
    if not shares:
        fields["costly_references_skipped"] = (
            f"{'; '.join(left_out.values())} (seasonal naive stays); about {full:.0f} s "
            "would fit them on every series"
        )
        log.warning("time budget %.0f s: %s", budget, fields["costly_references_skipped"])
        return 0.0, fields
    reached = " and ".join(f"{m} in about {s:.0f} s" for m, s in shares.items())
    skipped = "".join(f"; {why}" for why in left_out.values())
    log.warning(
        "time budget %.0f s: AutoETS / AutoTheta on every series would take about %.0f s; "
        "the leaderboard scores %s on a random subset of the series (with the MoE on the "
        "same windows), and a combination weighs them there%s; about %.0f s would fit them "
        "on every series",
        budget,
        every,
        reached,
        skipped,
        full,
    )
    return sum(shares.values()), fields


__all__ = [
    "REFERENCES_SHARE",
    "SUBSET_SHARE",
    "plan_references",
    "process_start",
    "reference_seconds",
    "subset_shares",
]
