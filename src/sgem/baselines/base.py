"""What every baseline shares: random search, the final training and its result.

A baseline is a method (`sgem.methods.Method`): a `name`, a `uses_domain_labels` flag
and `fit_evaluate(task, budget) -> MethodResult` under a `sgem.methods.MethodBudget`
(the seed is the budget's). Cluster-gated baselines return their final MoE
(`cluster_moe_result`), the direct forecasters their raw test outputs
(`forecast_result`); `MethodResult.row(task)` is the row of either.

The search-based baselines are written over (task, space, trainer) only, so any modality
reuses them; they train candidates with the same `Trainer` and the same content-derived
seeds as SGEM (`sgem.execution.executors.job_seed`) and all end in `sgem.final.run_final`,
the final stage SGEM uses (retrain on train + validation, test once).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask
from ..execution.executors import job_seed
from ..final.champion import champion_cell
from ..final.expert_fit import steps_for_epochs
from ..final.length import adam_length, resolve_length
from ..final.stage import run_final
from ..methods.budget import MethodBudget
from ..methods.protocol import Method
from ..methods.result import MethodResult
from ..metrics import partition_match
from ..space.arch import Arch, CellSpace
from ..train.losses import per_sample_nll, region_loss
from ..train.trainer import Trainer

#: a baseline is a method (the one protocol of `sgem.methods`)
Baseline = Method


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


def make_trainer(task: ClusteredTask, budget: MethodBudget, method: str) -> Trainer:
    """The run's one trainer for `task` (`MethodBudget.trainer`: built once, shared)."""
    return budget.trainer(task, method)


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


def best_single_architecture(task: ClusteredTask, budget: MethodBudget) -> tuple[Arch, int]:
    """Random search (`budget.trainings` architectures) on all clusters: the best global cell.

    Cached in `budget.cache` per (task, seed): Global single, BestArch x K and Geometry
    routing share it, as in the paper (one search, three uses). The search is SGEM's
    champion-cell search (`sgem.final.champion`), so both find the same cell for a budget.
    Returns (arch, trainings).
    """
    key = _best_single_key(task, budget.seed, budget.trainings)
    if key not in budget.cache:
        space = budget.require_space("the best single architecture")
        trainer = make_trainer(task, budget, "the best single architecture")
        arch, report = champion_cell(task, trainer, space, budget.trainings, budget.seed)
        budget.cache[key] = (arch, report["trainings"])
    return budget.cache[key]


def cluster_moe_result(
    method: str,
    task: ClusteredTask,
    budget: MethodBudget,
    assignment: np.ndarray,
    architectures: Sequence[Arch],
    n_trained: int,
    start: float,
    uses_domain_labels: bool = False,
    extra: dict | None = None,
) -> MethodResult:
    """Retrain the cluster-gated MoE on train + validation (SGEM's protocol), test once."""
    result = run_final(
        task,
        make_trainer(task, budget, method),
        np.asarray(assignment),
        list(architectures),
        budget.protocol(),
        seed=budget.seed,
        method=method,
        n_trained=n_trained,
        started=start,
        uses_domain_labels=uses_domain_labels,
    )
    result.extra = dict(extra or {})
    return result


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
    model: nn.Module, task: ClusteredTask, budget: MethodBudget
) -> tuple[nn.Module, int]:
    """Adam on the Student-t NLL over train + validation, in minibatches, like an expert.

    Runs `budget.final_steps` steps, or `budget.final_epochs` epochs; returns (model, steps).
    With `budget.final_length="validation"` the length is chosen first (`adam_length`: a
    copy of `model` trained on the training windows, validation NLL tracked up to 4x that
    length), then scaled by (n_train + n_val) / n_train for the train + validation fit.
    """
    seed = budget.seed
    x_np, y_np = train_and_val(task)
    device = torch.device(budget.device)
    x = torch.as_tensor(x_np, device=device)
    y = torch.as_tensor(y_np, device=device)
    n = len(x)
    steps = (
        budget.final_steps
        if budget.final_epochs is None
        else steps_for_epochs(n, budget.final_epochs, budget.train.batch_size)
    )
    make_step = _adam_stepper(budget.train.lr, budget.train.batch_size)
    model = model.to(device)
    rule = resolve_length(budget.final_length)
    if rule is not None:
        n_tr = len(task.train)
        base = (
            budget.final_steps
            if budget.final_epochs is None
            else steps_for_epochs(n_tr, budget.final_epochs, budget.train.batch_size)
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
    budget: MethodBudget,
    output: torch.Tensor,
    start: float,
    extra: dict | None = None,
) -> MethodResult:
    """A direct forecaster's (B, H, 3) test forecasts, scored by its row like every method's."""
    return MethodResult(
        method,
        budget.seed,
        seconds=time.perf_counter() - start,
        test_output=output,
        crps_samples=budget.crps_samples,
        extra=dict(extra or {}),
    )


def student_t_output(loc: np.ndarray, scale: np.ndarray, df: np.ndarray) -> torch.Tensor:
    """Stack (loc, scale, df), each (B, H), into the (B, H, 3) forecaster output."""
    loc, scale, df = np.broadcast_arrays(loc, scale, df)
    return torch.as_tensor(np.stack([loc, scale, df], axis=-1), dtype=torch.float64)
