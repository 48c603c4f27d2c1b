"""The leaderboard's references: what a user would otherwise pick, as methods
(`fit_evaluate(task, budget) -> MethodResult`) that predict the same samples as the
searched MoE.

Every reference returns a `MethodResult` with two sets of raw outputs in the task's model
units (logits, or the Student-t's (loc, scale, df) per step): `val_output` on the
VALIDATION split from a fit on the training split only (out of sample, so members are
compared and combined there), and `test_output` on the HOLDOUT (the test split) from a fit
on train + validation (the protocol of the final MoE, so the holdout row of every member is
comparable; a scikit-learn member that a time budget fits on a sample: one fit on the
training split predicts both); `fitted` keeps what a saved model needs of it (a user's
table's scikit-learn member: refitted on every row, the holdout's too). References:

* `GlobalNetwork`: one network of an expert's cell trained on every cluster (the
  reference the MoE must beat to be worth its experts); shippable, since a cluster-gated
  MoE whose clusters all go to it is that network;
* tables: `LinearModel` (logistic / ridge regression) and `GradientBoosting` (histogram
  gradient boosting), scikit-learn;
* series: `ClassicalReference`: seasonal naive and statsforecast's AutoETS / AutoTheta,
  in `series_members.py`.

A reference that needs training is skipped, and says why, once the time budget's fence has
passed (`sgem.train.time_fence`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask, Split
from ..execution.jobs import job_seed
from ..final.calibration import retrain_seconds
from ..final.expert_fit import steps_for_epochs, train_val_tensors
from ..final.length import resolve_length
from ..methods.budget import MethodBudget
from ..methods.protocol import Method
from ..methods.result import Fitted, MethodResult
from ..moe.averaged import AveragedExpert
from ..space.arch import Arch, CellSpace
from ..space.tabular import TabularSpace
from ..space.timeseries import TimeSeriesSpace
from ..train.step_probe import StepCost, step_cost
from ..train.time_fence import fence, fence_passed
from ..train.trainer import Trainer
from .boosting_settings import tuning_seconds
from .series_members import ClassicalReference
from .table_members import GradientBoosting, LinearModel

#: up to this many train + validation rows, a saved global network gets out-of-fold outputs
#: as the scikit-learn members do (`network_out_of_fold`: five network fits; above, its
#: holdout of a fifth of the rows decides well enough)
MAX_NETWORK_OUT_OF_FOLD_ROWS = 5_000


def reference_budget(
    trainer: Trainer,
    seed: int,
    *,
    steps: int,
    epochs: float | None = None,
    length: str = "fixed",
    crps_samples: int = 100,
) -> MethodBudget:
    """The references' budget on `trainer`'s task: the final stage's lengths, the run's seed,
    and `trainer` itself as the run's one trainer (no reference builds another). Without a
    time budget (no fence) gradient boosting's settings are chosen as a user's table's are
    before its search (`sgem.leaderboard.boosting_settings`; on the toy, seed 0, its holdout
    NLL was 0.295 with scikit-learn's defaults against 0.111 on validation, and the saved
    combination gave it 0.48; chosen, 0.137, and the MoE is saved alone); with one, these
    references come after the search, and take the defaults."""
    budget = MethodBudget(
        seed=seed,
        space=trainer.space,
        train=trainer.config,
        final_steps=steps,
        final_epochs=epochs,
        final_length=length,
        crps_samples=crps_samples,
        device=str(trainer.device),
        reference_seconds=tuning_seconds(None) if fence() is None else None,
    )
    budget.shared.adopt(trainer, budget.device)
    return budget


def reference_methods(space: CellSpace) -> list[Method]:
    """The references of a space's kind beside the global networks: scikit-learn for
    tables, seasonal naive / AutoETS / AutoTheta for series, none for images."""
    if isinstance(space, TabularSpace):
        return [LinearModel(), GradientBoosting()]
    if isinstance(space, TimeSeriesSpace):
        return [
            ClassicalReference("SeasonalNaive"),
            ClassicalReference("AutoETS"),
            ClassicalReference("AutoTheta"),
        ]
    return []


# -- the global network -----------------------------------------------------------------------
@torch.no_grad()
def _predict(trainer: Trainer, net: nn.Module, split: Split) -> np.ndarray:
    x = torch.as_tensor(split.x, dtype=torch.float32, device=trainer.device)
    return trainer.predict(net.eval(), x).double().cpu().numpy()


def _final_steps(budget: MethodBudget, trainer: Trainer, n: int) -> int:
    """The optimiser steps of a network trained on `n` samples as the final experts train:
    `budget.final_steps`, or `budget.final_epochs` passes."""
    return _steps(trainer, n, budget.final_steps, budget.final_epochs)


def _steps(trainer: Trainer, n: int, steps: int, epochs: float | None) -> int:
    """`steps`, or `epochs` passes over `n` samples in `trainer`'s batches."""
    return steps if epochs is None else steps_for_epochs(n, epochs, trainer.config.batch_size)


class GlobalNetwork:
    """One network of `cell` on every cluster: `budget.final_steps` (or
    `budget.final_epochs` passes, as the final experts train) on the training split, scored
    on validation; then the same on train + validation, scored on the holdout (and
    shipped; under a twins protocol, `sgem.moe.averaged`, both networks averaged, as the final
    experts are). Where the budget's fence cuts the refit on train + validation, the network
    of the training split is scored on the holdout and shipped instead: it is the network
    validation judged, trained to its length. (A 5-minute fit of 400 hourly series cut the
    refit of the best global network - validation NLL -0.82 against the MoE's -0.70 - and
    the leaderboard could not fall back on it.) Where the fence cuts the first training, the
    network is scored but not shipped, and the refit is skipped."""

    kind = "network"
    uses_domain_labels = False

    def __init__(self, cell: Arch) -> None:
        self.cell = cell
        self.name = f"global network ({cell.key})"

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        trainer = budget.trainer(task, self.name)
        start = time.perf_counter()
        if fence_passed():
            return self._result(budget, note="skipped: the time budget ended")
        cell = self.cell
        every = np.ones(task.n_clusters, dtype=bool)
        dev = trainer.device
        seed = job_seed(budget.seed, cell, every)
        x_tr = torch.as_tensor(task.train.x, dtype=torch.float32, device=dev)
        y_tr = torch.as_tensor(task.train.y, device=dev)
        on_train = trainer.fit(
            cell, x_tr, y_tr, seed=seed, steps=_final_steps(budget, trainer, len(x_tr))
        )
        val = _predict(trainer, on_train, task.val)
        # cut before its length: what validation saw is not a network to ship (no refit)
        cut_first = fence_passed()
        net, note = on_train, "trained for fewer steps: the time budget ended" if cut_first else ""
        if not cut_first:
            x_all, y_all = train_val_tensors(task, dev)
            refit = trainer.fit(
                cell, x_all, y_all, seed=seed, steps=_final_steps(budget, trainer, len(x_all))
            )
            rule = resolve_length(budget.final_length)
            if fence_passed():  # the refit was cut: the training split's network, complete
                note = (
                    "trained on the training split alone: the time budget ended during its "
                    "refit on train + validation"
                )
            elif rule is not None and rule.twins:  # as the final experts are shipped
                net = AveragedExpert([refit, on_train], task.loss)
            else:
                net = refit
        return self._result(
            budget,
            val_output=val,
            test_output=_predict(trainer, net, task.test),
            shippable=not cut_first,
            note=note,
            seconds=time.perf_counter() - start,
            fitted=Fitted(network=net.eval(), cell=cell),
        )

    def _result(self, budget: MethodBudget, **fields: Any) -> MethodResult:
        return MethodResult(
            self.name, budget.seed, kind=self.kind, crps_samples=budget.crps_samples, **fields
        )


#: how many of the experts' cells (largest regions first) get a global network
GLOBAL_CELLS = 2


def global_network_seconds(
    task: ClusteredTask,
    trainer: Trainer,
    cell: Arch,
    steps: int,
    epochs: float | None,
    cost: StepCost,
) -> float:
    """What `GlobalNetwork(cell)` will take on `task`: its two trainings (training split,
    then train + validation) at `cost`, the cell's timed step cost (`step_cost`)."""
    sizes = (len(task.train), len(task.train) + len(task.val))
    return sum(cost.seconds(_steps(trainer, n, steps, epochs)) for n in sizes)


def leaderboard_cells(final, task: ClusteredTask) -> list[Arch]:
    """The cells of the leaderboard's global networks: the experts' distinct cells, largest
    region first (at most `GLOBAL_CELLS`)."""
    sizes = np.bincount(
        np.asarray(final.assignment), weights=task.cluster_sizes, minlength=len(final.architectures)
    )
    order = np.argsort(-sizes, kind="stable")
    cells = [final.architectures[k] for k in order if sizes[k] > 0]
    return list(dict.fromkeys(cells))[:GLOBAL_CELLS]


def after_rounds_seconds(
    task: ClusteredTask,
    trainer: Trainer,
    final,
    steps: int,
    epochs: float | None,
    length: str,
) -> dict[str, float]:
    """What the leaderboard trains after a budget's seed rounds, in seconds, each cell timed
    once on a few optimiser steps (`sgem.train.step_probe`): its global networks
    ("networks") and each expert's retrain for its out-of-sample validation outputs
    ("retrains", none where tracking runs left them: `sgem.final.calibration.retrain_seconds`).
    (Priced at the pilot's average cell, 51 s were left where a GRU cell on 400 hourly
    series took 40 s for one of its two networks, and the budget's fence cut the best
    network of the leaderboard.)"""
    x = torch.as_tensor(task.train.x, dtype=torch.float32, device=trainer.device)
    y = torch.as_tensor(task.train.y, device=trainer.device)
    costs: dict[str, StepCost] = {}

    def cost_of(cell: Arch) -> StepCost:
        if cell.key not in costs:
            costs[cell.key] = step_cost(trainer, cell, x, y)
        return costs[cell.key]

    networks = sum(
        global_network_seconds(task, trainer, c, steps, epochs, cost_of(c))
        for c in leaderboard_cells(final, task)
    )
    retrains = retrain_seconds(task, trainer, final, length, epochs, cost_of)
    return {"networks": networks, "retrains": retrains}


def network_out_of_fold(
    task: ClusteredTask, budget: MethodBudget, cell: Arch, folds: int = 5
) -> tuple[np.ndarray, list[nn.Module]] | None:
    """Outputs of one network of `cell` on every train + validation row (in that order),
    each from a network trained on the other folds as `GlobalNetwork` trains, and those
    fold networks; None where the budget's fence passed before the last fold was done. Why:
    where a user's table's saved model is that network alone, its weight beside the
    scikit-learn members is then fit on every row, as theirs are
    (`sgem.leaderboard.combining`), not on the holdout's few (91 rows of breast cancer chose
    the network alone on one split, 1.7 points below logistic regression on new rows); and
    the fold networks are averaged with the saved one (`sgem.moe.averaged`)."""
    joined = task.train.joined(task.val)
    n = len(joined.y)
    if n > MAX_NETWORK_OUT_OF_FOLD_ROWS:
        return None
    trainer = budget.trainer(task, f"global network ({cell.key}), out of fold")
    seed = job_seed(budget.seed, cell, np.ones(task.n_clusters, dtype=bool))
    x = torch.as_tensor(joined.x, dtype=torch.float32, device=trainer.device)
    y = torch.as_tensor(joined.y, device=trainer.device)
    out: np.ndarray | None = None
    nets: list[nn.Module] = []
    for score in np.array_split(np.random.default_rng(seed).permutation(n), folds):
        if fence_passed():
            return None
        fit = torch.as_tensor(np.setdiff1d(np.arange(n), score), device=trainer.device)
        net = trainer.fit(
            cell, x[fit], y[fit], seed=seed, steps=_final_steps(budget, trainer, len(fit))
        )
        part = _predict(trainer, net, joined.subset(score))
        nets.append(net.eval())
        if out is None:
            out = np.zeros((n, *part.shape[1:]))
        out[score] = part
    return None if fence_passed() or out is None else (out, nets)


__all__ = [
    "GLOBAL_CELLS",
    "MAX_NETWORK_OUT_OF_FOLD_ROWS",
    "GlobalNetwork",
    "after_rounds_seconds",
    "global_network_seconds",
    "leaderboard_cells",
    "network_out_of_fold",
    "reference_budget",
    "reference_methods",
]
