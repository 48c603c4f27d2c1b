"""One run end to end: task -> SGEM search -> final MoE -> result.json, model and plots.

A run is fully described by its run config (`sgem.run.runconfig`: task, space, search, seed,
...); the same config and seed on CPU give the same result. `run_config` is the one
experiment path behind `sgem run` (a preset: `run_experiment`), `sgem fit` and the Python
API; `resume_experiment` continues an interrupted run from its directory. The presets
(`PRESETS`: toy, ts-offline, ts-paper, images-offline, images-paper) are the YAML files of
`sgem/presets/`, each with a header saying what it runs and at what scale. The stages after
the final MoE (leaderboard, calibration, saving, result.json) are `sgem.run.finish`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from ..atomic import recover_dir
from ..data.task import ClusteredTask
from ..errors import SgemUserError
from ..execution.executors import make_executor, resolve_executor
from ..methods.sgem import SgemMethod
from ..presets import PRESET_NAMES
from ..search.config import SearchConfig
from ..search.store import ObservationStore
from ..train.time_fence import training_fence
from ..train.trainer import resolve_device
from .budget import (
    deadline,
    extension_margin,
    moving_deadline,
    plan_run,
    tail_seconds,
)
from .budget_clock import CLOCK_FILE, BudgetClock
from .early_references import classical_first, table_references
from .final_stages import run_final_stages
from .finish import Searched, finish_run
from .input_fingerprint import input_fingerprint
from .kept_references import CLASSICAL_FILE, TABLE_FILE
from .run_result import (
    MODEL_DIR,
    model_metrics,
    summarise,
)
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
    device: str | None = None,
) -> dict:
    """Run a preset end to end and write its run directory. Returns result.json's content.
    `device` (cpu, cuda, cuda:N, auto) overrides the preset's and the config file's."""
    run_cfg = load_config(name, config_file)
    if device is not None:
        run_cfg["device"] = device
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
    cfg = RunConfig.from_dict(run_cfg)
    resolve_device(cfg.device)  # a device this machine lacks is refused before any write
    return cfg


def run_config(
    run_cfg: dict | RunConfig,
    out: str | os.PathLike,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
    started: float | None = None,
) -> dict:
    """Run a complete run config (task, space, search, seed, ...) into run directory `out`:
    the one experiment path behind `sgem run`, `sgem fit` and the Python API.

    The mapping, as given, is the run's identity (config.yaml, the store's fingerprint); a
    `RunConfig` is written as `RunConfig.to_dict()`. `started`: the caller's
    `time.perf_counter()` at its start, so a time budget counts the caller's own work too."""
    started = time.perf_counter() if started is None else started
    if str(out).strip() == "":
        raise SgemUserError("the output directory is empty; give --out DIR")
    run_dict = run_cfg.to_dict() if isinstance(run_cfg, RunConfig) else run_cfg
    cfg = validate_run(run_dict, executor, workers)
    rundir = RunDirectory(out)
    reused = rundir.finished_result(run_dict)
    if reused is not None:
        return reused
    # the data is read before the directory is claimed: a bad file claims nothing
    torch.set_num_threads(cfg.torch_threads)
    task = build_task(cfg)
    read = input_fingerprint(run_dict)  # (reuse and resume refuse the run if it changes)
    claimed = rundir.prepare({"run": run_dict, "versions": versions(), "input": read})
    try:
        with rundir.lock():
            execution = Execution(progress, executor, workers, ray_address, gpus_per_task)
            return _execute(
                cfg, config_fingerprint(run_dict), rundir, execution, False, task, started
            )
    except SgemUserError:  # refused before any training (K > M, a budget too small):
        if claimed == "new":  # the directory is given back for the corrected command
            rundir.release_unstarted()
        raise


def resume_experiment(
    out: str | os.PathLike,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
) -> dict:
    """Continue an interrupted run from its last checkpoint; finished trainings are reused."""
    started = time.perf_counter()  # a budget's clock counts the resume's own start-up too
    rundir = RunDirectory(out)
    if rundir.is_complete:
        result = rundir.read_result()
        result["reused"] = True
        return result
    run_dict = rundir.load_for_resume()["run"]
    cfg = validate_run(run_dict, executor, workers)
    with rundir.lock():
        recover_dir(rundir.file(MODEL_DIR))  # what a kill inside the model's save left
        execution = Execution(progress, executor, workers, ray_address, gpus_per_task)
        return _execute(cfg, config_fingerprint(run_dict), rundir, execution, True, started=started)


@dataclass(frozen=True)
class Execution:
    """Where and how a run trains (the command line's flags), as `_execute` passes them on."""

    progress: bool
    executor: str
    workers: int
    ray_address: str | None
    gpus_per_task: float = 0.0


def _execute(
    cfg: RunConfig,
    fingerprint: str,
    rundir: RunDirectory,
    execution: Execution,
    resume: bool,
    task: ClusteredTask | None = None,
    started: float | None = None,
) -> dict:
    """Search, final MoE, result.json, model and figures of a validated run config whose
    mapping has `fingerprint` (the store refuses another run's file).

    Under a time budget every training stops at the fence (`sgem.train.time_fence`), which leaves
    the tail (scoring, saving, figures) its time; a resumed run continues with the seconds
    its clock (`sgem.run.budget_clock`) has left."""
    clock = BudgetClock(
        rundir.file(CLOCK_FILE),
        cfg.time_budget,
        started=started,
        resume=resume,
        heartbeat=execution.progress,
    )
    fence_at = None
    if cfg.time_budget:
        fence_at = clock.wall_time_at(cfg.time_budget - tail_seconds(cfg.time_budget, task))
    try:
        with training_fence(fence_at):
            return _stages(cfg, fingerprint, rundir, execution, resume, task, clock)
    finally:
        clock.close()


def experts_for(task: ClusteredTask, search: SearchConfig, shrink: bool) -> SearchConfig:
    """The search config with K at most the task's M clusters: shrunk (with a warning) where
    K is the preset's (`experts_at_most_clusters`), else refused before any training."""
    k, m = search.n_experts, task.n_clusters
    if k <= m:
        return search
    if not shrink:
        raise SgemUserError(
            f"n_experts K={k} exceeds the number of clusters M={m}: every expert needs at "
            f"least one cluster; use --experts {m} or fewer, or more clusters (--clusters)"
        )
    log.warning("the data gives M = %d clusters: K = %d experts instead of %d", m, m, k)
    return replace(search, n_experts=m)


def _stages(
    cfg: RunConfig,
    fingerprint: str,
    rundir: RunDirectory,
    execution: Execution,
    resume: bool,
    task: ClusteredTask | None,
    clock: BudgetClock,
) -> dict:
    """The stages of `_execute`, each timed on `clock`."""
    progress = execution.progress
    start = clock.started
    assert cfg.seed is not None  # validate_run requires it
    seed = cfg.seed
    torch.set_num_threads(cfg.torch_threads)
    if task is None:
        with clock.timed("reading_data"):
            task = build_task(cfg)
    timing = {"task": time.perf_counter() - start}  # reading, validating, building the task
    space = build_space(cfg.space)
    search_cfg = experts_for(task, cfg.search, cfg.experts_at_most_clusters)
    configured = search_cfg  # (a time budget's plan may make the final stage cheaper)
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
    executor_kind = resolve_executor(execution.executor, device)
    plan = None
    # a user's table's references come first, so the plan sizes the search to what they leave
    kept_table = rundir.file(TABLE_FILE)
    table_refs = table_references(task, space, seed, cfg.crps_samples, clock, kept_table)
    if cfg.time_budget:
        with clock.timed("planning"):
            fitted = table_refs is not None
            search_cfg, plan = plan_run(cfg, rundir, task, space, search_cfg, device, start, fitted)
    # a time budget may have planned a cheaper final stage (budget.plan_final)
    budget = SgemMethod.budget_of(
        search_cfg,
        seed,
        space=space,
        final_length=(plan or {}).get("final_length", cfg.final_length),
        final_epochs=cfg.final_epochs,
        crps_samples=cfg.crps_samples,  # forecasting tasks only
        device=device,
        deadline=deadline(plan),
    )
    kept = rundir.file(CLASSICAL_FILE)
    early_refs = table_refs or classical_first(task, space, budget, plan, clock, kept)
    budget = replace(budget, deadline=deadline(plan, references_done=early_refs is not None))
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
                workers=execution.workers,
                address=execution.ray_address,
                num_gpus=execution.gpus_per_task,
                device=device,
            )
        )
        # SGEM as a method: the search with this run's store, executor and trace, then the
        # final stage; the search's trainer is the run's one trainer, handed to every stage
        method = SgemMethod(
            search_cfg,
            progress=progress,
            listener=listener,
            store=store,
            executor=executor,
            resume=resume,
            iteration_cap=(plan or {}).get("iteration_cap"),
            extension_margin=extension_margin(plan),
            reprice=moving_deadline(plan, references_done=early_refs is not None),
        )
        try:
            with clock.timed("search"):
                trainer, found = method.search(task, budget)
            # the final MoE, its reference networks and seed rounds (each kept as it ends)
            stages = run_final_stages(
                method,
                task,
                budget,
                trainer,
                found,
                cfg=cfg,
                configured=configured,
                space=space,
                plan=plan,
                references_done=early_refs is not None,
                rundir=rundir,
                fingerprint=fingerprint,
                clock=clock,
                progress=progress,
                executor=None if isinstance(executor, str) else executor,
            )
        finally:
            if not isinstance(executor, str):
                executor.close()
    finally:
        store.close()
    final, protocol = stages.final, stages.protocol
    assert final.search is not None
    found = final.search  # the partition and cells of the final model
    timing = {**timing, **found.timing, **stages.timing}
    searched = Searched(
        task, trainer, found, final, protocol, seed, early_refs, timing, space, search_cfg,
        key=stages.key,
    )  # fmt: skip
    return finish_run(cfg, rundir, clock, searched, plan, stages.final_cut, resume, executor_kind)


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
