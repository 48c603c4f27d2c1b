"""Fit the search to a wall-clock budget (`--time-budget 10m`).

The search's cost is mostly candidate trainings, and their count is set by the config
(initial design, iterations, finalists, refit). A pilot times one candidate training on all
clusters; the plan then keeps as many EM iterations (and as large an initial design) as the
budget affords after reserving the final retrain, assuming the surrogate, routing and
bookkeeping cost as much again as the trainings. When even the smallest search (the
minimal initial design, one iteration, the smallest finalisation) does not fit, candidates
are trained for fewer steps (down to `MIN_STEP_FRACTION`). The search stops at the deadline
(`SGEM.fit(deadline=...)`), and runs on past the planned iterations while it allows, so a
mis-estimate costs quality, never the model, and a fast search uses what it saved.

The final stage is priced first and made cheaper where it does not fit: that arithmetic is
`sgem.run.budget_arithmetic` (re-exported here); this module measures the pilot, writes the
plan of a run once (a resume reuses it) and turns it into the search's deadline.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from typing import TYPE_CHECKING

import numpy as np

from ..atomic import write_atomic
from ..data.task import ClusteredTask
from ..errors import SgemUserError
from ..search.config import SearchConfig
from .budget_arithmetic import (
    FINAL_SHARE,
    ITERATION_CAP_FACTOR,
    MIN_STEP_FRACTION,
    apply_plan,
    final_units,
    left_for_final,
    minimum_seconds,
    plan_final,
    plan_search,
)
from .pilot import PILOT_SHARE, PilotCut, pilot_seconds
from .reference_plan import REFERENCES_SHARE, plan_references, reference_seconds

if TYPE_CHECKING:
    from ..space.arch import CellSpace
    from .runconfig import RunConfig
    from .rundir import RunDirectory

log = logging.getLogger(__name__)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: the leaderboard's global networks, timed on their cells, are given this many times
#: their estimate (`seed_rounds_end`): the timing is from a few steps
LEADERBOARD_SAFETY = 1.25
#: the share of the final stage's reserve an unplanned EM step must leave besides it
#: (`extension_margin`)
EXTENSION_MARGIN = 0.25


#: seconds of the tail per held-out value scored (a validation or holdout sample's step):
#: the leaderboard scores every member on them after the fence. On 3000 daily series (6000
#: windows of 14 steps) its scores, combination and seasonal naive took 6 s here, and on one
#: H200 machine (16 slower cores) a 2-minute fit ended 7 s past its budget with 3.2 s of tail
SCORING_SECONDS_PER_VALUE = 7e-5


def tail_seconds(budget: float, task: ClusteredTask | None = None) -> float:
    """What a fit needs after its last training (scoring the holdout and the leaderboard's
    members, saving the model, figures, result.json): kept free of training by the fence
    (`sgem.train.time_fence`). With `task`, its held-out values add their scoring time."""
    scored = 0 if task is None else held_out_values(task)
    return 2.0 + 0.01 * float(budget) + SCORING_SECONDS_PER_VALUE * scored


def held_out_values(task: ClusteredTask) -> int:
    """Validation and holdout samples times their steps (1 for a label or a single value)."""
    steps = int(np.prod(np.shape(task.val.y)[1:], dtype=np.int64))
    return (len(task.val) + len(task.test)) * max(steps, 1)


def parse_duration(text: str | float | int) -> float:
    """Seconds from "90", "90s", "10m", "1.5h", "2h30m" (or a number)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        seconds = float(text)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)\s*([smhd]?)", str(text).strip().lower())
        joined = "".join(f"{n}{u}" for n, u in parts)
        if not parts or joined != re.sub(r"\s+", "", str(text).strip().lower()):
            raise SgemUserError(
                f"cannot read the time budget {text!r}; write e.g. 90s, 10m, 2h or 1h30m"
            )
        seconds = sum(float(n) * _UNITS[u or "s"] for n, u in parts)
    if not np.isfinite(seconds) or seconds <= 0:
        raise SgemUserError(f"the time budget must be positive, got {text!r}")
    return seconds


PLAN = "budget_plan.json"


def deadline(plan: dict | None, references_done: bool = False) -> float | None:
    """When the EM loop must stop to leave time for the finalisation and the final retrain
    (a `time.perf_counter()` value), from a budget plan written in this process: the
    reserve is priced in the pilot's unit times `plan["searched_cost_ratio"]` (what the
    searched cells cost against the random ones, `searched_cost_ratio`; 1 before it is
    measured). `references_done`: the leaderboard's classical forecasters were fitted before
    the search (their time is spent, not reserved)."""
    if plan is None:
        return None
    reserve = final_stage_reserve(plan)
    if not references_done:
        reserve += plan.get("references_seconds_estimate", 0.0)  # the leaderboard's local fits
    return plan["_training_ends"] - reserve


def extension_margin(plan: dict | None) -> float:
    """How much earlier than the deadline an EM step past the planned ones must end
    (`SGEM.fit(extension_margin=...)`): the final stage's estimate is off by up to 2x either
    way, an extra iteration gains little, and a cut final stage costs (a 5-minute fit of 923
    monthly series ran a second, unplanned iteration with no margin, and its experts got 0-1
    steps of their final training). A whole reserve left a 5-minute quarterly fit at 118 s,
    half of it at 132-175 s (the step past the plan that would have fit was refused). A
    quarter is kept: the final stage is planned again for the time the search actually left
    (`replan_final`), so a search that ran long costs the final stage its extras (champion
    cell, refit), not its trainings."""
    return EXTENSION_MARGIN * final_stage_reserve(plan)


def final_stage_reserve(plan: dict | None) -> float:
    """The seconds the search's deadline keeps for what follows it: the final retrain and the
    finalisation. A step past the planned EM iterations must end `EXTENSION_MARGIN` of it
    earlier again (`extension_margin`)."""
    if plan is None:
        return 0.0
    t = plan["candidate_seconds"]
    # (a plan written before the finalisation was priced: ~8 trainings, twice for overhead)
    finalisation = plan.get("finalisation_seconds_estimate", 2.0 * 8 * t)
    ratio = plan.get("searched_cost_ratio", 1.0)
    return ratio * (plan["final_retrain_seconds_estimate"] + finalisation)


#: the searched cells' cost against the random ones is trusted within these bounds. Below:
#: short trainings understate what the final stage pays besides the steps (building,
#: evaluating and predicting with each network): on digit images a measured 0.34 priced the
#: leaderboard's global networks at 24 s, and they took 31 s (0.44 of the pilot's price).
#: Above 1 it never moves the deadline earlier: on M3 series the searched cells cost 1.6-1.7x
#: the random ones, yet the final stage priced at the pilot's unit already took less than
#: its price (10 s of 44 s on M3 "other"), and at 1.7x a 90-s fit gave up its refit and warm
#: starts and ended at 51 s
COST_RATIO_BOUNDS = (0.5, 1.0)
#: ... and measured once the initial design has this many random cells timed
MIN_TIMED_RANDOM = 3


def searched_cost_ratio(observations, incumbents) -> float | None:
    """What the incumbents' cells cost to train against the random cells of the initial
    design, from the seconds the search measured (mean per cell, then over the cells),
    bounded by `COST_RATIO_BOUNDS` (a cheaper search moves the deadline later, never
    earlier); None before enough random cells are timed. Incumbents not trained yet (the
    first EM step's come from the M-step's pool) are stood in for by the timed cells with
    the lowest validation loss on the clusters they trained on, as many. Why: the pilot
    prices everything in random cells, but the final stage and the leaderboard train the
    searched ones. On 16x16 digit images the search picked skip / max-pool cells at 0.32-0.43 s
    per candidate against 0.56 s for random ones (sep-conv cells up to 0.92 s), so the
    final stage and leaderboard reserved about 1.5x what they took and a 2-minute fit ended
    its search after one EM iteration with 36 s of its budget unused."""
    timed = [o for o in observations if o.seconds > 0]
    random = [o.seconds for o in timed if o.phase == "init"]
    if len(random) < MIN_TIMED_RANDOM:
        return None
    seconds: dict = {}
    for o in timed:
        seconds.setdefault(o.arch, []).append(o.seconds)
    cells = [a for a in dict.fromkeys(incumbents) if a in seconds]
    if not cells:  # the best cells measured so far stand in
        ranked = sorted(timed, key=lambda o: float(np.mean(o.losses[o.mask])))
        cells = list(dict.fromkeys(o.arch for o in ranked))[: max(len(set(incumbents)), 1)]
    ratio = float(np.mean([np.mean(seconds[a]) for a in cells]) / np.mean(random))
    return float(np.clip(ratio, *COST_RATIO_BOUNDS))


def moving_deadline(plan: dict | None, references_done: bool = False):
    """The search's deadline and extension margin re-priced before each EM step
    (`SGEM.fit(reprice=...)`): a callable (store, incumbent archs) -> (deadline, margin)
    that records the measured `searched_cost_ratio` in `plan`; None without a plan."""
    if plan is None:
        return None

    def reprice(store, incumbents) -> tuple[float | None, float]:
        ratio = searched_cost_ratio(store.observations, incumbents)
        if ratio is not None:
            plan["searched_cost_ratio"] = round(ratio, 3)
        return deadline(plan, references_done), extension_margin(plan)

    return reprice


def final_pricing(cfg: RunConfig, task: ClusteredTask, space: CellSpace, search_cfg) -> dict:
    """What prices a run's final stage besides its config (`final_units`' keywords): the
    data ratio, the fixed retrain in epochs, and whether reference networks are trained."""
    from ..space.tabular import TabularSpace  # torch: only when a budget is planned

    n_fit = len(task.train) + len(task.val)
    retrain = None
    if cfg.final_epochs:  # epochs over train + val, summed over experts
        batch = min(search_cfg.train.batch_size or n_fit, n_fit)
        retrain = cfg.final_epochs * n_fit / batch / search_cfg.train.steps
    return {
        "data_ratio": n_fit / max(len(task.train), 1),
        "retrain_units": retrain,
        "references": isinstance(space, TabularSpace),  # `sgem.final.reference` trains them
    }


def replan_final(
    plan: dict,
    cfg: RunConfig,
    configured: SearchConfig,
    searched: SearchConfig,
    task: ClusteredTask,
    space: CellSpace,
    references_done: bool,
) -> tuple[SearchConfig, str]:
    """The final stage planned again when the search ends, for the seconds actually left
    (the training's end less the leaderboard's estimates), from the configured protocol
    (`cfg.final_length`, `configured`'s champion cells and final steps) down the same ladder
    (`plan_final`): (the search config to finish with, its final length). `plan` records
    what was given up ("final_stage_replanned") and the length used. Why: the plan priced
    the search from a pilot and the search stops when its next step would not fit, so it
    may leave more time than planned (a 90-s yearly fit planned its final stage without
    refit or champion cell and ended at 52 s) or, running a step past the plan, less; the
    final stage then takes what is there instead of what was guessed."""
    ratio = plan.get("searched_cost_ratio", 1.0)  # the searched cells' cost, measured
    left = final_stage_ends(plan, references_done) - time.perf_counter()
    pricing = final_pricing(cfg, task, space, configured)
    # priced on the configured search (its candidate training is the pilot's unit); the
    # search's own settings stay, with the final stage's sizes the ladder leaves
    priced, protocol, reduced, _ = plan_final(
        configured,
        cfg.final_length,
        max(left, 0.0) / FINAL_SHARE,  # all that is left is the final stage's
        ratio * plan["candidate_seconds"],
        pricing["data_ratio"],
        pricing["retrain_units"],
        pricing["references"],
    )
    plan["final_stage_replanned"] = {
        "seconds_left": round(left, 1),
        "final_length": protocol.length_name,
        "reduced": reduced,
    }
    log.info(
        "time budget: the final stage runs in %s, as %s%s",
        left_for_final(left),
        protocol.length_name,
        f" ({'; '.join(reduced)})" if reduced else "",
    )
    final_cfg = dataclasses.replace(
        searched, champion_cells=priced.champion_cells, final_steps=priced.final_steps
    )
    return final_cfg, protocol.length_name


def final_stage_ends(plan: dict, references_done: bool) -> float:
    """When the final stage must end as planned (a `time.perf_counter()` value): the
    training's end less the plan's estimate of the leaderboard (and the references', where
    they are still to fit). Its seed rounds end where measured costs say
    (`seed_rounds_end`)."""
    ratio = plan.get("searched_cost_ratio", 1.0)  # the searched cells' cost, measured
    ends = plan["_training_ends"] - ratio * plan.get("after_final_seconds_estimate", 0.0)
    if not references_done:
        ends -= plan.get("references_seconds_estimate", 0.0)
    return ends


def seed_rounds_end(
    plan: dict, task: ClusteredTask, trainer, final, protocol, references_done: bool
) -> float:
    """When a budget's seed rounds must end (a `time.perf_counter()` value): early enough
    for what the leaderboard trains after them, `LEADERBOARD_SAFETY` times its price from
    this run's own cells, each timed on a few optimiser steps
    (`sgem.leaderboard.after_rounds_seconds`, at `protocol`'s lengths): a global network of
    each of `final`'s cells and, where no tracking run left them, each expert's retrain on
    the training split for its out-of-sample validation outputs; and the classical
    references where they are still to fit.

    Why not the plan's reserve: it prices what follows the final stage at the pilot's
    candidate training, which also pays the candidates' validation evaluations and was
    planned at the configured final steps. On 120 daily weather series at 2 minutes it
    reserved 58 s for a leaderboard that took 20 s (the final stage was planned again at a
    fifth of its steps), and the fit ended at 96 s of 120 with no seed round; the final
    stage's own seconds as the retrains' price (they include its scoring) left the M3
    yearly file's 60-s fit no round for a 10-s leaderboard."""
    from ..leaderboard import after_rounds_seconds  # torch: only when rounds may run

    seconds = after_rounds_seconds(
        task, trainer, final, protocol.final_steps, protocol.final_epochs, protocol.length_name
    )
    plan["leaderboard_networks_seconds"] = round(seconds["networks"], 1)  # (result.json)
    plan["leaderboard_retrains_seconds"] = round(seconds["retrains"], 1)
    after = LEADERBOARD_SAFETY * (seconds["networks"] + seconds["retrains"])
    if not references_done:
        after += plan.get("references_seconds_estimate", 0.0)
    return plan["_training_ends"] - after


def plan_run(
    cfg: RunConfig,
    rundir: RunDirectory,
    task: ClusteredTask,
    space: CellSpace,
    search_cfg: SearchConfig,
    device: str,
    start: float,
    members_fitted: bool = False,
) -> tuple[SearchConfig, dict]:
    """The search config planned to the run's time budget. The plan is written once and
    reused on resume, so a resumed run searches exactly what the original planned.
    `members_fitted`: a user's table's scikit-learn references are fitted, so a budget with
    no room left for the smallest search still ends with a model (the search is cut at the
    fence and the combination leans on them) instead of refusing the fit."""

    from ..train.trainer import Trainer  # torch: only when a budget is planned

    assert cfg.seed is not None and cfg.time_budget is not None
    budget = float(cfg.time_budget)
    tail = tail_seconds(budget, task)
    file = rundir.file(PLAN)
    if file.exists():
        plan = json.loads(file.read_text())
    else:
        trainer = Trainer(task, space, search_cfg.train, device)
        try:
            t = pilot_seconds(task, trainer, space, cfg.seed, limit=PILOT_SHARE * budget)
        except PilotCut as cut:
            if not members_fitted:
                smallest = minimum_seconds(search_cfg, cut.seconds, 1.0)
                raise SgemUserError(
                    f"a time budget of {budget:.0f} s is too small for this data: it ended "
                    f"while timing one candidate training ({cut}), and the smallest search "
                    f"needs at least {smallest:.0f} s of such trainings; give a larger "
                    "--time-budget, or less to train on (a shorter --context, fewer series or "
                    "rows)"
                ) from None
            t = cut.seconds  # (at least this long: below, no room for the search)
        pricing = final_pricing(cfg, task, space, search_cfg)
        costs = reference_seconds(task, space, limit=PILOT_SHARE * budget, enough=budget)
        spent = time.perf_counter() - start  # reading the data, the pilot, the references' probe
        seconds = float(cfg.time_budget) - spent - tail
        smallest = minimum_seconds(search_cfg, t, pricing["data_ratio"])
        # (tables and images have no classical references to make room for: references 0)
        references, reference_fields = plan_references(task, costs, seconds, budget, smallest)
        on_all = not reference_fields["references_on_a_subset"]  # (else it said so)
        if on_all and references and seconds - references < smallest:
            log.warning(
                "time budget %.0f s: after AutoETS / AutoTheta (about %.0f s) the search has "
                "%.1f s, less than its smallest run (%.1f s): the MoE will be cut short and "
                "the saved model will lean on the classical forecasters; about %.0f s gives "
                "the search room",
                float(cfg.time_budget),
                references,
                max(seconds - references, 0.0),
                smallest,
                float(cfg.time_budget) + smallest - (seconds - references),
            )
        seconds = max(seconds - references, smallest) if references else seconds
        if seconds < smallest and members_fitted:
            log.warning(
                "time budget %.0f s: after reading the data, fitting the scikit-learn "
                "references and timing a candidate (%.0f s) the search has %.1f s, less than "
                "its smallest run (%.1f s): it is cut short and the saved model leans on the "
                "references; about %.0f s gives the search room",
                budget, spent, max(seconds, 0.0), smallest, budget + smallest - seconds,
            )  # fmt: skip
            seconds = smallest
        if seconds < smallest:
            needed = smallest + spent + tail
            raise SgemUserError(
                f"a time budget of {float(cfg.time_budget):.0f} s is too small for this data: "
                f"reading it and timing one candidate training took {spent:.0f} s (one "
                f"training: {t:.2f} s), and the smallest search with its final stage needs "
                f"about {needed:.0f} s in all; give --time-budget {int(np.ceil(needed))}s or "
                "more (or smaller data)"
            )
        _, plan = plan_search(
            search_cfg,
            seconds,
            t,
            final_length=cfg.final_length,
            **pricing,
            after_final=True,
        )
        plan["references_seconds_estimate"] = round(references, 1)
        if "full_final_stage_needs_seconds" in plan:  # as a whole budget, like --time-budget
            plan["full_final_stage_needs_seconds"] = round(
                plan["full_final_stage_needs_seconds"] + spent + references + tail,
                1,
            )
        plan.update(reference_fields)
        write_atomic(file, json.dumps(plan, indent=1))
    if plan.get("reduced"):
        log.warning(
            "time budget %.0f s: the final stage is made cheaper to fit it: %s. A budget of "
            "about %.0f s would keep the configured one (budget_plan.json).",
            float(cfg.time_budget),
            "; ".join(plan["reduced"]),
            plan["full_final_stage_needs_seconds"],
        )
    # the run's (virtual) start on this process's clock: a resumed run's `start` is moved back
    # by the seconds it spent before (sgem.run.budget_clock), so it continues with what is left
    plan["_started"] = start
    plan["_training_ends"] = start + float(cfg.time_budget) - tail
    return apply_plan(search_cfg, plan), plan


__all__ = [
    "COST_RATIO_BOUNDS",
    "FINAL_SHARE",
    "ITERATION_CAP_FACTOR",
    "LEADERBOARD_SAFETY",
    "MIN_STEP_FRACTION",
    "PLAN",
    "REFERENCES_SHARE",
    "apply_plan",
    "deadline",
    "extension_margin",
    "final_pricing",
    "final_stage_ends",
    "final_stage_reserve",
    "final_units",
    "held_out_values",
    "minimum_seconds",
    "moving_deadline",
    "parse_duration",
    "pilot_seconds",
    "plan_final",
    "plan_run",
    "plan_search",
    "replan_final",
    "searched_cost_ratio",
    "seed_rounds_end",
    "tail_seconds",
]
