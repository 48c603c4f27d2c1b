"""What every baseline shares: the interface, the setup, random search and final training.

A baseline is an object with a `name`, a `uses_domain_labels` flag and
`fit_evaluate(task, setup, seed) -> dict`. The dict always holds `method`, `test_nll`,
`seconds` and `uses_domain_labels`; forecasting tasks add `test_crps` (sample-based, the
paper's metric) and `test_crps_closed_form`; classification tasks `test_accuracy`;
cluster-gated methods their `assignment` (expert per cluster), `oracle_match` (Hungarian
agreement with the task's oracle partition, when it has one), `architectures` and
`n_trained` (candidate trainings spent on search).

The search-based baselines are written over (task, space, trainer) only, so any modality
reuses them; they train candidates with the same `Trainer` and the same content-derived
seeds as SGEM (`sgem.execution.executors.job_seed`) and all end in `sgem.final.run_final`,
the final stage SGEM uses (retrain on train + validation, test once).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask
from ..execution.executors import job_seed
from ..final.champion import champion_cell
from ..final.expert_fit import steps_for_epochs
from ..final.length import adam_length, resolve_length
from ..final.protocol import FinalProtocol
from ..final.stage import run_final
from ..forecast import task_test_scores
from ..metrics import partition_match
from ..moe.scoring import evaluate_forecasts
from ..space.arch import Arch, CellSpace
from ..train.losses import per_sample_nll, region_loss
from ..train.trainer import TrainConfig, Trainer


@dataclass
class BaselineSetup:
    """The shared protocol of one benchmark: space, training and search budget.

    Attributes:
        space: the cell search space (search-based baselines only).
        train: how candidates are trained during search (and the final batch size / lr).
        n_experts: K, the experts of every MoE method.
        budget: candidate trainings a search-based baseline may spend.
        final_steps: optimiser steps of the final retraining on train + validation, per
            expert (also the training length of the direct forecasters DLinear and MoLE).
        final_epochs: if set, the final retraining runs this many epochs per expert instead.
        final_length: a config name of `sgem.final.protocol.FINAL_LENGTHS`: "fixed" (the
            lengths above) or "validation..." (every final network's length chosen on
            validation first, then retrained on train + validation, `sgem.final.length`);
            cluster-gated methods through `sgem.final.run_final` (`protocol()`), DLinear
            and MoLE through `fit_network`.
        crps_samples: samples per forecast for the sample-based CRPS.
        device: torch device for training.
        cache: results shared between baselines of one (task, seed), e.g. the best single
            architecture that Global single, BestArch x K and Geometry routing all use.
    """

    space: CellSpace | None = None
    train: TrainConfig = field(default_factory=TrainConfig)
    n_experts: int = 4
    budget: int = 24
    final_steps: int = 600
    final_epochs: float | None = None
    final_length: str = "fixed"
    crps_samples: int = 100
    device: str = "cpu"
    cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.n_experts < 1 or self.budget < 1 or self.final_steps < 1:
            raise ValueError(
                f"need n_experts, budget and final_steps >= 1, got {self.n_experts}, "
                f"{self.budget}, {self.final_steps}"
            )
        self.protocol()  # an unknown final length fails here, not after a search

    def protocol(self) -> FinalProtocol:
        """The final stage of every cluster-gated baseline (SGEM's protocol, no second look)."""
        return FinalProtocol.from_name(
            self.final_length,
            self.final_steps,
            final_epochs=self.final_epochs,
            crps_samples=self.crps_samples,
        )

    def require_space(self, method: str) -> CellSpace:
        if self.space is None:
            raise ValueError(f"{method} searches architectures: give BaselineSetup(space=...)")
        return self.space


@runtime_checkable
class Baseline(Protocol):
    """One comparison method: fit on train (+ validation), evaluate once on test."""

    name: str
    uses_domain_labels: bool

    def fit_evaluate(self, task: ClusteredTask, setup: BaselineSetup, seed: int) -> dict: ...


# -- helpers for cluster-gated, search-based methods ------------------------------------


def random_partition(n_clusters: int, n_experts: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random cluster -> expert map in which every expert gets a cluster."""
    if n_experts > n_clusters:
        raise ValueError(
            f"cannot split {n_clusters} clusters among {n_experts} experts so that each gets "
            "one; use fewer experts"
        )
    out = rng.integers(n_experts, size=n_clusters)
    order = rng.permutation(n_clusters)
    out[order[:n_experts]] = np.arange(n_experts)
    return out.astype(np.int64)


def make_trainer(task: ClusteredTask, setup: BaselineSetup, method: str) -> Trainer:
    return Trainer(task, setup.require_space(method), setup.train, device=setup.device)


class CandidateLog:
    """Trains (arch, region) candidates once each, with SGEM's content-derived seeds."""

    def __init__(self, trainer: Trainer, seed: int) -> None:
        self.trainer = trainer
        self.seed = seed
        self.losses: dict[tuple[Arch, bytes], np.ndarray] = {}
        self.n_trained = 0

    def train(self, arch: Arch, region: np.ndarray) -> np.ndarray:
        region = np.asarray(region, dtype=bool)
        key = (arch, region.tobytes())
        if key not in self.losses:
            out = self.trainer.train(arch, region, job_seed(self.seed, arch, region))
            self.losses[key] = out.losses
            self.n_trained += 1
        return self.losses[key]

    def region_score(self, arch: Arch, region: np.ndarray) -> float:
        """Validation-size weighted mean loss on the region (SGEM's per-expert criterion)."""
        losses = self.train(arch, region)
        return region_loss(losses, region, self.trainer.task.val_cluster_sizes)

    def objective(self, arch: Arch, region: np.ndarray) -> float:
        """The region's term of the measured objective: sum of |C_m| * loss_m (lower better)."""
        losses = self.train(arch, region)
        sizes = self.trainer.task.cluster_sizes
        return float(np.sum(sizes[region] * losses[region]))


def search_region(
    log: CandidateLog,
    space: CellSpace,
    region: np.ndarray,
    n_candidates: int,
    rng: np.random.Generator,
    include: Sequence[Arch] = (),
) -> tuple[Arch, float]:
    """Random search on one region: the candidate of lowest region validation loss."""
    candidates = list(dict.fromkeys([*include, *space.sample_many(max(n_candidates, 1), rng)]))
    scored = [(log.region_score(a, region), i, a) for i, a in enumerate(candidates)]
    best = min(scored)
    return best[2], best[0]


def _best_single_key(task: ClusteredTask, seed: int, budget: int) -> tuple:
    return ("best_single", id(task), seed, budget)


def remember_best_single(
    cache: dict, task: ClusteredTask, seed: int, budget: int, found: tuple[Arch, int]
) -> None:
    """Record a best-single-cell search made elsewhere (e.g. read from a saved table), so
    `best_single_architecture` returns it for (task, seed, budget) instead of searching."""
    cache[_best_single_key(task, seed, budget)] = found


def best_single_architecture(
    task: ClusteredTask, setup: BaselineSetup, seed: int
) -> tuple[Arch, int]:
    """Random search (`setup.budget` architectures) on all clusters: the best global cell.

    Cached in `setup.cache` per (task, seed): Global single, BestArch x K and Geometry
    routing share it, as in the paper (one search, three uses). The search is SGEM's
    champion-cell search (`sgem.final.champion`), so both find the same cell for a budget.
    Returns (arch, trainings).
    """
    key = _best_single_key(task, seed, setup.budget)
    if key not in setup.cache:
        space = setup.require_space("the best single architecture")
        trainer = make_trainer(task, setup, "the best single architecture")
        arch, report = champion_cell(task, trainer, space, setup.budget, seed)
        setup.cache[key] = (arch, report["trainings"])
    return setup.cache[key]


def cluster_moe_result(
    method: str,
    task: ClusteredTask,
    setup: BaselineSetup,
    assignment: np.ndarray,
    architectures: Sequence[Arch],
    seed: int,
    n_trained: int,
    start: float,
    uses_domain_labels: bool = False,
    extra: dict | None = None,
) -> dict:
    """Retrain the cluster-gated MoE on train + validation (SGEM's protocol), test once."""
    trainer = make_trainer(task, setup, method)
    final = run_final(
        task, trainer, np.asarray(assignment), list(architectures), setup.protocol(), seed=seed
    )
    report = final.report
    moe = report.to_json()
    names = task.meta.get("domain_names")
    per_domain = {(names[int(d)] if names else d): v for d, v in moe["per_domain_test_nll"].items()}
    out = {
        "method": method,
        "test_nll": moe["test_nll"],
        "test_crps": moe["test_crps"],
        "test_crps_closed_form": moe["test_crps_closed_form"],
        "test_accuracy": moe["test_accuracy"],
        "per_domain_test_nll": per_domain,
        "assignment": np.asarray(assignment).tolist(),
        "oracle_match": recovery(task, assignment),
        "architectures": [a.key for a in architectures],
        "n_trained": n_trained,
        "uses_domain_labels": uses_domain_labels,
        "seconds": round(time.perf_counter() - start, 3),
        "steps": moe["steps"],
    }
    if "final_length" in moe:
        out["final_length"] = _length_summary(moe["final_length"])
    if "global_networks" in moe:  # warm starts: each cell's global network
        nets = moe["global_networks"]
        out["global_networks"] = dict(zip(nets, _length_summary(list(nets.values())), strict=True))
        out["global_networks_test"] = moe.get("global_networks_test")
    return out | forecast_fields(task, moe.get("forecast")) | (extra or {})


def _length_summary(lengths: list) -> list:
    """The tracking runs without their curves (best step, retraining steps, cap, stop)."""
    return [None if f is None else {k: v for k, v in f.items() if k != "curve"} for f in lengths]


def forecast_fields(task: ClusteredTask, forecast: dict | None) -> dict:
    """Row fields of `sgem.forecast.task_test_scores`: test MASE and wQL (original units),
    per domain (by name), and the per-window test NLL / closed-form CRPS (rounded) for
    paired comparisons; {} when the task is not a windowed forecasting task."""
    if not forecast:
        return {}
    names = task.meta.get("domain_names")

    def by_name(d: dict) -> dict:
        return {str(names[int(k)] if names else k): v for k, v in d.items()}

    return {
        "test_mase": forecast["mase"],
        "test_wql": forecast["wql"],
        "per_domain_test_mase": by_name(forecast["per_domain_mase"]),
        "per_domain_test_wql": by_name(forecast["per_domain_wql"]),
        "mase_seasons": forecast["mase_seasons"],
        "test_nll_per_window": [round(v, 5) for v in forecast["per_window_nll"]],
        "test_crps_cf_per_window": [round(v, 5) for v in forecast["per_window_crps_closed_form"]],
    }


def recovery(task: ClusteredTask, assignment: np.ndarray | None) -> float | None:
    """Hungarian agreement of an assignment with the oracle partition (None if unknown)."""
    if assignment is None or task.oracle_partition is None:
        return None
    return partition_match(np.asarray(assignment), task.oracle_partition)


# -- helpers for the direct forecasters (naive, seasonal naive, DLinear, MoLE) -----------


def require_forecasting(task: ClusteredTask, method: str) -> None:
    if task.loss != "student_t":
        raise ValueError(
            f"{method} is a forecasting baseline and needs a 'student_t' task (context "
            f"windows -> horizon), got loss {task.loss!r}"
        )


def train_and_val(task: ClusteredTask) -> tuple[np.ndarray, np.ndarray]:
    """Context and target windows of train + validation (what the final models fit on)."""
    x = np.concatenate([task.train.x, task.val.x]).reshape(len(task.train) + len(task.val), -1)
    y = np.concatenate([task.train.y, task.val.y])
    return x.astype(np.float32), y.astype(np.float32)


def _adam_stepper(lr: float, batch_size: int | None):
    """`make_step(model, x, y, generator)` -> one Adam step on a minibatch drawn with
    replacement (the direct forecasters' training loop, shared by `fit_network` and its
    validation-tracked length search)."""

    def make_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator):
        n = len(x)
        bs = min(batch_size or n, n)
        opt = torch.optim.Adam(model.parameters(), lr=lr)

        def step() -> None:
            idx = torch.randint(n, (bs,), generator=gen).to(x.device)
            loss = per_sample_nll(model(x[idx]), y[idx], "student_t").mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return step

    return make_step


def fit_network(
    model: nn.Module, task: ClusteredTask, setup: BaselineSetup, seed: int
) -> tuple[nn.Module, int]:
    """Adam on the Student-t NLL over train + validation, in minibatches, like an expert.

    Runs `setup.final_steps` steps, or `setup.final_epochs` epochs; returns (model, steps).
    With `setup.final_length="validation"` the length is chosen first (`adam_length`: a
    copy of `model` trained on the training windows, validation NLL tracked up to 4x that
    length), then scaled by (n_train + n_val) / n_train for the train + validation fit.
    """
    x_np, y_np = train_and_val(task)
    device = torch.device(setup.device)
    x = torch.as_tensor(x_np, device=device)
    y = torch.as_tensor(y_np, device=device)
    n = len(x)
    steps = (
        setup.final_steps
        if setup.final_epochs is None
        else steps_for_epochs(n, setup.final_epochs, setup.train.batch_size)
    )
    make_step = _adam_stepper(setup.train.lr, setup.train.batch_size)
    model = model.to(device)
    rule = resolve_length(setup.final_length)
    if rule is not None:
        n_tr = len(task.train)
        base = (
            setup.final_steps
            if setup.final_epochs is None
            else steps_for_epochs(n_tr, setup.final_epochs, setup.train.batch_size)
        )
        choice = adam_length(
            model,
            x[:n_tr],
            y[:n_tr],
            x[n_tr:],
            y[n_tr:],
            seed,
            base,
            rule,
            make_step,
            keep_best_state=not rule.refit,
        )
        if not rule.refit and choice.best_state is not None:  # the tracked network is final
            model.load_state_dict(choice.best_state)
            return model.eval(), choice.best_step
        steps = choice.refit_steps
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    step = make_step(model, x, y, gen)
    for _ in range(steps):
        step()
    return model.eval(), steps


def forecast_result(
    method: str,
    task: ClusteredTask,
    setup: BaselineSetup,
    output: torch.Tensor,
    seed: int,
    start: float,
    extra: dict | None = None,
) -> dict:
    """Score (B, H, 3) test forecasts once: NLL, sample and closed-form CRPS."""
    scores = evaluate_forecasts(output, task, n_samples=setup.crps_samples, seed=seed)
    names = task.meta.get("domain_names")
    per_domain = {str(names[d] if names else d): v for d, v in scores["per_domain_nll"].items()}
    out: dict[str, Any] = {
        "method": method,
        "test_nll": scores["nll"],
        "test_crps": scores["crps"],
        "test_crps_closed_form": scores["crps_closed_form"],
        "test_accuracy": None,
        "per_domain_test_nll": per_domain,
        "assignment": None,
        "oracle_match": None,
        "architectures": None,
        "n_trained": 0,
        "uses_domain_labels": False,
        "seconds": round(time.perf_counter() - start, 3),
    }
    return out | forecast_fields(task, task_test_scores(output, task)) | (extra or {})


def student_t_output(loc: np.ndarray, scale: np.ndarray, df: np.ndarray) -> torch.Tensor:
    """Stack (loc, scale, df), each (B, H), into the (B, H, 3) forecaster output."""
    loc, scale, df = np.broadcast_arrays(loc, scale, df)
    return torch.as_tensor(np.stack([loc, scale, df], axis=-1), dtype=torch.float64)
