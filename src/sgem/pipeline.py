"""One run end to end: task -> SGEM search -> final MoE -> result.json, model and plots.

A run is fully described by its run config (`sgem.runconfig`: task, space, search, seed,
...); the same config and seed on CPU give the same result. `run_config` is the one
experiment path behind `sgem run` (a preset: `run_experiment`), `sgem fit` and the Python
API; `resume_experiment` continues an interrupted run from its directory. The presets
(`PRESETS`: toy, ts-offline, ts-paper, images-offline, images-paper) are the YAML files of
`sgem/presets/`, each with a header saying what it runs and at what scale.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from .budget import deadline, plan_run
from .data.task import ClusteredTask
from .errors import SgemUserError
from .executors import make_executor, resolve_executor
from .experiment import finish_sgem
from .moe.artifact import save_final_moe
from .moe.reference import add_references
from .presets import PRESET_NAMES
from .progress import shown
from .runconfig import (
    RunConfig,
    build_space,
    build_task,
    build_task_from_config,
    config_fingerprint,
    load_config,
    merge,
    preset,
    read_config_file,
)
from .rundir import STORE, TRACE, RunDirectory, versions
from .search.sgem import SGEM, SearchResult
from .store import ObservationStore
from .train.trainer import resolve_device

log = logging.getLogger(__name__)

EXECUTORS = ("auto", "inline", "batched", "processes", "ray")

#: The built-in presets' run config mappings, by name (read from `sgem/presets/*.yaml`;
#: `preset(name)` gives a copy to change).
PRESETS: MappingProxyType[str, dict[str, Any]] = MappingProxyType(
    {name: preset(name) for name in PRESET_NAMES}
)


def run_experiment(
    name: str = "toy",
    seed: int = 0,
    out: str | os.PathLike | None = None,
    progress: bool = True,
    config_file: str | os.PathLike | None = None,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
) -> dict:
    """Run a preset end to end and write its run directory. Returns result.json's content."""
    run_cfg = load_config(name, config_file)
    run_cfg["seed"] = seed
    out = Path("runs") / f"{name}-seed{seed}" if out is None else out
    return run_config(run_cfg, out, progress, executor, workers, ray_address, gpus_per_task)


def validate_run(run_cfg: dict, executor: str = "inline", workers: int = 2) -> RunConfig:
    """Check a run config mapping and the execution flags before anything is written, so a
    typo never claims a run directory. Returns the typed config."""
    seed = run_cfg.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SgemUserError(f"the seed must be an integer >= 0, got {seed!r}")
    if executor not in EXECUTORS:
        raise SgemUserError(f"unknown executor {executor!r}; choose one of {list(EXECUTORS)}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise SgemUserError(f"--workers must be an integer >= 1, got {workers!r}")
    return RunConfig.from_dict(run_cfg)


def run_config(
    run_cfg: dict | RunConfig,
    out: str | os.PathLike,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
) -> dict:
    """Run a complete run config (task, space, search, seed, ...) into run directory `out`:
    the one experiment path behind `sgem run`, `sgem fit` and the Python API.

    The mapping, as given, is the run's identity (config.yaml, the store's fingerprint); a
    `RunConfig` is written as `RunConfig.to_dict()`."""
    started = time.perf_counter()
    if str(out).strip() == "":
        raise SgemUserError("the output directory is empty; give --out DIR")
    run_dict = run_cfg.to_dict() if isinstance(run_cfg, RunConfig) else run_cfg
    cfg = validate_run(run_dict, executor, workers)
    rundir = RunDirectory(out)
    if rundir.is_complete and rundir.read_config().get("run") == run_dict:
        result = rundir.read_result()
        result["reused"] = True
        return result
    # the data is read before the directory is claimed: a bad file claims nothing
    torch.set_num_threads(cfg.torch_threads)
    task = build_task(cfg)
    rundir.prepare({"run": run_dict, "versions": versions()})
    with rundir.lock():
        return _execute(
            cfg,
            config_fingerprint(run_dict),
            rundir,
            progress,
            False,
            executor,
            workers,
            ray_address,
            gpus_per_task,
            task,
            started,
        )


def resume_experiment(
    out: str | os.PathLike,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
) -> dict:
    """Continue an interrupted run from its last checkpoint; finished trainings are reused."""
    rundir = RunDirectory(out)
    if rundir.is_complete:
        result = rundir.read_result()
        result["reused"] = True
        return result
    run_dict = rundir.load_for_resume()["run"]
    cfg = validate_run(run_dict, executor, workers)
    with rundir.lock():
        return _execute(
            cfg,
            config_fingerprint(run_dict),
            rundir,
            progress,
            True,
            executor,
            workers,
            ray_address,
            gpus_per_task,
        )


def _execute(
    cfg: RunConfig,
    fingerprint: str,
    rundir: RunDirectory,
    progress: bool,
    resume: bool,
    executor_kind: str,
    workers: int,
    ray_address: str | None,
    gpus_per_task: float = 0.0,
    task: ClusteredTask | None = None,
    started: float | None = None,
) -> dict:
    """Search, final MoE, result.json, model and figures of a validated run config whose
    mapping has `fingerprint` (the store refuses another run's file)."""
    start = time.perf_counter() if started is None else started
    assert cfg.seed is not None  # validate_run requires it
    seed = cfg.seed
    torch.set_num_threads(cfg.torch_threads)
    if task is None:
        task = build_task(cfg)
    timing = {"task": time.perf_counter() - start}  # reading, validating, building the task
    space = build_space(cfg.space)
    search_cfg = cfg.search
    # a resumed run whose trace has iterations must find its store (never restart silently)
    must_exist = resume and rundir.file(TRACE).exists() and rundir.file(TRACE).stat().st_size > 0
    store = ObservationStore(
        task.n_clusters, rundir.file(STORE), fingerprint=fingerprint, must_exist=must_exist
    )

    def listener(event: str, payload: dict) -> None:
        if event == "iteration":
            rundir.append(TRACE, payload["row"])
        elif event == "restored":
            rundir.rewrite_trace(payload["trace"])

    device = str(resolve_device(cfg.device))
    executor_kind = resolve_executor(executor_kind, device)
    plan = None
    if cfg.time_budget:
        search_cfg, plan = plan_run(cfg, rundir, task, space, search_cfg, device, start)
    search = SGEM(space, search_cfg, seed=seed, progress=progress, listener=listener, device=device)
    try:
        # in-process executors are built by the search from its own trainer
        executor = (
            executor_kind
            if executor_kind in ("inline", "batched")
            else make_executor(
                executor_kind,
                task,
                space,
                search_cfg.train,
                workers=workers,
                address=ray_address,
                num_gpus=gpus_per_task,
            )
        )
        try:
            found = search.fit(
                task, store=store, executor=executor, resume=resume, deadline=deadline(plan)
            )
            # the final MoE: the finalists' second look with the final protocol, then the
            # protocol every method shares (sgem.experiment.finish_sgem); a processes
            # executor's warm workers make the tracking runs and retrain side by side
            t0 = time.perf_counter()
            with shown(progress):  # the stages after the EM bar (sgem.progress)
                final = finish_sgem(
                    task,
                    search.trainer_,
                    found,
                    search_cfg,
                    seed,
                    final_epochs=cfg.final_epochs,
                    # a time budget may have planned a cheaper one (budget.plan_final)
                    final_length=(plan or {}).get("final_length", cfg.final_length),
                    crps_samples=cfg.crps_samples,  # forecasting tasks only
                    executor=None if isinstance(executor, str) else executor,
                )
            assert final.search is not None
            found = final.search  # the partition and cells of the final model
            t_ref = time.perf_counter()
            with shown(progress):  # cheap on a table; warm starts already scored theirs
                add_references(
                    final.report,
                    task,
                    search.trainer_,
                    found,
                    seed,
                    steps=search_cfg.final_steps,
                    epochs=cfg.final_epochs,
                    length=(plan or {}).get("final_length", cfg.final_length),
                    crps_samples=cfg.crps_samples,
                    executor=None if isinstance(executor, str) else executor,
                )
            reference_seconds = time.perf_counter() - t_ref
        finally:
            if not isinstance(executor, str):
                executor.close()
    finally:
        store.close()
    checked = time.perf_counter() - t0
    check_seconds = (found.selection or {}).get("final_check", {}).get("seconds", 0.0)
    retrain = checked - check_seconds - reference_seconds
    timing = {**timing, **found.timing, "final_retrain": retrain}
    if reference_seconds > 0.01:
        timing["reference_networks"] = reference_seconds
    if check_seconds:
        timing["final_check"] = check_seconds
    t0 = time.perf_counter()
    result = _result_json(task, found, final.report.to_json(), seed, time.perf_counter() - start)
    result["resumed"] = resume
    result["executor"] = executor_kind
    if plan is not None:
        result["time_budget"] = {k: v for k, v in plan.items() if not k.startswith("_")}
        result["time_budget"]["stopped_early"] = "stopped_at_deadline_after_iteration" in (
            found.selection or {}
        )
    save_final_moe(
        rundir.file(MODEL_DIR),
        task,
        space,
        final.moe,
        search.trainer_.n_out,
        metrics=model_metrics(result),
        info={
            "seed": seed,
            "method": "sgem",
            "crps_samples": cfg.crps_samples,
            "torch_threads": cfg.torch_threads,
            "encoding": task.meta.get("encoding"),
            "target_standardisation": task.meta.get("target_standardisation"),
            "target": task.meta.get("target"),
            "freq": task.meta.get("freq"),
            # one network of each expert's cell on all clusters, same test samples
            "reference_networks_test": result.get("global_networks_test"),
        },
    )
    result["model"] = MODEL_DIR
    rundir.write_result(result)
    from .report import draw_run_figures  # matplotlib only once a run has finished

    draw_run_figures(rundir, task, found, seed, images=cfg.task["name"] == "images")
    # where the time went (exclusive seconds per phase; sgem.timing): written last, so the
    # model and figures count too
    timing["reporting"] = time.perf_counter() - t0
    result["timing"] = {k: round(v, 3) for k, v in timing.items()}
    result["wall_seconds"] = round(time.perf_counter() - start, 3)
    rundir.write_result(result)
    return result


def _result_json(
    task: ClusteredTask, found: SearchResult, moe: dict, seed: int, seconds: float
) -> dict:
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
            "test_accuracy": moe["test_accuracy"],
            "test_nll": moe["test_nll"],
            "per_expert_test_accuracy": moe["per_expert_test_accuracy"],
            "n_trained": found.n_trained,
            # optimiser steps each final expert trained for; with final_length "validation"
            # also how each was chosen (best step, tracking curve)
            "final_steps": moe.get("steps"),
            "final_length": moe.get("final_length"),
            # with warm starts: each cell's global network (its tracking run)
            "global_networks": moe.get("global_networks"),
            # with warm starts: each cell's global network alone on the same test samples
            "global_networks_test": moe.get("global_networks_test"),
            "failed_trainings": found.failures,
            "search_seconds": round(found.seconds, 3),
            "wall_seconds": round(seconds, 3),
            "mean_cluster_purity": task.meta.get("mean_purity"),
            "cluster_sizes": task.cluster_sizes.tolist(),
            "versions": versions(),
        }
        | (_forecast_json(task, moe) if task.loss == "student_t" else {})
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


def _forecast_json(task: ClusteredTask, moe: dict) -> dict:
    """The forecasting scores (student_t tasks only, so other result.json stay as they were)."""
    names = task.meta.get("domain_names")
    per_domain = {(names[int(d)] if names else d): v for d, v in moe["per_domain_test_nll"].items()}
    return {
        "test_crps": moe["test_crps"],
        "test_crps_closed_form": moe["test_crps_closed_form"],
        "per_domain_test_nll": per_domain,
        "final_steps_per_expert": moe["steps"],
        "domain_names": names,
        "n_clusters": task.n_clusters,
        "n_windows": {s: len(getattr(task, s)) for s in ("train", "val", "test")},
    }


MODEL_DIR = "model"
_METRICS = (
    "test_accuracy",
    "test_nll",
    "per_expert_test_accuracy",
    "test_crps",
    "test_crps_closed_form",
    "per_domain_test_nll",
)


def model_metrics(result: dict) -> dict:
    """The test metrics a saved model carries (and `SgemModel.evaluate` reproduces)."""
    return {k: result[k] for k in _METRICS if k in result}


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
    timing = result.get("timing") or {}
    if timing:  # the three largest phases say where the time went
        top = sorted(timing.items(), key=lambda kv: -kv[1])[:3]
        lines.append("  time: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} s" for k, v in top))
    return "\n".join(lines)


__all__ = [
    "MODEL_DIR",
    "PRESETS",
    "RunConfig",
    "build_space",
    "build_task_from_config",
    "load_config",
    "merge",
    "model_metrics",
    "preset",
    "read_config_file",
    "resume_experiment",
    "run_config",
    "run_experiment",
    "summarise",
]
