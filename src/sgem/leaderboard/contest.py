"""The end of every fit: the searched MoE against what a user would otherwise pick, and the
model that is saved.

Why: a fit used to ship its MoE even where one network of its own cell was better (the toy,
diabetes). Here every member is scored on validation from fits that never saw it
(`sgem.leaderboard.members`), and the saved model is the MoE with **selective routing**
(`selective_routing`): clusters whose expert is not worth it go to the best global network,
which joins the MoE as one more expert; where every cluster goes there, the saved model is
that network alone. The model format does not change: it is still a cluster-gated MoE.

Scikit-learn models and the classical forecasters are scored, and where a weighted mixture
of them with the MoE is clearly better (`sgem.leaderboard.combining`; a forecaster's always),
the saved model is that combination (`sgem.moe.combination`): scikit-learn members as plain
arrays, AutoETS / AutoTheta by name, refitted on each series at forecast time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from ..data.task import ClusteredTask
from ..final.calibration import retrains, split_outputs, validation_outputs
from ..methods.result import MethodResult
from ..moe.averaged import AveragedExpert
from ..moe.cluster_gated import ClusterGatedMoE, compact_assignment
from ..moe.scoring import method_scores
from ..space.timeseries import TimeSeriesSpace
from ..train.time_fence import fence_passed
from ..train.trainer import Trainer
from .board import (
    greedy_ensemble,
    mixture_nll,
    rows,
    sample_nll,
    scored,
    scores,
)
from .combining import combine_within, entry, fitted_of, test_of, untrained_experts, val_of
from .members import (
    GLOBAL_CELLS,
    GlobalNetwork,
    leaderboard_cells,
    network_out_of_fold,
    reference_budget,
    reference_methods,
)
from .series_members import SUBSET
from .table_members import folded_table

#: the report's word where the run's `combine: false` kept the combination out
COMBINATION_OFF = "off (combine: false, --no-combination): the MoE is saved"
#: a cluster keeps its own expert only where the expert's validation NLL is lower than the
#: global network's by this many standard errors of the paired difference
MARGIN_SE = 2.0


@dataclass
class Contest:
    """`report`: result.json's "leaderboard"; `final`: the `MethodResult` to save (the MoE
    with selective routing); `validation`: its out-of-sample validation outputs and which
    validation samples have one (for the calibration)."""

    report: dict
    final: Any  # a MethodResult (sgem.methods.result)
    validation: tuple[np.ndarray, np.ndarray] | None
    #: a combination to save with the MoE: (Combination, its info state, member arrays)
    combination: tuple | None = None


def compete(
    task: ClusteredTask,
    trainer: Trainer,
    final,
    seed: int,
    *,
    steps: int,
    length: str = "fixed",
    epochs: float | None = None,
    crps_samples: int = 100,
    refs: list[MethodResult] | None = None,
    combination: bool = True,
    forecast_budget: float | None = None,
) -> Contest:
    """Score the searched MoE (`final`, a `MethodResult`) against the global networks of its
    cells and the references of its kind (`refs`: already fitted, e.g. a forecaster's
    classical references, fitted before the search so that the budget never skips them),
    and build the model to save (`combination=False`: never a combination, the run's
    `combine: false`; `forecast_budget`: the seconds its refitted members may take to
    forecast every series, `sgem.leaderboard.forecast_cost`)."""
    start = time.perf_counter()
    budget = reference_budget(
        trainer, seed, steps=steps, epochs=epochs, length=length, crps_samples=crps_samples
    )
    # the tracking runs' validation outputs need no training: the contest runs past the
    # budget's fence on them (the references it cannot fit any more are skipped, each says so)
    trains = retrains(task, final, length)
    cut = trains and fence_passed()
    why = "the time budget ended before the MoE's validation fits"
    if not cut:
        try:
            moe_val, has = validation_outputs(task, trainer, final, seed, length, epochs)
        except ValueError as exc:  # no expert has both training and validation samples
            return Contest({"skipped": str(exc)}, final, None)
        cut = trains and fence_passed()  # its validation fits were cut short: comparing misleads
        why = "the time budget ended during the MoE's validation fits"
    if cut:  # the MoE cannot be compared on validation: the holdout alone
        late = _late_references(task, trainer, budget, refs)
        return _holdout_only(
            task, trainer, final, seed, crps_samples, late, why, start, combination, forecast_budget
        )
    moe_test = split_outputs(final.moe, task.test, trainer.device)
    moe = entry("sgem MoE (searched)", seed, moe_val, moe_test)
    cells = leaderboard_cells(final, task)
    globals_ = [GlobalNetwork(c).fit_evaluate(task, budget) for c in cells]
    if refs is None:
        refs = [m.fit_evaluate(task, budget) for m in reference_methods(trainer.space)]
    members = [moe, *globals_, *refs]
    usable = [g for g in globals_ if g.shippable and g.val_output is not None]
    shipped = final
    fallback: list[int] = []
    evidence: dict = {}
    ship_val, ship_test = moe_val, moe_test
    if usable:
        best = min(usable, key=lambda g: _nll(val_of(g)[has], task, has))
        fallback, evidence = selective_routing(task, final.assignment, moe_val, val_of(best), has)
        if fallback:
            shipped, ship_val, ship_test = _with_fallback(
                task, trainer, final, best, fallback, moe_val, seed, crps_samples
            )
    ship_oof = None  # the saved network alone: weighed on every row, as the members are
    cell = fitted_of(best).cell if usable else None
    if combination and cell and len(fallback) == task.n_clusters and folded_table(task):
        folded = network_out_of_fold(task, budget, cell)
        if folded is not None:  # the fold networks join the saved one (`sgem.moe.averaged`)
            ship_oof, nets = folded
            averaged = AveragedExpert([fitted_of(best).network, *nets], task.loss)
            bagged = replace(best, fitted=replace(fitted_of(best), network=averaged))
            shipped, ship_val, ship_test = _with_fallback(
                task, trainer, final, bagged, fallback, moe_val, seed, crps_samples
            )
    board = rows(task, members, has, seed, crps_samples)
    _on_same_windows(task, board, members, ship_test, seed, crps_samples)
    shipped_member = entry("saved model (selective routing)", seed, ship_val, ship_test)
    board.append(rows(task, [shipped_member], has, seed, crps_samples)[0])
    combined_with, combined, forecast = combine_within(
        task, ship_val, ship_test, refs, has, ship_oof, on=combination,
        allowance=forecast_budget, with_moe=not untrained_experts(final, fallback),
    )  # fmt: skip
    if combined:
        board[-1]["model"] = "selective-routing MoE (before the combination)"
        board.append(combined)
    report: dict[str, Any] = {
        "rule": "validation decides (members fitted on the training split), the holdout "
        "reports (members refitted on train + validation); where the MoE is not clearly "
        "better than the best global network overall (two standard errors), a cluster keeps "
        "its expert only where it is clearly better on the cluster's validation samples; "
        "where the MoE is clearly better, a cluster leaves it only where the network is; a "
        "forecaster's combination, and that of a user's table, is fit on the holdout (the "
        "latest windows / rows which nothing was chosen on) where it has enough of them",
        "rows": board,
        "fallback_clusters": fallback,
        "per_cluster": per_cluster_validation(task, moe_val, val_of(best) if usable else None, has),
        "evidence": evidence,
        "ensemble": _ensemble(task, members, has),
        "seconds": round(time.perf_counter() - start, 3),
        # the seeds a time budget's final stage added to every expert (holdout NLL change)
        "seed_rounds": final.report.seed_rounds if final.report is not None else None,
        "forecast": forecast,  # a forecaster's refits at forecast time: seconds, what was left out
    }
    in_it = {best.method} if fallback else set()  # the fallback network is in the saved model
    report["shipped"] = _shipped_summary(board[-1], board, fallback, task, combined_with, in_it)
    if not combination:
        report["combination"] = COMBINATION_OFF
    return Contest(report, shipped, (ship_val, has), combined_with)


def per_cluster_validation(
    task: ClusteredTask, moe_val: np.ndarray, fallback_val: np.ndarray | None, has: np.ndarray
) -> dict[str, dict]:
    """Each cluster's mean validation NLL of its searched expert and of the fallback (the
    best global network; absent without one), on the validation samples with out-of-sample
    outputs: what `sgem explain` shows beside each routed sample. Reported only; the
    routing decision is `selective_routing`'s."""
    y, cluster = task.val.y[has], task.val.cluster[has]
    nll = {"expert_nll": sample_nll(moe_val[has], y, task.loss)}
    if fallback_val is not None:
        nll["fallback_nll"] = sample_nll(fallback_val[has], y, task.loss)
    out: dict[str, dict] = {}
    for c in range(task.n_clusters):
        sel = cluster == c
        out[str(c)] = {"n": int(sel.sum())} | {
            k: round(float(v[sel].mean()), 5) for k, v in nll.items() if sel.any()
        }
    return out


def _late_references(task, trainer, budget, refs: list[MethodResult] | None):
    """A forecaster's references once the budget's fence has passed: those fitted before the
    search, else seasonal naive (free: it runs past the fence; AutoETS / AutoTheta skip
    themselves), so even a fit whose budget left no room for them is compared with it.
    Other kinds: `refs` (their references train, and the budget has ended)."""
    if refs is not None or not isinstance(trainer.space, TimeSeriesSpace):
        return refs
    return [m.fit_evaluate(task, budget) for m in reference_methods(trainer.space)]


def _holdout_only(
    task,
    trainer,
    final,
    seed,
    crps_samples,
    refs,
    why: str,
    start: float,
    combination: bool,
    forecast_budget: float | None,
):
    """The contest without the MoE's validation outputs (the budget ended before they could
    be trained or while they were): a forecaster is still compared with its classical
    references on the holdout alone, and a user's table with its scikit-learn models
    (fitted before the search), and combined with them there where that gains (the final
    MoE cut short by the budget may be far worse than they are); otherwise the searched
    MoE is saved unchecked."""
    fitted = [r.fitted for r in refs or [] if r.test_output is not None and r.fitted is not None]
    forecasting = any(f.classical is not None for f in fitted)
    table = task.name == "table" and any(f.estimator is not None for f in fitted)
    if not forecasting and not table:
        return Contest({"skipped": f"{why}; the searched MoE is saved"}, final, None)
    has = np.zeros(len(task.val), dtype=bool)
    moe_test = split_outputs(final.moe, task.test, trainer.device)
    members = [entry("sgem MoE (searched)", seed, None, moe_test), *refs]
    board = rows(task, members, has, seed, crps_samples)
    _on_same_windows(task, board, members, moe_test, seed, crps_samples)
    combined_with, combined, forecast = combine_within(
        task, None, moe_test, refs, has, on=combination, allowance=forecast_budget,
        with_moe=not untrained_experts(final),
    )  # fmt: skip
    if combined is not None:
        board.append(combined)
    report: dict[str, Any] = {
        "rule": f"{why}: the MoE and the {'classical' if forecasting else 'scikit-learn'} "
        "references are compared "
        f"{'and combined ' if combination else ''}on the holdout alone",
        "rows": board,
        "fallback_clusters": [],
        "seconds": round(time.perf_counter() - start, 3),
        "forecast": forecast,
    }
    shipped = board[-1] if combined is not None else board[0]
    report["shipped"] = _shipped_summary(shipped, board, [], task, combined_with)
    if not combination:
        report["combination"] = COMBINATION_OFF
    return Contest(report, final, None, combined_with)


def _on_same_windows(task, board: list[dict], members, moe_test, seed: int, crps_samples: int):
    """Beside each member scored on some of the series only (`SUBSET`: the budget ended),
    the MoE's holdout scores on the same windows, so the comparison is paired."""
    for row, m in zip(board, members, strict=True):
        if m.extra.get(SUBSET) and m.test_output is not None:
            on = np.flatnonzero(scored(m.test_output))
            mine = scores(moe_test[on], task.test.subset(on), task, seed, crps_samples)
            row["moe_on_same_windows"] = mine
            if "crps" in mine:
                row["note"] += f"; the MoE's holdout CRPS on the same windows {mine['crps']:.4f}"


def _nll(out: np.ndarray, task: ClusteredTask, has: np.ndarray) -> float:
    return float(sample_nll(out, task.val.y[has], task.loss).mean())


def selective_routing(
    task: ClusteredTask,
    assignment: np.ndarray,
    moe_val: np.ndarray,
    global_val: np.ndarray,
    has: np.ndarray,
) -> tuple[list[int], dict]:
    """Clusters that go to the global network. The burden of proof follows the whole
    model's validation: where the MoE is not clearly better than the global network over
    all validation samples (by `MARGIN_SE` standard errors of the paired per-sample NLL
    difference), a cluster keeps its expert only where the expert is clearly better on the
    cluster's own samples; where the MoE is clearly better overall, a cluster leaves its
    expert only where the global network is clearly better there. (Per-cluster evidence is
    thin - tens of samples - so a default that ignored the overall verdict would send
    clusters of a clearly better MoE to a clearly worse network.)"""
    diff = np.full(len(task.val), np.nan)
    diff[has] = sample_nll(moe_val[has], task.val.y[has], task.loss) - sample_nll(
        global_val[has], task.val.y[has], task.loss
    )
    overall = diff[has]
    se_all = float(overall.std(ddof=1) / np.sqrt(len(overall))) if len(overall) > 1 else np.inf
    moe_wins = bool(overall.mean() < -MARGIN_SE * se_all)
    fallback: list[int] = []
    evidence: dict[str, dict] = {
        "overall": {
            "nll_gain": round(-float(overall.mean()), 5),
            "se": round(se_all, 5),
            "default": "expert" if moe_wins else "global network",
        }
    }
    for c in range(task.n_clusters):
        d = diff[(task.val.cluster == c) & has]
        if len(d) < 2:
            keeps = moe_wins  # no evidence: the overall verdict
            evidence[str(c)] = {"n": len(d), "keeps_expert": keeps}
        else:
            mean, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
            keeps = mean < MARGIN_SE * se if moe_wins else mean < -MARGIN_SE * se
            evidence[str(c)] = {
                "n": len(d),
                "nll_gain": round(-mean, 5),
                "se": round(se, 5),
                "keeps_expert": bool(keeps),
            }
        if not keeps:
            fallback.append(c)
    return fallback, evidence


def _with_fallback(
    task,
    trainer,
    final,
    best: MethodResult,
    fallback: list[int],
    moe_val,
    seed: int,
    crps_samples: int,
):
    """The `MethodResult` whose clusters in `fallback` go to `best`'s network (a new last
    expert), experts left without a cluster dropped; its validation and holdout outputs."""
    assignment = np.asarray(final.assignment).copy()
    assignment[fallback] = len(final.architectures)
    relabelled, kept = compact_assignment(assignment)
    experts = [*final.moe.experts, fitted_of(best).network]
    archs = [*final.architectures, fitted_of(best).cell]
    moe = ClusterGatedMoE([experts[k] for k in kept], relabelled, [archs[k] for k in kept])
    moe = moe.to(trainer.device)  # its routing table is a buffer: on the experts' device
    to_global = np.isin(task.val.cluster, fallback)
    val = np.where(to_global.reshape(-1, *[1] * (moe_val.ndim - 1)), val_of(best), moe_val)
    test = split_outputs(moe, task.test, trainer.device)
    report = _rescored(task, final.report, test, relabelled, kept, seed, crps_samples)
    shipped = replace(
        final, assignment=relabelled, architectures=[archs[k] for k in kept], moe=moe, report=report
    )
    return shipped, val, test


def _rescored(task, report, test_out, assignment, kept, seed: int, crps_samples: int):
    """The final report with the shipped model's holdout scores (float32 outputs, the run's
    CRPS samples and seed: as `SgemModel.evaluate` scores) and per-expert lists."""
    out = torch.as_tensor(test_out).float()
    s = method_scores(
        task,
        out,
        expert_of=np.asarray(assignment)[task.test.cluster],
        n_experts=len(kept),
        crps_samples=crps_samples,
        seed=seed,
    )

    def per_expert(values):
        values = list(values or [])
        return [values[k] if k < len(values) else None for k in kept]

    return replace(
        report,
        test_accuracy=s["test_accuracy"],
        test_nll=s["test_nll"],
        test_crps=s["test_crps"],
        test_crps_closed_form=s["test_crps_closed_form"],
        test_rmse=s["test_rmse"],
        per_domain_test_nll=s["per_domain_test_nll"],
        per_expert_test_accuracy=s["per_expert_test_accuracy"],
        test_coverage_80=s["test_coverage_80"],
        forecast=s["forecast"],
        output=out,
        steps=per_expert(report.steps),
        final_length=per_expert(report.final_length) if report.final_length else None,
    )


def _ensemble(task: ClusteredTask, members: list[MethodResult], has: np.ndarray) -> dict:
    """Greedy weighted ensemble of every member with outputs, fitted on validation."""
    ready = [
        (val_of(m), test_of(m), m.method)
        for m in members
        if m.val_output is not None and m.test_output is not None and not m.extra.get(SUBSET)
    ]
    if len(ready) < 2:
        return {}
    y_val = task.val.y[has]
    weights = greedy_ensemble([v[has] for v, _, _ in ready], y_val, task.loss)
    used = [(r, w) for r, w in zip(ready, weights, strict=True) if w > 0]
    outs_val = [v[has] for (v, _, _), _ in used]
    outs_test = [t for (_, t, _), _ in used]
    w = np.asarray([w for _, w in used])
    return {
        "weights": {name: round(float(x), 3) for (_, _, name), x in used},
        "validation_nll": mixture_nll(outs_val, w, y_val, task.loss),
        "holdout_nll": mixture_nll(outs_test, w, np.asarray(task.test.y), task.loss),
        "saved": False,
        "why_not_saved": "this mixture of every member is reported; a saved combination mixes "
        "the saved MoE with scikit-learn or AutoETS / AutoTheta members only (see shipped)",
    }


def _shipped_summary(
    row: dict,
    board: list[dict],
    fallback: list[int],
    task,
    combination: tuple | None = None,
    in_it: frozenset[str] | set[str] = frozenset(),
) -> dict:
    """What was saved (with its combination's members and weights) and why, and whether a
    member beats it on validation (`in_it`: the rows of networks the saved model holds)."""
    mine = (row.get("validation") or {}).get("nll")  # (none: a combination fit on the holdout)
    members = set(combination[1]["weights_by_name"] if combination is not None else {})
    members |= set(in_it)
    better = [
        r["model"]
        for r in board[:-1]
        if mine is not None
        and (r.get("validation") or {}).get("nll", np.inf) < mine
        and r["kind"] != "sgem"
        and r["model"] not in members
        and not r.get("subset")  # (scored on other windows)
    ]
    alone = bool(fallback) and len(fallback) == task.n_clusters
    routed = f"{len(fallback)} of {task.n_clusters} clusters routed to the global network"
    what = (
        "the searched MoE"
        if not fallback
        else "the global network alone"
        if alone
        else f"the MoE with {routed}"
    )
    if combination is not None:  # its network member named as what it is
        weights = combination[1]["weights_by_name"].items()
        own = "global network" if alone else "MoE"
        names = ", ".join(f"{own if n == 'MoE' else n} {w:.2f}" for n, w in weights)
        what = f"a combination ({names})" + (
            f", the MoE with {routed}" if fallback and not alone else ""
        )
    return {
        "model": what,
        "validation": row.get("validation"),
        "holdout": row.get("holdout"),
        "better_on_validation": better,
    }


__all__ = [
    "GLOBAL_CELLS",
    "Contest",
    "compete",
    "per_cluster_validation",
    "selective_routing",
]
