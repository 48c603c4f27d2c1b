"""A run's last stages, after the search and the final MoE: the leaderboard and the model
it saves, the calibration, the searched MoE's holdout scores, the saved model, the figures
and result.json (written last: it marks the run complete, so a kill before it resumes)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ..data.task import ClusteredTask
from ..final.calibration import calibrate_final, target_units
from ..final.protocol import FinalProtocol
from ..leaderboard import compete
from ..methods.result import MethodResult
from ..moe.artifact import save_final_moe
from ..search.config import SearchConfig
from ..search.sgem import SearchResult
from ..space.arch import CellSpace
from ..train.trainer import Trainer
from .budget_clock import BudgetClock
from .kept_leaderboard import LEADERBOARD_FILE, read_leaderboard, write_leaderboard
from .run_result import (
    MODEL_DIR,
    choice_rows,
    model_info,
    result_json,
    shipped_metrics,
    why_it_ended,
)
from .runconfig import RunConfig
from .rundir import RunDirectory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Searched:
    """What the search and the final stage hand on (`sgem.run.pipeline`): the partition and
    cells of the final model (`found`), the final MoE, the protocol it was trained with, the
    references fitted before the search (`early_refs`) and the seconds so far (`timing`)."""

    task: ClusteredTask
    trainer: Trainer
    found: SearchResult
    final: MethodResult
    protocol: FinalProtocol
    seed: int
    early_refs: Any
    timing: dict
    space: CellSpace
    planned: SearchConfig  # the search config the run ran (a budget's plan may change it)
    key: str = ""  # what the final MoE and its leaderboard are kept for (`sgem.run.kept_final`)


def finish_run(
    cfg: RunConfig,
    rundir: RunDirectory,
    clock: BudgetClock,
    searched: Searched,
    plan: dict | None,
    final_cut: bool,
    resume: bool,
    executor_kind: str,
) -> dict:
    """The leaderboard, calibration, scores, saved model, figures and result.json of a run
    whose search and final stage are done (`final_cut`: the budget's fence stopped final
    trainings, so the reference networks were skipped), each stage timed on `clock`."""
    task, trainer, found, final = searched.task, searched.trainer, searched.found, searched.final
    protocol, seed, early_refs = searched.protocol, searched.seed, searched.early_refs
    timing, space = dict(searched.timing), searched.space
    length = protocol.length_name
    kept = rundir.file(LEADERBOARD_FILE)  # a resumed run's, where it had decided it
    contest = read_leaderboard(kept, searched.key, trainer, final)
    if contest is None:
        with clock.timed("leaderboard"):  # the references; the saved model (selective routing)
            contest = compete(
                task,
                trainer,
                final,
                seed,
                steps=protocol.final_steps,
                length=length,
                epochs=protocol.final_epochs,
                crps_samples=protocol.crps_samples,
                refs=early_refs,
                combination=cfg.combine,
                forecast_budget=cfg.forecast_allowance,
            )
        write_leaderboard(kept, searched.key, contest, final)
    shipped = contest.final
    with clock.timed("calibration"):  # on out-of-sample validation predictions
        calibration = calibrate_final(
            task,
            trainer,
            shipped,
            seed,
            length=length,
            epochs=protocol.final_epochs,
            validation=contest.validation,
        )
    timing["calibration"] = calibration.seconds
    t0 = time.perf_counter()
    with clock.timed("scoring"):  # the searched MoE's holdout scores for result.json
        holdout_nll = choice_rows(task, final)  # per row, what a choice of K compares
        elapsed = time.perf_counter() - clock.started
        result = result_json(task, found, final, seed, elapsed, holdout_nll)
    result |= calibration.result_fields()
    if shipped is not final:  # result.json's scores stay the searched MoE's (the card: saved)
        result |= target_units(task, final)
    contest.report["stage_seconds"] = clock.report()["stage_seconds"]
    if target := task.meta.get("target_standardisation"):  # the board's RMSE / CRPS in units
        contest.report["target_std"] = float(target["std"])
    result["leaderboard"] = contest.report
    result["resumed"] = resume
    result["executor"] = executor_kind
    if plan is not None:
        result["time_budget"] = {k: v for k, v in plan.items() if not k.startswith("_")}
        result["time_budget"]["stopped_early"] = "stopped_at_deadline_after_iteration" in (
            found.selection or {}
        )
        result["time_budget"]["final_stage_cut_at_fence"] = final_cut
        result["time_budget"]["references_skipped"] = final_cut  # no time to train them
    with clock.timed("saving"):
        save_final_moe(
            rundir.file(MODEL_DIR),
            task,
            space,
            shipped.moe,
            trainer.n_out,
            metrics=shipped_metrics(result, shipped, task, contest.combination),
            members=contest.combination[2] if contest.combination else None,
            info=model_info(cfg, task, result, calibration.state, contest),
        )
    result["model"] = MODEL_DIR
    from ..report.figures import draw_run_figures  # matplotlib only once a run has finished

    # result.json is written once, last: it marks the run complete (a kill here resumes)
    with clock.timed("figures"):
        try:
            draw_run_figures(
                rundir,
                task,
                found,
                seed,
                images=cfg.task["name"] == "images",
                fallback=contest.report.get("fallback_clusters"),
            )
        except Exception as exc:  # figures are a report: the model is saved
            log.warning("the run's figures could not be drawn: %s", exc)
            result["figures_error"] = f"{type(exc).__name__}: {exc}"
    # where the time went (exclusive seconds per phase): written last, so figures count too
    timing["reporting"] = time.perf_counter() - t0
    result["timing"] = {k: round(v, 3) for k, v in timing.items()}
    result["wall_seconds"] = round(clock.elapsed(), 3)
    result["clock"] = clock.report()
    if plan is not None:
        result["time_budget"]["why_it_ended"] = why_it_ended(result, clock, searched.planned)
    rundir.write_result(result, holdout_nll)
    return result


__all__ = ["Searched", "finish_run"]
