"""A run's stages between the search and the leaderboard: the final MoE (the final stage),
its reference networks and, under a time budget, its seed rounds; each kept in the run
directory as it ends (`sgem.run.kept_final`), so a resumed run continues after the last one
that finished instead of training the final MoE again."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.task import ClusteredTask
from ..execution.progress import shown
from ..final.protocol import FinalProtocol
from ..final.reference import add_references
from ..final.seed_rounds import add_seed_rounds
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult, drop_empty_experts
from ..methods.sgem import SgemMethod
from ..search.config import SearchConfig
from ..search.sgem import SearchResult
from ..space.arch import CellSpace
from ..train.time_fence import fence_passed
from ..train.trainer import Trainer
from .budget import replan_final, seed_rounds_end
from .budget_clock import BudgetClock
from .kept_final import FINAL_FILE, KeptFinal, final_key, read_final, write_final
from .kept_leaderboard import LEADERBOARD_FILE, forget_leaderboard
from .runconfig import RunConfig
from .rundir import RunDirectory

log = logging.getLogger(__name__)

#: what a budget's plan records in the final stages (kept with the final MoE for result.json)
_PLAN_RECORDS = (
    "final_stage_replanned",
    "leaderboard_networks_seconds",
    "leaderboard_retrains_seconds",
)


@dataclass(frozen=True)
class FinalStages:
    """What the final stages hand to the leaderboard: the final MoE, its protocol, whether
    the budget's fence cut it (then no reference networks nor seed rounds were trained),
    and their seconds."""

    final: MethodResult  # its `search`: the partition and cells it follows
    protocol: FinalProtocol
    final_cut: bool
    timing: dict[str, float]
    key: str  # what the final MoE (and the leaderboard decided on it) are kept for


def run_final_stages(
    method: SgemMethod,
    task: ClusteredTask,
    budget: MethodBudget,
    trainer: Trainer,
    searched: SearchResult,
    *,
    cfg: RunConfig,
    configured: SearchConfig,
    space: CellSpace,
    plan: dict | None,
    references_done: bool,
    rundir: RunDirectory,
    fingerprint: str,
    clock: BudgetClock,
    progress: bool,
    executor: Any = None,
) -> FinalStages:
    """The final MoE of `searched` (trained, or read back where a resumed run kept it), its
    reference networks and seed rounds, each stage timed on `clock` and kept when it ends.
    `configured`: the search config before a budget's plan (what `replan_final` prices)."""
    file, key = rundir.file(FINAL_FILE), final_key(fingerprint, searched)
    kept = read_final(file, key, trainer, searched)
    if kept is None or not _all_done(kept, plan):  # a leaderboard decided on the final MoE
        forget_leaderboard(rundir.file(LEADERBOARD_FILE))  # is void once that MoE changes
    if kept is None:
        if plan is not None:  # the final stage fitted to the time the search left
            method.config, length = replan_final(
                plan, cfg, configured, method.config, task, space, references_done
            )
            budget = budget.replace(final_length=length, final_steps=method.config.final_steps)
        protocol = method.protocol(budget)
        # the final MoE (sgem.final.run_final): the champion cell and the finalists' second
        # look where the protocol asks, then the retrain every method shares; a processes
        # executor's warm workers make the tracking runs and retrain side by side
        t0 = time.perf_counter()
        with shown(progress), clock.timed("final_stage"):  # after the EM bar
            final = method.final(task, budget, trainer, searched, executor=executor)
        assert final.search is not None
        final_cut = fence_passed()  # the budget's fence stopped final trainings
        _, final = drop_empty_experts(final.search, final)
        seconds = {"final_stage": time.perf_counter() - t0}
        kept = KeptFinal(final, protocol, ("final_stage",), final_cut, seconds)
        _keep(file, key, kept, plan)
    else:
        log.info("the final MoE kept after its %s is read back", kept.done[-1].replace("_", " "))
        if plan is not None:
            plan.update(kept.plan_records)
    final, protocol = kept.final, kept.protocol
    if "references" not in kept.done:
        t_ref = time.perf_counter()
        with shown(progress), clock.timed("references"):  # warm starts scored theirs
            if not kept.final_cut:  # else no time is left to train them
                assert final.report is not None and final.search is not None
                add_references(
                    final.report,
                    task,
                    trainer,
                    final.search,
                    int(final.seed),
                    steps=protocol.final_steps,
                    epochs=protocol.final_epochs,
                    length=protocol.length_name,
                    crps_samples=protocol.crps_samples,
                    executor=executor,
                )
        kept.seconds["references"] = time.perf_counter() - t_ref
        kept.done += ("references",)
        _keep(file, key, kept, plan)
    if plan is not None and not kept.final_cut and "seed_rounds" not in kept.done:
        t_rounds = time.perf_counter()  # the final stage's time left: more seeds
        with shown(progress), clock.timed("seed_rounds"):
            until = seed_rounds_end(plan, task, trainer, final, protocol, references_done)
            add_seed_rounds(task, trainer, final, until=until, executor=executor)
        kept.seconds["seed_rounds"] = time.perf_counter() - t_rounds
        kept.done += ("seed_rounds",)
        _keep(file, key, kept, plan)
    return FinalStages(final, protocol, kept.final_cut, _timing(kept), key)


def _all_done(kept: KeptFinal, plan: dict | None) -> bool:
    """Whether `kept` holds every final stage this run has: the references, and under a
    budget's plan the seed rounds, unless the fence cut the final stage."""
    rounds = plan is None or kept.final_cut or "seed_rounds" in kept.done
    return "references" in kept.done and rounds


def _keep(file: Path, key: str, kept: KeptFinal, plan: dict | None) -> None:
    """Write `kept` with what the plan recorded so far; a failure to write is a warning (a
    resume then trains the final MoE again)."""
    if plan is not None:
        kept.plan_records = {k: plan[k] for k in _PLAN_RECORDS if k in plan}
    try:
        write_final(file, key, kept)
    except Exception as err:  # keeping is for a resume: the run goes on without it
        log.warning("the final MoE could not be kept for a resume (%s)", err)


def _timing(kept: KeptFinal) -> dict[str, float]:
    """result.json's seconds of the final stages: the retrain (the final stage and its seed
    rounds, less the second look's own), the second look and the reference networks."""
    s = kept.seconds
    search = kept.final.search
    check = ((search.selection if search else None) or {}).get("final_check", {})
    check_seconds = float(check.get("seconds", 0.0))
    out = {"final_retrain": s["final_stage"] + s.get("seed_rounds", 0.0) - check_seconds}
    if s.get("references", 0.0) > 0.01:
        out["reference_networks"] = s["references"]
    if check_seconds:
        out["final_check"] = check_seconds
    return out


__all__ = ["FinalStages", "run_final_stages"]
