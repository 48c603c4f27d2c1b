"""Is a combination worth saving? Gains judged on samples its weights were never fit on:
k-fold cross-fitting of a weight fit and the standard error of a paired gain, shared by
the combination's tests (`sgem.leaderboard.combining`, `sgem.leaderboard.table_weights`)."""

from __future__ import annotations

import numpy as np

from .board import combination_scores, greedy_ensemble

#: a table's combination is saved where its cross-fitted validation gain over the MoE alone
#: (`cross_fitted_gain`) exceeds this many standard errors. (Before, the gain was measured on
#: the samples the weights were fit on, which flatters the combination: 2 SE were needed, and
#: on breast cancer the network was kept over a logistic regression 1.8 points better.)
COMBINE_MARGIN_SE = 1.0


def cross_fitted_gain(
    outs: list[np.ndarray], y: np.ndarray, loss: str, folds: int = 5, point: bool = False
) -> np.ndarray:
    """Per validation sample, the log density (with `point`: minus the squared error of
    the mean, `combination_scores`) of the greedy combination whose weights were fit on
    the other folds, minus the MoE's own (`outs[0]`): what combining gains on samples its
    weights never saw. (Halves were too few: a network right on most rows and confidently
    wrong on a handful won one half outright and lost the other.)"""
    score = combination_scores(outs, y, loss, point)
    moe_alone = np.eye(len(outs))[0]

    def gain_on(fit: np.ndarray, rows: np.ndarray) -> np.ndarray:
        w = greedy_ensemble([o[fit] for o in outs], y[fit], loss, point=point)
        return score(w, rows) - score(moe_alone, rows)

    return cross_fitted(len(y), gain_on, folds)


def cross_fitted(n: int, gain_on, folds: int = 5) -> np.ndarray:
    """Per sample, `gain_on(fit, score)` for the fold `score` it is in, whatever it fits
    chosen on the other folds `fit` (one seeded split of the n samples)."""
    gain = np.zeros(n)
    for score in np.array_split(np.random.default_rng(0).permutation(n), folds):
        fit = np.setdiff1d(np.arange(n), score)
        if len(fit) and len(score):
            gain[score] = gain_on(fit, score)
    return gain


def standard_error(gain: np.ndarray) -> float:
    """The standard error of a paired gain's mean (infinite from fewer than two samples)."""
    return float(gain.std(ddof=1) / np.sqrt(len(gain))) if len(gain) > 1 else np.inf


__all__ = ["COMBINE_MARGIN_SE", "cross_fitted", "cross_fitted_gain", "standard_error"]
