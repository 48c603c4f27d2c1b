"""One run end to end: task -> SGEM search -> final MoE -> result.json and plots.

A run is fully described by its `run` config (task, space, search, seed); the same config
and seed on CPU give the same result. Presets (`PRESETS`):

* `toy`: the 2-D toy mixture (tabular space, classification);
* `ts-offline`: the four-domain forecasting mixture on the offline stand-ins in the shared
  data directory, sized for 2 CPU cores (one run plus the final MoE in a few minutes);
* `ts-paper`: the paper's forecasting benchmark on the real Monash files (read by name from
  `task.directory`, or `$SGEM_MONASH_DIR`): 40,000 windows, L = 96, H = 24, M = 30, K = 4,
  final retrain 50 epochs; meant for a GPU (`device: auto`);
* `images-offline`: the two-source image mixture (CIFAR-10 subset + MNIST from the shared
  data directory, `task.directory` or `$SGEM_IMAGE_DATA`), 2,000 images clustered at
  32 x 32 (M = 20), seen by the networks at 16 x 16, small DARTS cells, K = 2; sized for
  2 CPU cores;
* `images-paper`: the paper's image benchmark, CIFAR-100 + SVHN read from `task.directory`
  (42,000 images, M = 30, K = 2, init_channels 16, final retrain 100 epochs); for a GPU.

The image presets are the run-config sections of `configs/images-{offline,paper}.yaml`
(which `benchmarks/images_main.py` reads, with its baseline settings).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from .data.images import build_image_task, downsample
from .data.task import ClusteredTask
from .data.timeseries import make_timeseries_task
from .data.toy import make_toy_task
from .data.user_tasks import BUILDERS
from .errors import SgemUserError
from .executors import make_executor
from .moe.artifact import save_final_moe
from .moe.cluster_gated import train_final_moe
from .rundir import STORE, TRACE, RunDirectory, versions
from .search.config import SearchConfig
from .search.sgem import SGEM, SearchResult
from .space.registry import build_space
from .space.tabular import TABULAR_OPS
from .space.timeseries import TIMESERIES_OPS
from .store import ObservationStore
from .surrogate.model import SurrogateConfig
from .train.trainer import TrainConfig, resolve_device

log = logging.getLogger(__name__)

EXECUTORS = ("inline", "batched", "processes", "ray")

TOY_PRESET: dict[str, Any] = {
    "task": {
        "name": "toy",
        "n_per_cloud": 1000,
        "n_test_per_cloud": 500,
        "n_clusters": 20,
        "val_fraction": 0.2,
    },
    "space": {
        "kind": "tabular",
        "ops": list(TABULAR_OPS),
        "n_nodes": 3,
        "hidden": 8,
        "dropout": 0.2,
        "rbf_centres": 1,
    },
    "search": SearchConfig().to_dict(),
    "torch_threads": 1,
}

TS_SPACE: dict[str, Any] = {
    "kind": "timeseries",
    "ops": list(TIMESERIES_OPS),
    "n_nodes": 3,
    "channels": 16,
    "ma_kernel": 5,
    "dilation": 2,
    "patch_len": 12,
    "heads": 2,
    "min_scale": 1e-3,
}

#: Offline forecasting run sized for 2 CPU cores: 4000 windows, M = 20 (a couple merged
#: away when a cluster gets no validation window), K = 4, minibatch candidate training
#: (100 steps of 64 windows), 4 EM iterations with one exploration round: ~105 candidate
#: trainings. Measured (benchmarks/results/ts_main_offline.json): search + final MoE took
#: 504-615 s per seed on one torch thread, on 2 cores shared with two other heavy jobs.
TS_OFFLINE_PRESET: dict[str, Any] = {
    "task": {
        "name": "timeseries",
        "source": "offline",
        "directory": None,
        "domains": None,
        "n_windows": 4000,
        "n_clusters": 20,
        "context": 96,
        "horizon": 24,
        "split": [0.7, 0.15, 0.15],
        "floor_fraction": 0.2,
    },
    "space": copy.deepcopy(TS_SPACE),
    "search": SearchConfig(
        n_experts=4,
        n_iterations=4,
        n_init=16,
        pool_size=100,
        mc_masks=8,
        routing_steps=30,
        acquisitions_per_expert=1,
        explore_every=4,
        refit_budget=4,
        final_candidates=2,
        finalist_budget=1,
        final_steps=500,
        train=TrainConfig(steps=100, lr=3e-3, batch_size=64),
    ).to_dict(),
    "final_epochs": None,
    "crps_samples": 100,
    "device": "cpu",
    "torch_threads": 1,
}

#: The paper's forecasting benchmark (Section "Time-Series Forecasting over a Multi-Domain
#: Mixture"): real Monash files, 40,000 windows, M = 30, K = 4, final retrain 50 epochs.
TS_PAPER_PRESET: dict[str, Any] = copy.deepcopy(TS_OFFLINE_PRESET)
TS_PAPER_PRESET["task"].update(source="monash", n_windows=40_000, n_clusters=30)
TS_PAPER_PRESET["search"] = SearchConfig(
    n_experts=4,
    n_iterations=20,
    n_init=60,
    pool_size=200,
    final_steps=2000,
    train=TrainConfig(steps=1000, lr=1e-3, batch_size=256),
).to_dict()
TS_PAPER_PRESET["final_epochs"] = 50
TS_PAPER_PRESET["device"] = "auto"
TS_PAPER_PRESET["torch_threads"] = 4

#: SGD protocol shared by every image training (candidates, final experts): momentum 0.9,
#: Nesterov, wd 3e-4, cosine schedule, gradient clip 5.
_IMAGE_SGD: dict[str, Any] = {
    "optimizer": "sgd",
    "momentum": 0.9,
    "nesterov": True,
    "weight_decay": 3e-4,
    "schedule": "cosine",
    "grad_clip": 5.0,
}

#: The image benchmark at the offline scale (the run-config sections of
#: configs/images-offline.yaml): CIFAR-10 subset + MNIST, 2,000 images clustered at 32 x 32
#: (M = 20) and average-pooled to 16 x 16 for the networks, DARTS cells with 2 nodes and 8
#: initial channels, K = 2, candidates 100 SGD steps (lr 0.1, batch 32), 4 EM iterations
#: with an exploration round (affinity masks + a measured jump) every 2 (one round left seed 1
#: at recovery 0.65), ~70 candidate trainings, final experts 15 epochs on train + val.
IMAGES_OFFLINE_PRESET: dict[str, Any] = {
    "task": {
        "name": "images",
        "source": "offline",
        "directory": None,
        "n_per_source": 1000,
        "n_clusters": 20,
        "image_size": 16,
        "embeddings": "default",
        "split": [0.7, 0.15, 0.15],
    },
    "space": {
        "kind": "darts",
        "ops": ["skip", "sep_conv_3x3", "sep_conv_5x5", "max_pool_3x3"],
        "n_cell_nodes": 2,
        "init_channels": 8,
        "in_channels": 3,
    },
    "search": SearchConfig(
        n_experts=2,
        n_iterations=4,
        n_init=12,
        pool_size=100,
        mc_masks=8,
        routing_steps=30,
        acquisitions_per_expert=1,
        explore_every=2,
        refit_budget=2,
        final_candidates=2,
        finalist_budget=1,
        final_steps=1,
        train=TrainConfig(steps=100, batch_size=32, lr=0.1, eval_batch_size=512, **_IMAGE_SGD),
        surrogate=SurrogateConfig(epochs_first=200, epochs_refit=80, mc_samples=10),
    ).to_dict(),
    "final_epochs": 15,
    "device": "cpu",
    "torch_threads": 1,
}

#: The paper's image benchmark (section "CIFAR-100 and SVHN mixture"; configs/images-paper.yaml):
#: 42,000 images at 32 x 32, M = 30, K = 2, 4-node cells with 16 initial channels,
#: candidates 1500 SGD steps (lr 0.05, batch 128), final retrain 100 epochs. Needs
#: `task.directory` (cifar-100-python/ and train_32x32.mat) and a GPU.
IMAGES_PAPER_PRESET: dict[str, Any] = copy.deepcopy(IMAGES_OFFLINE_PRESET)
IMAGES_PAPER_PRESET["task"].update(
    source="cifar100+svhn", n_per_source=21_000, n_clusters=30, image_size=None
)
IMAGES_PAPER_PRESET["space"].update(n_cell_nodes=4, init_channels=16)
IMAGES_PAPER_PRESET["search"] = SearchConfig(
    n_experts=2,
    n_iterations=20,
    n_init=60,
    final_steps=1,
    train=TrainConfig(
        steps=1500,
        batch_size=128,
        lr=0.05,
        eval_batch_size=1024,
        amp=True,
        channels_last=True,
        **_IMAGE_SGD,
    ),
).to_dict()
IMAGES_PAPER_PRESET["final_epochs"] = 100
IMAGES_PAPER_PRESET["device"] = "auto"
IMAGES_PAPER_PRESET["torch_threads"] = 4

PRESETS = {
    "toy": TOY_PRESET,
    "ts-offline": TS_OFFLINE_PRESET,
    "ts-paper": TS_PAPER_PRESET,
    "images-offline": IMAGES_OFFLINE_PRESET,
    "images-paper": IMAGES_PAPER_PRESET,
}


def preset(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise SgemUserError(f"unknown preset {name!r}; available: {sorted(PRESETS)}")
    return copy.deepcopy(PRESETS[name])


def merge(base: dict, override: dict, path: str = "") -> dict:
    """Recursively override `base` with `override`, refusing keys `base` does not have."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if key not in out:
            raise SgemUserError(f"unknown config key {path}{key!r}; known: {sorted(out)}")
        if isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = merge(out[key], value, f"{path}{key}.")
        else:
            out[key] = value
    return out


def load_config(name: str, config_file: str | Path | None = None) -> dict[str, Any]:
    cfg = preset(name)
    if config_file is not None:
        cfg = merge(cfg, read_config_file(config_file))
    return cfg


def read_config_file(path: str | Path) -> dict:
    """A user's YAML config overrides: a mapping, read safely, with clear errors."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError as exc:
        raise SgemUserError(f"--config file {path} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SgemUserError(f"--config file {path} cannot be read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise SgemUserError(f"--config file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SgemUserError(f"--config file {path} must hold a mapping of config keys")
    return data


def build_task_from_config(cfg: dict, seed: int) -> ClusteredTask:
    """The `ClusteredTask` of a run config's `task` section (name "toy", "timeseries" or
    "images"; an image task is clustered at full resolution, then average-pooled to
    `image_size`, see `sgem.data.images.build_image_task` and `downsample`)."""
    params = dict(cfg)
    name = params.pop("name")
    if name in BUILDERS:
        return BUILDERS[name](params, seed)
    if name == "toy":
        return make_toy_task(seed=seed, **params)
    if name == "timeseries":
        source = params.pop("source")
        directory = params.pop("directory")
        domains = params.pop("domains")
        if source == "offline":
            return make_timeseries_task(
                directory, offline=True, names=domains, seed=seed, name="timeseries", **params
            )
        if source == "monash":
            directory = directory or os.environ.get("SGEM_MONASH_DIR")
            if not directory:
                raise SgemUserError(
                    "the Monash time-series task needs the directory holding the .tsf files: "
                    "set task.directory in a --config YAML file, or $SGEM_MONASH_DIR"
                )
            return make_timeseries_task(
                directory, names=domains, seed=seed, name="timeseries", **params
            )
        raise SgemUserError(
            f"unknown time-series source {source!r}; expected 'offline' (the shared stand-ins) "
            "or 'monash' (the real files in task.directory)"
        )
    if name == "images":
        return downsample(build_image_task(params, seed), params.get("image_size"))
    raise SgemUserError(
        f"unknown task {name!r}; available: {sorted(['images', 'timeseries', 'toy', *BUILDERS])}"
    )


def config_fingerprint(run_cfg: dict) -> str:
    """A stable hash of a run config: the store refuses to continue another run's work."""
    text = json.dumps(run_cfg, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_experiment(
    name: str = "toy",
    seed: int = 0,
    out: str | Path | None = None,
    progress: bool = True,
    config_file: str | Path | None = None,
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


def validate_run(run_cfg: dict, executor: str = "inline", workers: int = 2) -> None:
    """Check a run config and the execution flags before anything is written, so a typo
    never claims a run directory."""
    seed = run_cfg.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SgemUserError(f"the seed must be an integer >= 0, got {seed!r}")
    if executor not in EXECUTORS:
        raise SgemUserError(f"unknown executor {executor!r}; choose one of {list(EXECUTORS)}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise SgemUserError(f"--workers must be an integer >= 1, got {workers!r}")
    SearchConfig.from_dict(run_cfg["search"])
    build_space(run_cfg["space"])
    threads = run_cfg.get("torch_threads")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise SgemUserError(f"torch_threads must be an integer >= 1, got {threads!r}")
    budget = run_cfg.get("time_budget")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, int | float) or budget <= 0
    ):
        raise SgemUserError(f"time_budget must be a number of seconds > 0, got {budget!r}")


def run_config(
    run_cfg: dict,
    out: str | Path,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
) -> dict:
    """Run a complete run config (task, space, search, seed, ...) into run directory `out`:
    the one experiment path behind `sgem run`, `sgem fit` and the Python API."""
    started = time.perf_counter()
    if str(out).strip() == "":
        raise SgemUserError("the output directory is empty; give --out DIR")
    validate_run(run_cfg, executor, workers)
    rundir = RunDirectory(out)
    if rundir.is_complete and rundir.read_config().get("run") == run_cfg:
        result = rundir.read_result()
        result["reused"] = True
        return result
    # the data is read before the directory is claimed: a bad file claims nothing
    torch.set_num_threads(int(run_cfg["torch_threads"]))
    task = build_task_from_config(run_cfg["task"], int(run_cfg["seed"]))
    rundir.prepare({"run": run_cfg, "versions": versions()})
    with rundir.lock():
        return _execute(
            run_cfg,
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
    out: str | Path,
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
    run_cfg = rundir.load_for_resume()["run"]
    with rundir.lock():
        return _execute(
            run_cfg, rundir, progress, True, executor, workers, ray_address, gpus_per_task
        )


def _execute(
    run_cfg: dict,
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
    start = time.perf_counter() if started is None else started
    seed = int(run_cfg["seed"])
    torch.set_num_threads(int(run_cfg["torch_threads"]))
    if task is None:
        task = build_task_from_config(run_cfg["task"], seed)
    space = build_space(run_cfg["space"])
    search_cfg = SearchConfig.from_dict(run_cfg["search"])
    # a resumed run whose trace has iterations must find its store (never restart silently)
    must_exist = resume and rundir.file(TRACE).exists() and rundir.file(TRACE).stat().st_size > 0
    store = ObservationStore(
        task.n_clusters,
        rundir.file(STORE),
        fingerprint=config_fingerprint(run_cfg),
        must_exist=must_exist,
    )

    def listener(event: str, payload: dict) -> None:
        if event == "iteration":
            rundir.append(TRACE, payload["row"])
        elif event == "restored":
            rundir.rewrite_trace(payload["trace"])

    device = str(resolve_device(run_cfg.get("device", "cpu")))
    plan = None
    if run_cfg.get("time_budget"):
        search_cfg, plan = _budget_plan(run_cfg, rundir, task, space, search_cfg, device, start)
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
                task, store=store, executor=executor, resume=resume, deadline=_deadline(plan)
            )
        finally:
            if not isinstance(executor, str):
                executor.close()
    finally:
        store.close()
    moe, report = train_final_moe(
        task,
        search.trainer_,
        found.assignment,
        found.architectures,
        steps=search_cfg.final_steps,
        seed=seed,
        epochs=run_cfg.get("final_epochs"),
        crps_samples=int(run_cfg.get("crps_samples", 100)),  # forecasting tasks only
    )
    result = _result_json(task, found, report.to_json(), seed, time.perf_counter() - start)
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
        moe,
        search.trainer_.n_out,
        metrics=model_metrics(result),
        info={
            "seed": seed,
            "method": "sgem",
            "crps_samples": int(run_cfg.get("crps_samples", 100)),
            "torch_threads": int(run_cfg["torch_threads"]),
            "encoding": task.meta.get("encoding"),
            "target_standardisation": task.meta.get("target_standardisation"),
            "target": task.meta.get("target"),
            "freq": task.meta.get("freq"),
        },
    )
    result["model"] = MODEL_DIR
    rundir.write_result(result)
    from .report import plot_convergence, plot_routing_2d

    plot_convergence(found.trace, rundir.file("convergence.png"), title=f"SGEM, seed {seed}")
    if task.input_shape == (2,):
        plot_routing_2d(
            task,
            found.assignment,
            rundir.file("routing.png"),
            architectures=[a.key for a in found.architectures],
            title=f"SGEM routing (seed {seed}, oracle match {found.oracle_match})",
        )
    if run_cfg["task"]["name"] == "images":
        try:
            from .report_images import plot_run_representatives

            plot_run_representatives(rundir.path, task=task)
        except Exception as exc:  # a figure must never fail a finished run
            log.warning("could not draw the cluster representatives of %s: %s", rundir.path, exc)
    return result


PLAN = "budget_plan.json"


def _deadline(plan: dict | None) -> float | None:
    """When the EM loop must stop to leave time for the finalisation and the final retrain
    (a `time.perf_counter()` value), from a budget plan written in this process."""
    if plan is None:
        return None
    t = plan["candidate_seconds"]
    reserve = plan["final_retrain_seconds_estimate"] + 2.0 * 8 * t  # ~8 finalisation trainings
    return plan["_started"] + plan["budget_seconds"] - reserve


def _budget_plan(
    run_cfg: dict,
    rundir: RunDirectory,
    task: ClusteredTask,
    space,
    search_cfg: SearchConfig,
    device: str,
    start: float,
) -> tuple[SearchConfig, dict]:
    """The search config planned to the run's time budget. The plan is written once and
    reused on resume, so a resumed run searches exactly what the original planned."""
    from dataclasses import replace

    from .budget import pilot_seconds, plan_search
    from .train.trainer import Trainer

    file = rundir.file(PLAN)
    if file.exists():
        plan = json.loads(file.read_text())
    else:
        trainer = Trainer(task, space, search_cfg.train, device)
        t = pilot_seconds(task, trainer, space, int(run_cfg["seed"]))
        n_fit = len(task.train) + len(task.val)
        if run_cfg.get("final_epochs"):  # epochs over train + val, summed over experts
            batch = min(search_cfg.train.batch_size or n_fit, n_fit)
            final = run_cfg["final_epochs"] * n_fit / batch / search_cfg.train.steps
        else:
            final = search_cfg.n_experts * search_cfg.final_steps / search_cfg.train.steps
            final *= max(1.0, n_fit / len(task.train) / search_cfg.n_experts)
        seconds = float(run_cfg["time_budget"]) - (time.perf_counter() - start)
        _, plan = plan_search(search_cfg, seconds, t, final)
        file.write_text(json.dumps(plan, indent=1))
    keys = ("n_init", "n_iterations", "final_candidates", "finalist_budget", "refit_budget")
    plan["_started"] = time.perf_counter()  # this process's clock: a resume gets a new budget
    return replace(search_cfg, **{k: plan[k] for k in keys if k in plan}), plan


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
    lines.append(
        f"  trained candidates: {result['n_trained']}, wall clock: {result['wall_seconds']:.1f} s"
    )
    return "\n".join(lines)


__all__ = [
    "PRESETS",
    "build_space",
    "build_task_from_config",
    "load_config",
    "resume_experiment",
    "run_experiment",
    "summarise",
]
