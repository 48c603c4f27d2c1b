"""Choosing the number of experts K for `sgem fit`: every candidate K (`--experts auto`), or
growing K while a budgeted table fit's holdout may still gain and its budget holds the next
K. The runs share one config path (`sgem.run.fit_setup.fit_config`) and one experiment path
(`sgem.run.pipeline.run_config`); the choice is made on the searched MoE's holdout NLL."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from ..errors import SgemUserError
from .fit_setup import fit_config

AUTO_EXPERTS = (2, 3, 4)


def fit_auto_experts(
    data: str | os.PathLike,
    out: str | os.PathLike,
    execution: dict | None = None,
    candidates: tuple[int, ...] = AUTO_EXPERTS,
    started: float | None = None,
    grow: bool = False,
    **options: Any,
) -> dict:
    """Choose K among `candidates` on the holdout (`_choice_key`). `execution`: run_config's
    progress / executor / workers / ray_address / gpus_per_task; `started`: the caller's
    `time.perf_counter()`, so the whole choice keeps a time budget.

    `grow=False` (`--experts auto`): every K runs, each in `out/experts-K` with an equal
    part of the budget left when it starts (a K that ends early leaves its rest to the next).
    `grow=True` (a budgeted table fit without --experts): the first K runs in `out` itself
    with the whole budget, as a fixed-K fit would; each next K runs, with all that is left,
    while one of the last `GROW_PATIENCE` Ks is the best so far where Ks are compared and
    the rest of the budget holds the next (estimated from the last K's wall clock). Why: a
    planned search ends when its configured iterations are done, often at a fraction of the
    budget, and K is what the rest buys most reliably (`sgem.run.budget`).

    The winner is the smallest K whose searched MoE's holdout NLL (`_choice_key`) is not
    worse than the best K's by one standard error of their per-row difference (`_chosen`):
    the holdout is the part of the file that no choice inside any K's run was made on, where
    the final networks (retrained on train + validation) are scored as they are saved. Each
    K's validation loss (its returned regions' search-stage losses, weighted by region size)
    is reported beside it and decides only where a run has no holdout score. Its model is copied to
    `out/model` and its result.json to `out/result.json` with an `experts_auto` report of
    every K. A K whose search leaves an expert without a cluster is reported with the
    experts it really uses (`n_experts_used`)."""
    import json
    import shutil
    import time

    from ..atomic import replace_dir, write_atomic
    from .budget import parse_duration
    from .early_references import shared_table_references
    from .rundir import HOLDOUT_NLL, RunDirectory

    out = Path(out)
    started = time.perf_counter() if started is None else started
    total = options.pop("time_budget", None)
    total = None if total is None else parse_duration(total)
    report: list[dict] = []
    runs: list[tuple[int, dict, Path]] = []
    # each K's per-row holdout NLL, for the paired choice
    holdout_rows: list[np.ndarray | None] = []
    stop = "every candidate K ran"
    in_runs = 0.0  # this attempt's seconds inside the Ks' runs
    with shared_table_references():  # (they do not depend on K)
        for i, k in enumerate(candidates):
            begun = started if i == 0 else time.perf_counter()
            spent = _choice_seconds(report, begun - started, in_runs)
            left = None if total is None else total - spent
            if grow and i > 0:
                why_not = _why_not_grow(report, left, k)
                if why_not:
                    stop = why_not
                    break
            budget = left if grow or left is None else left / (len(candidates) - i)
            rundir = out if grow and i == 0 else out / f"experts-{k}"
            try:
                run = fit_config(data, n_experts=k, time_budget=budget, **options)
                result = _run_k(run, rundir, execution or {}, begun)
            except SgemUserError as exc:
                in_runs += time.perf_counter() - begun
                if not report:
                    raise
                if rundir != out:  # refused before it trained: nothing of it is kept
                    RunDirectory(rundir).release_unstarted()
                stop = f"K={k} did not fit the {budget or 0:.0f} s left ({exc})"
                break
            in_runs += time.perf_counter() - begun
            val_loss = _validation_loss(result)
            report.append(
                {
                    "n_experts": k,
                    "n_experts_used": len(set(result["routing"])),
                    "n_clusters": len(result["routing"]),
                    "validation_loss": val_loss,
                    "test_nll": result["test_nll"],
                    "choice_nll": result.get("choice_nll"),
                    "seconds": _run_seconds(result, time.perf_counter() - begun),
                    "reused_seconds": _reused_seconds(result),
                    "budget_seconds": None if budget is None else round(budget, 1),
                }
            )
            runs.append((k, result, rundir))
            holdout_rows.append(RunDirectory(rundir).holdout_nll())
    assert runs
    key = _choice_key(report)
    chosen = _chosen(report, key, holdout_rows)
    k, result, rundir = runs[chosen]
    best = report[_best(report, key)]["n_experts"]
    chosen_on = _CHOSEN_ON[key] + ("" if best == k else f" (within one standard error of K={best})")
    result = {
        **result,
        "experts_auto": {
            "chosen": k,
            "chosen_on": chosen_on,
            "candidates": report,
            "why_it_stopped": stop,
        },
    }
    # every K's run, across the attempts that ran them
    result["wall_seconds"] = round(
        _choice_seconds(report, time.perf_counter() - started, in_runs), 3
    )
    if total is not None and len(report) > 1 and isinstance(result.get("time_budget"), dict):
        tried = ", ".join(str(r["n_experts"]) for r in report)
        result["time_budget"] = {
            **result["time_budget"],
            "budget_seconds": total,
            "why_it_ended": f"{result['time_budget'].get('why_it_ended')} (K = {k}'s run); "
            f"K = {tried} tried in {result['wall_seconds']:.0f} s of {total:.0f} s ({stop}), "
            f"K = {k} chosen on {chosen_on}",
        }
    if rundir != out:  # the winner's model, replaced whole (a kill leaves the old or the new)
        staged = out / ".model-winner"
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(rundir / "model", staged)
        replace_dir(staged, out / "model")
        if (rundir / HOLDOUT_NLL).exists():  # (beside its result.json, as in every run)
            shutil.copyfile(rundir / HOLDOUT_NLL, out / HOLDOUT_NLL)
    write_atomic(out / "result.json", json.dumps(result, indent=2, default=str))
    return result


#: the least budget a next K is started with, as a share of the last K's wall clock (less
#: what the next run reuses) scaled by K_next / K_last: its plan fits its search into what is
#: left (`sgem.run.budget`), and below about half the last K's effort its search is too small
#: to compete. (At 0.6, counting the references again, a 3-minute fit on four mixed
#: structures stopped after K = 2's 102 s: "K=3 needs about 91 s, 78 s were left"; K = 3
#: alone, without a budget, took 70 s and its holdout NLL was 0.16 against K = 2's 0.29.)
GROW_MARGIN = 0.5


#: growth stops once this many Ks in a row did not gain over the best K so far. Why not at
#: the first: a K between two structures' counts can lose to a smaller one, and a larger one
#: win. On four mixed structures at 3m (`benchmarks/mixed_csv.py --kinds linear ring
#: parabola xor`, seed 1) K = 3's holdout NLL was 0.223 against K = 2's 0.193, growth
#: stopped at 78 s of 180, and K = 2 was saved with two structures on no expert of their own
GROW_PATIENCE = 2


#: what `_choice_key`'s answer is, in words
_CHOSEN_ON = {
    "choice_nll": "the holdout",
    "test_nll": "the holdout",
    "validation_loss": "validation",
}


def _choice_key(report: list[dict]) -> str:
    """The report field the Ks are compared on: the searched MoE's holdout NLL where every K
    has one (`choice_nll`: a classifier's probabilities floored, `sgem.moe.scoring.
    choice_nll`; `test_nll` for a run from before it was recorded), else the search's
    validation loss. Why the holdout: validation scored the search-stage networks each K's
    search chose among (and a larger K chooses more); the holdout scores the final MoE as
    saved, and nothing was chosen on it. On a CSV of three mixed structures
    (`benchmarks/mixed_csv.py`) validation preferred K = 4 on a seed where K = 3's holdout
    NLL was 0.078 against K = 4's 0.114."""
    for key in ("choice_nll", "test_nll"):
        if all(_finite(row.get(key)) for row in report):
            return key
    return "validation_loss"


def _best(report: list[dict], key: str) -> int:
    """The index of the K with the lowest `key` (the first of equals: the smaller K)."""
    return min(range(len(report)), key=lambda i: report[i][key])


def _chosen(report: list[dict], key: str, rows: list[np.ndarray | None] | None = None) -> int:
    """The index of the K saved: the smallest K whose holdout NLL is not worse than the best
    K's by more than one standard error of their paired per-row difference (`rows`: each K's
    per-row holdout NLL, the same rows for every K; a paired one-standard-error rule, after
    Hastie, Tibshirani & Friedman 2009, section 7.10), else (validation, or rows missing)
    the best. Each K's difference and its standard error are written into its report row.
    Why: a larger K has more experts to fit on fewer rows each, and a gain the rows drawn
    can give alone is no reason to take them; paired, because every K is scored on the same
    rows, whose difficulty varies far more than the Ks do. On three mixed structures at 3m
    (`benchmarks/mixed_csv.py`, seeds 1 and 2) K = 5 beat K = 3 by 0.012 and 0.005 holdout
    NLL, and two experts split one structure between them; unpaired, one standard error
    (0.014) also kept K = 3 on four structures where K = 4 was 0.011 ahead and gave each
    structure its expert."""
    from ..leaderboard.cross_fit import standard_error  # (torch: only once Ks are compared)

    best = _best(report, key)
    arrays = [r for r in rows or [] if r is not None]
    if key != "choice_nll" or len(arrays) != len(report) or len({len(a) for a in arrays}) != 1:
        return best
    within = []
    for i, row in enumerate(report):
        diff = arrays[i] - arrays[best]
        se = standard_error(diff) if len(diff) > 1 else 0.0
        row["paired_difference_to_best"], row["paired_difference_se"] = float(diff.mean()), se
        if diff.mean() <= se:
            within.append(i)
    return min(within, key=lambda i: report[i]["n_experts"])


def _finite(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and math.isfinite(value)


def _run_k(run: dict, rundir: Path, execution: dict, begun: float) -> dict:
    """One K's run: continued where `rundir` holds this K's run interrupted (the same
    config but for the time budget, which a K after the first gets from what is left: it
    keeps the one it started with, its clock continues), reused where it finished, else
    started. Why: an interrupted choice of K is continued by running the same `sgem fit`
    again; each K's run used to be refused as another run there, and dropped with its
    finished trainings."""
    from .pipeline import resume_experiment, run_config
    from .rundir import CONFIG, STORE, RunDirectory

    here = RunDirectory(rundir)
    if here.file(CONFIG).exists() and here.file(STORE).exists():
        kept = here.read_config().get("run", {})
        if {**kept, "time_budget": None} == {**run, "time_budget": None}:
            if here.is_complete:
                return here.read_result() | {"reused": True}
            return resume_experiment(rundir, **execution)
    return run_config(run, rundir, **execution, started=begun)


def _why_not_grow(report: list[dict], left: float | None, k: int) -> str | None:
    """Why a growing K choice stops before trying `k` (None: try it): the last
    `GROW_PATIENCE` Ks did not gain over the best one where Ks are compared (`_choice_key`),
    `k` exceeds half the clusters, or less is left than `GROW_MARGIN` of the last K's time
    (less what the next run reuses: a table's references, `shared_table_references`; scaled
    by K)."""
    key = _choice_key(report)
    best = _best(report, key)
    if len(report) - 1 - best >= GROW_PATIENCE:
        since = " and ".join(f"K={row['n_experts']}" for row in report[best + 1 :])
        return f"{since} did not gain on {_CHOSEN_ON[key]} over K={report[best]['n_experts']}"
    if k > report[-1]["n_clusters"] // 2:  # an expert should own two clusters on average
        return f"K={k} is more than half of the {report[-1]['n_clusters']} clusters"
    if left is None:
        return None
    last = report[-1]
    need = GROW_MARGIN * (last["seconds"] - last.get("reused_seconds", 0.0)) * k / last["n_experts"]
    if left < need:
        return f"K={k} needs about {need:.0f} s, {max(left, 0.0):.0f} s were left"
    return None


def _run_seconds(result: dict, measured: float) -> float:
    """What a K's run cost: its own clock's seconds (a run reused or continued from an
    earlier attempt counts what it spent there), else the seconds measured here."""
    clocked = (result.get("clock") or {}).get("wall_seconds")
    return round(float(clocked) if _finite(clocked) else measured, 1)


def _choice_seconds(report: list[dict], attempt_seconds: float, in_runs: float) -> float:
    """The seconds a choice of K has spent: its Ks' runs by their own clocks (`_run_seconds`)
    plus this attempt's time outside them. Why not this attempt's wall clock: the same
    `sgem fit` run again reuses the finished Ks in no time, and the Ks after them were given
    the whole budget again (the choice overran --time-budget across attempts) and grown on
    the reused Ks' near-zero seconds."""
    return sum(float(r["seconds"]) for r in report) + max(attempt_seconds - in_runs, 0.0)


def _reused_seconds(result: dict) -> float:
    """The seconds of a K's run that the next K's run reuses: a table's scikit-learn
    references (`sgem.run.early_references.shared_table_references`)."""
    stages = (result.get("clock") or {}).get("stage_seconds") or {}
    return float(stages.get("scikit_learn_references", 0.0))


def _validation_loss(result: dict) -> float:
    """The size-weighted validation loss of a run's returned regions (an expert its search
    left without a cluster is not among them: routing and losses count the used ones)."""
    losses = np.asarray(
        [np.nan if v is None else v for v in result["region_val_losses"]], dtype=float
    )
    sizes = np.bincount(result["routing"], weights=result["cluster_sizes"], minlength=len(losses))
    used = ~np.isnan(losses)
    return float((losses[used] * sizes[used]).sum() / sizes[used].sum())


def grows_experts(run: dict) -> bool:
    """Whether a fit (its run config, `sgem.run.fit_setup.fit_config`) chooses K by growing
    it within its budget: a budgeted table fit whose K the user left open (no --experts,
    none in a --config override: `experts_at_most_clusters`, the preset's K)."""
    return (
        bool(run.get("experts_at_most_clusters"))
        and run.get("time_budget") is not None
        and run["task"].get("name") == "table"
    )


__all__ = ["AUTO_EXPERTS", "GROW_MARGIN", "GROW_PATIENCE", "fit_auto_experts", "grows_experts"]
