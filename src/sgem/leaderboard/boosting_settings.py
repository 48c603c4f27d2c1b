"""Gradient boosting's settings for a user's table, chosen by cross-validation on its
training split where the table is small enough and the budget has the seconds.

Why: scikit-learn's defaults (31 leaves, 20 rows a leaf, learning rate 0.1, 100 trees) suit
thousands of rows, and the small tables are where the saved model lost most to the best
scikit-learn model; a 2-minute fit of one ended after 20-36 s, so the seconds were there.
With the choice (`benchmarks/leaderboard.py`, 2-minute fits, 20 % test rows no fit saw):
scikit-learn's bundled tables 13 of 15 splits within 1 point / 1.02x of the best
scikit-learn model (12 with the defaults: breast cancer 0.965 -> 0.982 on split 0),
statsmodels' 4 of 5 (3: party identification 0.429 -> 0.444), the smallest regression
tables 4 of 9 as before (engel better on 2 splits, statecrime and grunfeld worse on one:
40-176 training rows); on the toy, gradient boosting's holdout NLL 0.295 -> 0.137. The
linear models' penalty chosen the same way was worse as often as better on these tables,
so they keep scikit-learn's.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

#: the settings tried, scikit-learn's defaults first (kept where nothing beats them): slower
#: learning with fewer or smaller leaves, shallow trees, and a ridge penalty on the leaves
BOOSTING_GRID: tuple[dict[str, Any], ...] = (
    {},
    {"learning_rate": 0.05, "max_leaf_nodes": 15, "min_samples_leaf": 10},
    {"learning_rate": 0.05, "max_leaf_nodes": 7, "max_iter": 200},
    {"max_depth": 3, "min_samples_leaf": 5},
    {"learning_rate": 0.03, "max_iter": 300},
    {"l2_regularization": 1.0, "max_leaf_nodes": 15, "min_samples_leaf": 10},
)
#: a table is tuned only up to this many values (rows x features x trees an iteration
#: grows: one per class beyond two); above, one fit of the defaults is what it can afford
MAX_TUNED_VALUES = 1_000_000
#: one fit of the defaults priced as a set-up plus its values at a rate, on 2 CPU cores
#: (five-fold cross-validation of them measured 0.42 s on breast cancer's training split,
#: 364 rows x 30, priced 0.59 s; 5.9 s on digits', 1150 rows x 64 x 10 classes, priced
#: 6.6 s): a 2-minute fit of digits is tuned, a 30-second one is not
FIT_SETUP_SECONDS = 0.1
FIT_VALUES_PER_SECOND = 600_000
#: with a time budget, the share of it the choice may take (the settings tried in order,
#: each only where its projected cross-validation still fits)
TUNING_SHARE = 0.1


def tuning_seconds(budget_seconds: float | None) -> float:
    """The seconds gradient boosting's choice of settings may take within a fit's budget;
    without a budget every setting is tried (a budget-less fit runs minutes, and what it
    chooses must not depend on the machine's speed)."""
    return np.inf if budget_seconds is None else TUNING_SHARE * budget_seconds


def tunable(rows: int, features: int, classes: int | None, seconds: float) -> bool:
    """Whether a table of this size is tuned: at most `MAX_TUNED_VALUES`, and the defaults'
    five fits (which run whatever the clock says) priced within `seconds`
    (`FIT_SETUP_SECONDS`, `FIT_VALUES_PER_SECOND`)."""
    trees = classes if classes is not None and classes > 2 else 1
    values = rows * features * trees
    return (
        values <= MAX_TUNED_VALUES
        and 5 * (FIT_SETUP_SECONDS + values / FIT_VALUES_PER_SECOND) <= seconds
    )


def choose_settings(
    make, x: np.ndarray, y: np.ndarray, classes: bool, seed: int, seconds: float
) -> tuple[dict[str, Any], str]:
    """(the settings of `BOOSTING_GRID` with the lowest out-of-fold loss on `x, y`, a line
    saying what was chosen and how): `make(**settings)` builds a model; the loss is the log
    loss of the probabilities (`classes`) or the squared error. Settings are tried in order
    while their projected cost (the defaults' seconds, scaled by their trees) fits in
    `seconds`; with fewer than two rows a fold, the defaults."""
    from sklearn.model_selection import KFold, StratifiedKFold

    folds = min(5, len(y) // 2)
    if classes:
        folds = min(folds, int(np.unique(y, return_counts=True)[1].min()))
    if folds < 2:
        return {}, "scikit-learn's defaults (too few rows to choose settings on)"
    split = (StratifiedKFold if classes else KFold)(folds, shuffle=True, random_state=seed)
    start = time.perf_counter()
    losses: list[float] = []
    per_tree = 0.0
    for settings in BOOSTING_GRID:
        trees = settings.get("max_iter", 100)
        if losses and time.perf_counter() - start + per_tree * trees > seconds:
            break
        began = time.perf_counter()
        losses.append(_out_of_fold_loss(make(**settings), x, y, split, classes))
        per_tree = max(per_tree, (time.perf_counter() - began) / trees)
    best = int(np.argmin(losses))
    chosen = BOOSTING_GRID[best]
    said = ", ".join(f"{k}={v}" for k, v in chosen.items()) or "scikit-learn's defaults"
    # (no seconds in the line: the row has them, and a resumed fit's row must read the same)
    line = (
        f"settings by {folds}-fold cross-validation on the training split: {said} "
        f"(the best of {len(losses)} of the {len(BOOSTING_GRID)} tried)"
    )
    return dict(chosen), line


def _out_of_fold_loss(model, x: np.ndarray, y: np.ndarray, split, classes: bool) -> float:
    """The mean log loss (`classes`) or squared error of `model`'s out-of-fold predictions."""
    from sklearn.model_selection import cross_val_predict

    if not classes:
        return float(np.mean((y - cross_val_predict(model, x, y, cv=split)) ** 2))
    proba = cross_val_predict(model, x, y, cv=split, method="predict_proba")
    picked = proba[np.arange(len(y)), np.searchsorted(np.unique(y), y)]
    return float(-np.log(np.clip(picked, 1e-12, 1.0)).mean())


__all__ = [
    "BOOSTING_GRID",
    "FIT_SETUP_SECONDS",
    "FIT_VALUES_PER_SECOND",
    "MAX_TUNED_VALUES",
    "TUNING_SHARE",
    "choose_settings",
    "tunable",
    "tuning_seconds",
]
