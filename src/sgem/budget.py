"""Fit the search to a wall-clock budget (`--time-budget 10m`).

The search's cost is mostly candidate trainings, and their count is set by the config
(initial design, iterations, finalists, refit). A pilot times one candidate training on all
clusters; the plan then keeps as many EM iterations (and as large an initial design) as the
budget affords after reserving the final retrain, assuming the surrogate, routing and
bookkeeping cost as much again as the trainings. When even the smallest search (the
minimal initial design, one iteration, the smallest finalisation) does not fit, candidates
are trained for fewer steps (down to `MIN_STEP_FRACTION`). The search additionally stops
at the deadline (see `SGEM.fit(deadline=...)`), so a mis-estimate costs quality, never the model.
"""

from __future__ import annotations

import dataclasses
import re
import time

import numpy as np

from .data.task import ClusteredTask
from .errors import SgemUserError
from .random_streams import Stream, stream_rng
from .search.config import SearchConfig

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: the shortest candidate training a tight budget may plan, as a fraction of the configured
#: steps (below it candidates are too short to rank architectures at all)
MIN_STEP_FRACTION = 0.2


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


def pilot_seconds(task: ClusteredTask, trainer, space, seed: int, repeats: int = 3) -> float:
    """Wall clock of training one random candidate on every cluster: the fastest of a few
    (the first pays torch's one-time start-up, which later trainings do not)."""
    rng = stream_rng(seed, Stream.BUDGET_PILOT)
    times = []
    for _ in range(repeats):
        arch = space.sample(rng)
        start = time.perf_counter()
        trainer.train(arch, np.ones(task.n_clusters, dtype=bool), seed=seed)
        times.append(time.perf_counter() - start)
    return float(np.min(times))


def plan_search(
    cfg: SearchConfig, seconds: float, candidate_seconds: float, final_factor: float
) -> tuple[SearchConfig, dict]:
    """A cheaper `cfg` whose trainings fit `seconds`, and the plan's numbers.

    `final_factor`: the final retrain's cost in candidate trainings (steps and data ratio,
    times the experts)."""
    k = cfg.n_experts
    t = max(candidate_seconds, 1e-4)
    final_cost = final_factor * t
    search_seconds = max(0.0, seconds - final_cost)
    affordable = 0.5 * search_seconds / t  # half the time for surrogate, routing, overhead
    per_iteration = k * (cfg.acquisitions_per_expert + 1) + 2
    finalisation = cfg.final_candidates * k * (cfg.finalist_budget + 1) + k * cfg.refit_budget
    n_init = int(np.clip(affordable * 0.25, 2 * k + 2, cfg.n_init))
    iterations = int((affordable - n_init - finalisation) // per_iteration)
    changes: dict = {"n_init": n_init}
    if iterations < 2:  # tight: spend on iterations, not on the final polish
        changes.update(final_candidates=1, finalist_budget=1, refit_budget=min(2, cfg.refit_budget))
        finalisation = k * 2 + k * changes["refit_budget"]
        iterations = int((affordable - n_init - finalisation) // per_iteration)
    changes["n_iterations"] = int(np.clip(iterations, 1, cfg.n_iterations))
    needed = n_init + changes["n_iterations"] * per_iteration + finalisation
    if affordable < needed:  # even the smallest search does not fit: train candidates shorter
        fraction = max(MIN_STEP_FRACTION, affordable / needed)
        changes["train_steps"] = max(1, int(cfg.train.steps * fraction))
    planned = _apply(cfg, changes)
    plan = {
        "budget_seconds": round(seconds, 1),
        "candidate_seconds": round(candidate_seconds, 4),
        "final_retrain_seconds_estimate": round(final_cost, 1),
        "affordable_trainings": int(affordable),
        **changes,
    }
    return planned, plan


def _apply(cfg: SearchConfig, changes: dict) -> SearchConfig:
    """`cfg` with a plan's changes (`train_steps` goes to the candidates' TrainConfig)."""
    changes = dict(changes)
    steps = changes.pop("train_steps", None)
    planned = dataclasses.replace(cfg, **changes)
    if steps is not None:
        planned = dataclasses.replace(planned, train=dataclasses.replace(cfg.train, steps=steps))
    return planned


PLAN_KEYS = ("n_init", "n_iterations", "final_candidates", "finalist_budget", "refit_budget")


def apply_plan(cfg: SearchConfig, plan: dict) -> SearchConfig:
    """The search config a saved plan (budget_plan.json) describes."""
    return _apply(cfg, {k: plan[k] for k in (*PLAN_KEYS, "train_steps") if k in plan})


__all__ = ["apply_plan", "parse_duration", "pilot_seconds", "plan_search"]
