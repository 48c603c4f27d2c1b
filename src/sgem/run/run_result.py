"""What a finished run reports: result.json's content, the model's metrics, the summary.

Kept apart from `sgem.run.pipeline` (which runs the stages) so that what a run *says* about
itself has one home: the keys of result.json, the metrics a saved model carries, the
lines `sgem fit` / `sgem run` print, and the sentence on how a budget was used.
"""

from __future__ import annotations

import numpy as np

from ..data.task import ClusteredTask
from ..methods.result import MethodResult
from ..moe.scoring import choice_nll, without_moe_densities
from ..search.sgem import SearchResult
from .budget_arithmetic import left_for_final
from .budget_clock import BudgetClock
from .rundir import versions


def why_it_ended(result: dict, clock: BudgetClock, planned) -> str:
    """One sentence on how a budgeted fit used its budget (a user asks when it returns
    well before the budget, or exactly at it), and what the final stage's time left went
    to (`sgem.final.seed_rounds`). `planned`: the search config the budget plan ran."""
    return _how_it_ended(result, clock, planned) + _seeded(result.get("seed_rounds"))


def _seeded(rounds: dict | None) -> str:
    if not rounds:
        return ""
    if rounds["rounds"]:
        return (
            f"; then {rounds['rounds']} round{'s' * (rounds['rounds'] != 1)} of more seeds of "
            f"every final expert used {rounds['seconds']:.0f} s the final stage left"
        )
    return f"; no round of more seeds of the final experts: {rounds['stopped']}"


def _how_it_ended(result: dict, clock: BudgetClock, planned) -> str:
    budget = float(clock.budget or 0.0)
    wall = clock.elapsed()
    plan = result["time_budget"]
    if plan.get("stopped_early") and wall < 0.8 * budget:
        return (
            f"the search stopped at its deadline to leave the final stage its reserve, and the "
            f"final stage took less than reserved ({wall:.0f} s of {budget:.0f} s)"
        )
    if plan.get("stopped_early"):
        return "the budget ran out: the search stopped at its deadline before its last iteration"
    if plan.get("final_stage_cut_at_fence"):
        return "the budget ran out during the final stage: some final trainings were cut short"
    if wall < 0.8 * budget:
        ran = (result.get("selection") or {}).get("iterations_run", planned.n_iterations)
        cap = max(plan.get("iteration_cap") or planned.n_iterations, planned.n_iterations)
        allowed = ("twice " if plan.get("iteration_cap") else "") + "search.n_iterations"
        if ran < cap:
            return (
                f"done early ({wall:.0f} s of {budget:.0f} s): the search ran {ran} EM "
                f"iteration{'s' * (ran != 1)} up to its deadline, which kept the time a pilot "
                f"training predicted for the final stage{_priced(plan)}, and the final "
                f"stage{_replanned(plan)} took less"
            )
        return (
            f"done early ({wall:.0f} s of {budget:.0f} s): the search ran all {ran} EM "
            f"iterations a budget allows ({allowed}, --config) and the final stage "
            "finished; more iterations would use the rest"
        )
    return f"the planned search and final stage finished within the budget ({wall:.0f} s)"


def _priced(plan: dict) -> str:
    """The searched cells' measured cost the reserve was priced at (`searched_cost_ratio`)."""
    ratio = plan.get("searched_cost_ratio")
    return "" if ratio is None or ratio >= 1.0 else f" (x{ratio:.2f}: what the searched cells cost)"


def _replanned(plan: dict) -> str:
    """How the final stage was planned again when the search ended (`replan_final`)."""
    again = plan.get("final_stage_replanned")
    if not again:
        return ""
    return f" (planned for the {again['seconds_left']:.0f} s left: {again['final_length']})"


def choice_rows(task: ClusteredTask, final: MethodResult) -> np.ndarray | None:
    """The final MoE's per-row holdout NLL that Ks are compared on (`choice_nll`)."""
    out = final.outputs()
    return None if out is None else choice_nll(out, np.asarray(task.test.y), task.loss)


def result_json(
    task: ClusteredTask,
    found: SearchResult,
    final: MethodResult,
    seed: int,
    seconds: float,
    holdout_nll: np.ndarray | None,
) -> dict:
    """result.json's content: the search, the final stage and every metric of the final
    MoE's row (`MethodResult.row`, the one row of every method); `holdout_nll`: its
    `choice_rows`, whose mean is the `choice_nll` Ks are compared on."""
    assert final.report is not None, "result.json describes a final MoE"
    moe = final.report.to_json()
    row = final.row(task)
    return (
        {
            "task": task.name,
            "seed": seed,
            "routing": found.assignment.tolist(),
            "architectures": [a.to_json() for a in found.architectures],
            "architecture_keys": [a.key for a in found.architectures],
            "oracle_partition": None
            if task.oracle_partition is None
            else task.oracle_partition.tolist(),
            "oracle_match": found.oracle_match,
            "region_val_losses": found.region_val_losses,
            "selection": found.selection,
            "test_accuracy": row["test_accuracy"],
            "test_nll": row["test_nll"],
            # what Ks are compared on (`sgem.run.experts_choice`): the holdout NLL with a
            # classifier's probabilities floored (per row: `RunDirectory.holdout_nll`)
            "choice_nll": None if holdout_nll is None else float(holdout_nll.mean()),
            "per_expert_test_accuracy": row["per_expert_test_accuracy"],
            "n_trained": found.n_trained,
            # optimiser steps each final expert trained for; with final_length "validation"
            # also how each was chosen (best step, tracking curve)
            "final_steps": moe.get("steps"),
            # experts whose training the budget's fence cut short: steps made of those asked
            "final_training_cut": moe.get("final_training_cut"),
            "final_length": moe.get("final_length"),
            # with warm starts: each cell's global network (its tracking run)
            "global_networks": moe.get("global_networks"),
            # with warm starts: each cell's global network alone on the same test samples
            "global_networks_test": moe.get("global_networks_test"),
            # under a time budget: the seeds added to every final expert with the time left
            "seed_rounds": moe.get("seed_rounds"),
            "failed_trainings": found.failures,
            "search_seconds": round(found.seconds, 3),
            "wall_seconds": round(seconds, 3),
            "mean_cluster_purity": task.meta.get("mean_purity"),
            # series from a user's file: how many were filled, padded, trained, left out
            "series_report": task.meta.get("series_report"),
            "cluster_sizes": task.cluster_sizes.tolist(),
            "versions": versions(),
        }
        | (_forecast_json(task, moe, row) if task.loss == "student_t" else {})
        | _target_units(task, moe)
    )


def _target_units(task: ClusteredTask, moe: dict) -> dict:
    """Regression on a table: RMSE and CRPS back in the target's own units."""
    target = task.meta.get("target_standardisation")
    if not target or moe.get("test_rmse") is None:
        return {}
    return {
        "test_rmse": moe["test_rmse"] * target["std"],
        "test_crps_target_units": moe["test_crps"] * target["std"],
    }


#: the row's metrics of Student-t outputs that result.json carries besides NLL and CRPS: the
#: raw 80 % interval's coverage; for windowed series MASE (the data's seasons) and wQL
_SERIES_METRICS = (
    "test_coverage_80",
    "test_mase",
    "test_wql",
    "per_domain_test_mase",
    "per_domain_test_wql",
    "mase_seasons",
)


def _forecast_json(task: ClusteredTask, moe: dict, row: dict) -> dict:
    """The forecasting scores (student_t tasks only, so other result.json stay as they were)."""
    return {
        "test_crps": row["test_crps"],
        "test_crps_closed_form": row["test_crps_closed_form"],
        "per_domain_test_nll": row["per_domain_test_nll"],
        "final_steps_per_expert": moe["steps"],
        "domain_names": task.meta.get("domain_names"),
        "n_clusters": task.n_clusters,
        "n_windows": {s: len(getattr(task, s)) for s in ("train", "val", "test")},
    } | {k: row[k] for k in _SERIES_METRICS if row.get(k) is not None}


MODEL_DIR = "model"
_METRICS = (
    "test_accuracy",
    "test_nll",
    "per_expert_test_accuracy",
    "test_crps",
    "test_crps_closed_form",
    "per_domain_test_nll",
)


def model_info(cfg, task: ClusteredTask, result: dict, calibration: dict, contest) -> dict:
    """What a saved model's model.json carries besides its metrics: how to read inputs
    (encoding, target scaling, series columns), its calibration, its leaderboard and
    combination (`sgem.moe.artifact.save_final_moe`'s `info`)."""
    return {
        "seed": cfg.seed,
        "method": "sgem",
        "crps_samples": cfg.crps_samples,
        "torch_threads": cfg.torch_threads,
        "encoding": task.meta.get("encoding"),
        "target_standardisation": task.meta.get("target_standardisation"),
        "target": task.meta.get("target"),
        "freq": task.meta.get("freq"),
        "series_columns": task.meta.get("series_columns"),
        # one network of each expert's cell on all clusters, same test samples
        "reference_networks_test": result.get("global_networks_test"),
        "calibration": calibration,
        "leaderboard": contest.report,
        "combination": contest.combination[1] if contest.combination else None,
    }


def model_metrics(result: dict) -> dict:
    """The test metrics a saved model carries (and `SgemModel.evaluate` reproduces)."""
    return {k: result[k] for k in _METRICS if k in result}


def shipped_metrics(result: dict, shipped, task: ClusteredTask, combination=None) -> dict:
    """The metrics the saved model carries (and `SgemModel.evaluate` reproduces, but for
    a table's scikit-learn members saved refitted on the holdout too): the searched MoE's
    (result.json's) unless the leaderboard saved another routing, and a saved
    combination's own holdout scores (`combination[3]`, of its members without the
    holdout) over those."""
    metrics = _routing_metrics(model_metrics(result), result, shipped, task)
    if combination is None:
        return metrics
    return without_moe_densities(metrics | combination[3], combination[3])


def _routing_metrics(metrics: dict, result: dict, shipped, task: ClusteredTask) -> dict:
    if not (result.get("leaderboard") or {}).get("fallback_clusters"):
        return metrics
    scores = shipped.report.to_json()
    names = task.meta.get("domain_names")
    per_domain = {
        (names[int(d)] if names else d): v for d, v in scores["per_domain_test_nll"].items()
    }
    for key in _METRICS:
        if key in metrics and key in scores:
            metrics[key] = per_domain if key == "per_domain_test_nll" else scores[key]
    return metrics


def summarise(result: dict) -> str:
    archs = result["architecture_keys"]
    lines = [
        f"task {result['task']}  seed {result['seed']}",
        f"  routing (expert per cluster): {result['routing']}",
    ]
    if result.get("oracle_match") is not None:
        lines.append(f"  oracle match: {result['oracle_match']:.2f}")
    for k, key in enumerate(archs):
        n = int(np.sum(np.asarray(result["routing"]) == k))
        lines.append(f"  expert {k}: {n} clusters, cell {key}")
    if result.get("test_accuracy") is not None:
        lines.append(f"  MoE test accuracy: {result['test_accuracy']:.4f}")
    lines.append(f"  MoE test NLL: {result['test_nll']:.4f}")
    if result.get("test_crps") is not None:
        lines.append(f"  MoE test CRPS: {result['test_crps']:.4f} (sample-based)")
    for key, scores in (result.get("global_networks_test") or {}).items():
        acc = scores.get("test_accuracy")
        lines.append(
            f"  reference, one global network of cell {key} (no experts): test NLL "
            f"{scores['test_nll']:.4f}" + (f", accuracy {acc:.4f}" if acc is not None else "")
        )
    lines.append(
        f"  trained candidates: {result['n_trained']}, wall clock: {result['wall_seconds']:.1f} s"
    )
    if result.get("leaderboard"):
        from ..leaderboard import leaderboard_lines

        lines.extend("  " + line for line in leaderboard_lines(result["leaderboard"]))
    report = result.get("series_report") or {}
    if report:  # lists (names) are shown as counts
        said = {k: len(v) if isinstance(v, list) else v for k, v in report.items()}
        lines.append(
            "  series: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in said.items())
        )
    budget = result.get("time_budget") or {}
    if budget.get("why_it_ended"):
        lines.append(f"  time budget: {budget['why_it_ended']}")
    again = budget.get("final_stage_replanned") or {}
    if again and again["reduced"] != budget.get("reduced", []):  # the search left more or less
        had = budget.get("final_length", "the configured one")
        lines.append(
            f"  final stage: {again['final_length']} (planned again for "
            f"{left_for_final(again['seconds_left'])}; the plan had {had})"
        )
    timing = result.get("timing") or {}
    if timing:  # the three largest phases say where the time went
        top = sorted(timing.items(), key=lambda kv: -kv[1])[:3]
        lines.append("  time: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} s" for k, v in top))
    return "\n".join(lines)


__all__ = [
    "MODEL_DIR",
    "model_metrics",
    "result_json",
    "shipped_metrics",
    "summarise",
    "why_it_ended",
]
