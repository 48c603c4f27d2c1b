"""The arithmetic of a time budget: how many candidate trainings the final stage and the
search cost, and the cheaper search (and, where it does not fit, the cheaper final stage)
that fits a number of seconds. Pure functions of a `SearchConfig` and a pilot's seconds per
candidate training (`sgem.run.budget` measures those and applies the plan to a run).

The final stage is priced first (`final_units`): with validation-chosen lengths, warm starts
and a champion cell (the forecasting presets) it costs tens of candidate trainings, more
than a short budget holds. When it would take more than `FINAL_SHARE` of the budget it is
made cheaper step by step (`plan_final`) and the plan says what was given up (`reduced`),
so a budget is a budget rather than a wish.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..final.protocol import FinalProtocol
from ..search.config import SearchConfig

#: the shortest candidate training a tight budget may plan, as a fraction of the configured
#: steps (below it candidates are too short to rank architectures at all); the same floor
#: for the final experts' steps
MIN_STEP_FRACTION = 0.2
#: the largest share of the budget the planned final stage may take
FINAL_SHARE = 0.5
#: a budgeted search runs on past the EM iterations its pilot planned, while its deadline
#: allows, up to this many times the configured count (5-minute fits on the M3 files ended
#: after 156-233 s: the planned iterations ran faster than the pilot said)
ITERATION_CAP_FACTOR = 2


def _protocol(cfg: SearchConfig, final_length: str | FinalProtocol) -> FinalProtocol:
    """The final protocol being priced: `final_length` (a config name or a protocol) with
    `cfg`'s steps and champion cells. Pricing reads the length rule from it; the sizes
    (experts, steps, champion cells) from `cfg`, which `plan_final` keeps in step with it."""
    if isinstance(final_length, FinalProtocol):
        return final_length
    return FinalProtocol.from_name(
        final_length, max(1, cfg.final_steps), champion_cells=cfg.champion_cells
    )


def minimum_seconds(cfg: SearchConfig, candidate_seconds: float, data_ratio: float) -> float:
    """The smallest budget worth searching with: the minimal initial design, one
    iteration and the tightest finalisation at the shortest candidate training, plus the
    cheapest final stage (fixed length at the shortest final training) and the tail."""
    k = cfg.n_experts
    search = (2 * k + 2) + k * (cfg.acquisitions_per_expert + 1) + 2 + 4 * k
    cheapest = dataclasses.replace(
        cfg, final_steps=max(1, int(cfg.final_steps * MIN_STEP_FRACTION)), champion_cells=0
    )
    final = final_units(cheapest, "fixed", data_ratio)
    return (search * MIN_STEP_FRACTION + final) * candidate_seconds


def final_units(
    cfg: SearchConfig,
    final_length: str | FinalProtocol,
    data_ratio: float,
    retrain_units: float | None = None,
    references: bool = False,
) -> float:
    """The final stage's cost in candidate trainings on every cluster (the pilot's unit).

    `data_ratio`: (train + validation) / train samples; `retrain_units`: the fixed retrain of
    every expert when it is set in epochs (else from `final_steps`); `references`: one
    network of each expert's cell is also trained on every cluster with the final protocol
    (`sgem.final.reference`: tables without warm starts)."""
    from ..final.length import PLANNING_FACTOR, TRACKING_FACTOR  # torch: only when planning

    protocol = _protocol(cfg, final_length)

    k = cfg.n_experts
    per_network = cfg.final_steps / cfg.train.steps  # a final network, in candidate trainings
    retrain = retrain_units if retrain_units is not None else k * per_network
    if retrain_units is None:
        retrain *= max(1.0, data_ratio / k)
    warm = protocol.warm_start
    # a validation-chosen network: its tracking run, and the refit unless it is kept as is
    chosen = PLANNING_FACTOR if protocol.refit else TRACKING_FACTOR
    # a reference network sees every cluster: k of them cost k retrains of all the data
    reference = 0.0
    if references and not warm:
        every = retrain_units if retrain_units is not None else per_network * data_ratio
        reference = k * every * (chosen if protocol.tracked else 1.0)
    if not protocol.tracked:
        return retrain + reference
    champion = warm and cfg.champion_cells > 0
    # tracking runs beyond one per expert: the second look's (partition, cell) pairs, and
    # the champion beside each expert's own cell
    extra = max(cfg.final_check_partitions * cfg.final_check_archs - 1, 0) + int(champion)
    units = retrain * (chosen + TRACKING_FACTOR * extra)
    if warm:  # a global network per cell (each expert's and the champion), tracked + refit
        units += (k + int(champion)) * chosen * per_network
    if champion:  # its random cells, each trained on every cluster like a candidate
        units += cfg.champion_cells
    return units + reference


def plan_final(
    cfg: SearchConfig,
    final_length: str | FinalProtocol,
    seconds: float,
    candidate_seconds: float,
    data_ratio: float,
    retrain_units: float | None = None,
    references: bool = False,
) -> tuple[SearchConfig, FinalProtocol, list[str], float]:
    """The final stage made cheap enough for `FINAL_SHARE` of `seconds`: (config, final
    protocol, what was given up, its cost in candidate trainings). Steps, cheapest loss
    first: no champion cell, no refit of warm-started networks, experts trained from scratch, a
    fixed length, fewer steps."""
    t = max(candidate_seconds, 1e-4)
    allowed = FINAL_SHARE * seconds / t
    reduced: list[str] = []
    protocol = _protocol(cfg, final_length)

    def cost() -> float:
        return final_units(cfg, protocol, data_ratio, retrain_units, references)

    if cost() > allowed and protocol.warm_start and cfg.champion_cells > 0:
        cfg = dataclasses.replace(cfg, champion_cells=0)
        protocol = protocol.replace(champion_cells=0)
        reduced.append("no champion cell (search.champion_cells: 0)")
    if cost() > allowed and protocol.warm_start and protocol.refit:
        # warm experts kept at their validation-chosen length: a third cheaper, and no
        # worse (tracked vs refitted final MoE, ts-offline seeds 0-4: tracked better on 4),
        # while experts from scratch lose the global network's start (a 3-minute tourism fit
        # without it: validation NLL 0.313 for the MoE against 0.161 for one global network)
        protocol = protocol.replace(refit=False, twins=False)
        reduced.append(
            "final networks kept at their validation-chosen length, not refitted on train + "
            f"validation (final_length: {protocol.length_name})"
        )
    if cost() > allowed and protocol.warm_start:
        protocol = protocol.replace(warm_start=False)
        reduced.append(f"final experts trained from scratch (final_length: {protocol.length_name})")
    if cost() > allowed and protocol.tracked:
        protocol = protocol.replace(length="fixed", refit=True, twins=False)
        reduced.append(f"a fixed final length of {cfg.final_steps} steps (final_length: fixed)")
    if cost() > allowed and retrain_units is None:
        fraction = max(MIN_STEP_FRACTION, allowed / cost())
        steps = max(1, int(cfg.final_steps * fraction))
        cfg = dataclasses.replace(cfg, final_steps=steps)
        protocol = protocol.replace(final_steps=steps)
        reduced.append(f"final experts trained {steps} steps (search.final_steps)")
    return cfg, protocol, reduced, cost()


def plan_search(
    cfg: SearchConfig,
    seconds: float,
    candidate_seconds: float,
    final_length: str = "fixed",
    data_ratio: float = 1.0,
    retrain_units: float | None = None,
    references: bool = False,
    after_final: bool = False,
) -> tuple[SearchConfig, dict]:
    """A cheaper `cfg` whose trainings fit `seconds`, and the plan's numbers: the final
    stage first (`plan_final`), then the search in the time it leaves. The plan holds
    `final_length` and `reduced` when the final stage had to be made cheaper.
    `after_final`: the final stage also retrains each expert on the training split alone
    (`sgem.final.calibration`; free when the final networks are kept unrefitted or
    their length is chosen on validation) and
    the leaderboard trains two global networks twice (`sgem.leaderboard`)."""
    full_units = final_units(cfg, final_length, data_ratio, retrain_units, references)
    configured = cfg
    cfg, protocol, reduced, units = plan_final(
        cfg, final_length, seconds, candidate_seconds, data_ratio, retrain_units, references
    )
    k = cfg.n_experts
    t = max(candidate_seconds, 1e-4)
    rule_refits = protocol.refit
    after_units = 0.0
    per_network = cfg.final_steps / cfg.train.steps
    # calibration: a train-only network per expert, unless its tracking run's validation
    # outputs serve (a validation-chosen length, `sgem.final.calibration`)
    if after_final and rule_refits and not protocol.tracked:
        after_units = k * per_network
    if after_final:  # the leaderboard's global networks: train-only, then train + validation
        every = retrain_units if retrain_units is not None else per_network * data_ratio
        after_units += 2 * min(k, 2) * every
    units += after_units
    final_cost = units * t
    search_seconds = max(0.0, seconds - final_cost)
    affordable = 0.5 * search_seconds / t  # half the time for surrogate, routing, overhead
    per_iteration = k * (cfg.acquisitions_per_expert + 1) + 2
    finalisation = _finalisation(k, cfg.final_candidates, cfg.finalist_budget, cfg.refit_budget)
    n_init = int(np.clip(affordable * 0.25, 2 * k + 2, cfg.n_init))
    iterations = int((affordable - n_init - finalisation) // per_iteration)
    changes: dict = {"n_init": n_init}
    changes.update(
        {
            key: getattr(cfg, key)
            for key in ("champion_cells", "final_steps")
            if getattr(cfg, key) != getattr(configured, key)
        }
    )
    if iterations < 2:  # tight: spend on iterations, not on the final polish
        changes.update(final_candidates=1, finalist_budget=1, refit_budget=min(2, cfg.refit_budget))
        finalisation = _finalisation(k, 1, 1, changes["refit_budget"])
        iterations = int((affordable - n_init - finalisation) // per_iteration)
    changes["n_iterations"] = int(np.clip(iterations, 1, cfg.n_iterations))
    needed = n_init + changes["n_iterations"] * per_iteration + finalisation
    fraction = 1.0
    if affordable < needed:  # even the smallest search does not fit: train candidates shorter
        fraction = max(MIN_STEP_FRACTION, affordable / needed)
        changes["train_steps"] = max(1, int(cfg.train.steps * fraction))
    planned = _apply(cfg, changes)
    plan = {
        "budget_seconds": round(seconds, 1),
        "candidate_seconds": round(candidate_seconds, 4),
        "final_retrain_seconds_estimate": round(final_cost, 1),
        "after_final_seconds_estimate": round(after_units * t, 1),
        # (a quarter more trainings than counted: champions join the finalists' slots)
        "finalisation_seconds_estimate": round(1.25 * finalisation * fraction * t, 1),
        "affordable_trainings": int(affordable),
        **changes,
        "iteration_cap": ITERATION_CAP_FACTOR * configured.n_iterations,
    }
    if reduced:
        plan["final_length"] = protocol.length_name
        plan["reduced"] = reduced
        # a budget that would have kept the configured final stage (and a minimal search)
        plan["full_final_stage_needs_seconds"] = round(full_units * t / FINAL_SHARE, 1)
    return planned, plan


def _finalisation(k: int, finalists: int, per_region: int, refits: int) -> int:
    """The finalisation's trainings (`sgem.search.selection.finalise`): each finalist and
    the centroids' k-means split measured on its k regions with `per_region` + 1 cells,
    then `refits` cells per expert on the returned partition. (Priced at 8 trainings, a
    5-minute M3 fit's 49 ran 60 s past the search's deadline and cut the final stage.)"""
    return (finalists + 1) * k * (per_region + 1) + k * refits


def _apply(cfg: SearchConfig, changes: dict) -> SearchConfig:
    """`cfg` with a plan's changes (`train_steps` goes to the candidates' TrainConfig)."""
    changes = dict(changes)
    steps = changes.pop("train_steps", None)
    planned = dataclasses.replace(cfg, **changes)
    if steps is not None:
        planned = dataclasses.replace(planned, train=dataclasses.replace(cfg.train, steps=steps))
    return planned


PLAN_KEYS = (
    "n_init",
    "n_iterations",
    "final_candidates",
    "finalist_budget",
    "refit_budget",
    "champion_cells",
    "final_steps",
)


def apply_plan(cfg: SearchConfig, plan: dict) -> SearchConfig:
    """The search config a saved plan (budget_plan.json) describes."""
    return _apply(cfg, {k: plan[k] for k in (*PLAN_KEYS, "train_steps") if k in plan})


def left_for_final(seconds: float) -> str:
    """What the search left the final stage, in words: a search cut at its deadline can end
    past its share (its last training finishes), which read as "the -14 s the search left"."""
    if seconds >= 0:
        return f"the {seconds:.0f} s the search left"
    return f"no time: the search ran {-seconds:.0f} s into the final stage's share"


__all__ = [
    "FINAL_SHARE",
    "ITERATION_CAP_FACTOR",
    "MIN_STEP_FRACTION",
    "PLAN_KEYS",
    "apply_plan",
    "final_units",
    "left_for_final",
    "minimum_seconds",
    "plan_final",
    "plan_search",
]
