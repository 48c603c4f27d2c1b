"""Scoring the members on validation and on the holdout, and the greedy weighted ensemble.

Validation decides (every member's validation outputs are out of sample); the holdout
reports (no choice was made on it). Scores use the same per-sample NLL as the search and
the final MoE (`sgem.train.losses.per_sample_nll`), plus accuracy or RMSE / CRPS where
they apply.

The ensemble is greedy ensemble selection with replacement (Caruana et al. 2004, the
weighted ensemble of AutoGluon): start empty, repeatedly add the member whose addition
lowers the validation NLL of the mixture most (a table's regression: the squared error of
its mean, `combination_scores`), weights = how often each was added. The
mixture is of predictive distributions (probabilities, or Student-t densities), so its NLL
is never above the weighted mean of its members' NLLs.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..data.task import ClusteredTask, Split
from ..methods.result import MethodResult
from ..moe.combination import (
    WQL_GRID,
    log_density,
    member_quantiles,
    mixed_log_density,
    mixture_mean,
    mixture_nll,
    quantile_loss,
    sample_nll,
    stacked_locations,
)
from ..moe.scoring import method_scores
from .series_members import SUBSET

#: greedy ensemble selection: rounds (the weights' resolution is 1 / ROUNDS)
ROUNDS = 25


def greedy_ensemble(
    outs: list[np.ndarray],
    y: np.ndarray,
    loss: str,
    rounds: int = ROUNDS,
    point: bool = False,
    first: int = 0,
) -> np.ndarray:
    """Caruana's greedy selection with replacement on validation: the weights (sum 1) of
    the mixture of the members' predictive distributions with the lowest NLL, or with
    `point` the lowest squared error of its mean (`combination_scores`); members before
    `first` get no weight (1: the MoE, whose final training the budget cut)."""
    score = combination_scores(outs, y, loss, point)
    return _greedy(len(outs), lambda w: -float(score(w).mean()), rounds, first)


def combination_scores(outs: list[np.ndarray], y: np.ndarray, loss: str, point: bool = False):
    """A function (weights, rows=all) -> each row's score (higher is better) of the
    members' weighted combination: the log density of their mixture, or with `point` (a
    table's regression) minus the squared error of the mixture's mean, the weighted mean of
    the members' Student-t / Normal locations. Why the point there: a regression is judged
    by the RMSE of what `predict` gives, and a Student-t network wins the log density by
    its tails and per-row scale while its location misses the mean of a skewed target
    (statsmodels' doctor visits: the mixture by log density was 0.84 MoE and 1.08 times
    gradient boosting's test RMSE; firms' investment: 0.92 network, 1.73 times ridge's)."""
    if point:
        locs = stacked_locations(outs)
        target = np.asarray(y, dtype=np.float64).reshape(locs.shape[1:])

        def squared(w: np.ndarray, rows=slice(None)) -> np.ndarray:
            return -((mixture_mean(locs[:, rows], w) - target[rows]) ** 2).mean(axis=1)

        return squared
    logs = np.stack([log_density(o, y, loss) for o in outs])
    return lambda w, rows=slice(None): mixed_log_density(logs[:, rows], w)


def greedy_quantile_ensemble(
    outs: list[np.ndarray], y: np.ndarray, rounds: int = ROUNDS, first: int = 0
) -> np.ndarray:
    """Caruana's greedy selection for forecasters: the weights (sum 1) whose average of the
    members' quantiles has the lowest mean quantile loss (the wQL's levels) on validation;
    members before `first` get none."""
    qs = np.stack([member_quantiles(o, WQL_GRID) for o in outs])
    y = np.asarray(y, dtype=np.float64)

    def loss_of(w: np.ndarray) -> float:
        avg = np.tensordot(w / w.sum(), qs, axes=1)
        return float(quantile_loss(dict(zip(WQL_GRID, avg, strict=True)), y).mean())

    return _greedy(len(outs), loss_of, rounds, first)


def _greedy(n: int, loss_of, rounds: int, first: int = 0) -> np.ndarray:
    """Greedy selection with replacement: `rounds` times add the member (from `first` on)
    whose extra count lowers `loss_of(counts)` most; the weights are the counts' shares."""
    counts = np.zeros(n)
    for _ in range(rounds):
        best, best_j = math.inf, first
        for j in range(first, n):
            trial = counts.copy()
            trial[j] += 1
            loss = loss_of(trial)
            if loss < best - 1e-12:
                best, best_j = loss, j
        counts[best_j] += 1
    return counts / counts.sum()


def scores(out, split: Split, task: ClusteredTask, seed: int, crps_samples: int) -> dict:
    """NLL, accuracy or RMSE / CRPS and the 80 % interval's coverage of `out` on `split`
    (model units), as `sgem.moe.scoring.method_scores` scores every method."""
    raw = method_scores(
        task,
        torch.as_tensor(out, dtype=torch.float64),
        split,
        crps_samples=crps_samples,
        seed=seed,
    )
    keys = ("test_nll", "test_accuracy", "test_rmse", "test_crps", "test_coverage_80")
    return {k.removeprefix("test_"): raw[k] for k in keys if raw.get(k) is not None}


def scored(out: np.ndarray) -> np.ndarray:
    """Which samples an output has (finite everywhere): all but a cut-short member's rest."""
    return np.isfinite(np.asarray(out)).reshape(len(out), -1).all(1)


def rows(
    task: ClusteredTask,
    members: list[MethodResult],
    has_val: np.ndarray,
    seed: int,
    crps_samples: int,
) -> list[dict]:
    """One row per member (a `MethodResult` with validation and holdout outputs):
    validation and holdout scores, seconds, note. A member scored on some of the windows
    (NaN outputs elsewhere: a classical reference the budget cut short) is scored on those,
    and its row says on which (`subset`)."""
    out = []
    for m in members:
        row: dict = {"model": m.method, "kind": m.kind, "seconds": round(m.seconds, 3)}
        if m.val_output is not None:
            on = has_val & scored(m.val_output)
            if on.any():
                row["validation"] = scores(
                    m.val_output[on], task.val.subset(np.flatnonzero(on)), task, seed, crps_samples
                )
        if m.test_output is not None:
            on = scored(m.test_output)
            holdout = task.test if on.all() else task.test.subset(np.flatnonzero(on))
            row["holdout"] = scores(m.test_output[on], holdout, task, seed, crps_samples)
        if m.extra.get(SUBSET):
            row["subset"] = m.extra[SUBSET]
        if m.note:
            row["note"] = m.note
        out.append(row)
    return out


__all__ = [
    "ROUNDS",
    "combination_scores",
    "greedy_ensemble",
    "greedy_quantile_ensemble",
    "log_density",
    "mixture_nll",
    "rows",
    "sample_nll",
    "scored",
    "scores",
]
