"""Candidates early-stopped on their own region (`TrainConfig.early_stop_evals`).

Why: a candidate trained for a short fixed length is ranked by how fast it learns, while the
final expert of `final_length: validation` trains until its region's validation NLL stops
improving. On the forecasting mixture the two rankings disagreed (within a region, cells
that looked best after 100 steps were mostly the worst after the final training), and a
fixed step count also favours small regions (more passes over fewer samples) over the larger
ones that win once trained to convergence. Scoring each candidate at its best evaluation on
the clusters it trains on makes the search measure what the final model will get.

`RegionEarlyStopping` is the monitor `Trainer.optimise` calls after every step: every
`steps // early_stop_evals` steps it scores all M clusters in one validation pass (the
vector the surrogate learns), keeps the vector of the evaluation with the lowest mean NLL
over the mask's validation samples, and stops after `early_stop_patience` evaluations
without a new best. Clusters outside the mask are reported at that same step: they never
take part in the choice.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from torch import nn


class RegionEarlyStopping:
    """Tracks a candidate's per-cluster validation NLL; see the module docstring.

    Args:
        cluster_losses: the (M,) mean validation NLL per cluster of a model in eval mode
            (`Trainer.cluster_losses`).
        val_counts: (M,) validation samples per cluster (the region's mean weights by them).
        mask: (M,) the clusters the candidate trains on.
        evals: evaluations over the training's total steps.
        patience: evaluations without a new best before stopping (None: never stop early).
    """

    def __init__(
        self,
        cluster_losses: Callable[[nn.Module], np.ndarray],
        val_counts: np.ndarray,
        mask: np.ndarray,
        evals: int,
        patience: int | None,
    ) -> None:
        if evals < 1 or (patience is not None and patience < 1):
            raise ValueError(f"need evals >= 1 and patience >= 1 or None, got {evals}, {patience}")
        self.cluster_losses = cluster_losses
        self.evals = int(evals)
        self.patience = patience
        counts = np.asarray(val_counts, dtype=np.float64)
        weights = counts * np.asarray(mask, dtype=bool)
        if weights.sum() <= 0:  # no validation sample in the region: judge by all clusters
            weights = counts
        self.weights = weights / max(weights.sum(), 1.0)
        self.best = math.inf
        self.best_step = 0
        self.best_losses: np.ndarray | None = None
        self.last_losses: np.ndarray | None = None
        self.since_best = 0
        self.curve: list[tuple[int, float]] = []

    def __call__(self, model: nn.Module, done: int, total: int) -> bool:
        """Called after optimiser step `done` of `total`; True stops the training."""
        every = max(1, total // self.evals)
        if done % every and done != total:
            return False
        model.eval()
        losses = self.cluster_losses(model)
        model.train()
        self.last_losses = losses
        score = float(np.sum(self.weights * losses)) if np.isfinite(losses).all() else math.inf
        self.curve.append((done, score))
        if score < self.best:
            self.best, self.best_step, self.best_losses, self.since_best = score, done, losses, 0
            return False
        self.since_best += 1
        return self.patience is not None and self.since_best >= self.patience

    @property
    def losses(self) -> np.ndarray:
        """The per-cluster vector at the best evaluation (the last one if none was finite)."""
        if self.best_losses is not None:
            return self.best_losses
        if self.last_losses is None:
            raise RuntimeError(
                "the candidate was never evaluated (its training stopped before the first "
                "evaluation, e.g. at the time budget's fence)"
            )
        return self.last_losses
