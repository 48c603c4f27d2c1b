"""Gradient boosting's settings chosen by cross-validation on a small table's training split
(`sgem.leaderboard.boosting_settings`)."""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

import sgem.leaderboard.boosting_settings as boosting_settings
from sgem.data.task import ClusteredTask, Split
from sgem.leaderboard.boosting_settings import (
    BOOSTING_GRID,
    choose_settings,
    tunable,
    tuning_seconds,
)
from sgem.leaderboard.table_members import GradientBoosting
from sgem.methods.budget import MethodBudget

#: two settings where the whole grid is not what a test is about (each setting is a
#: five-fold cross-validation: the whole grid takes seconds)
TWO = ({"max_iter": 30}, {"max_iter": 30, "max_depth": 3, "min_samples_leaf": 5})


def _regressor(**settings):
    return HistGradientBoostingRegressor(random_state=0, **settings)


def _steps(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A four-level step of one feature: 20 rows a leaf (the default) cannot follow it
    on 60 rows, five can."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 4, (n, 1))
    return x, np.floor(x[:, 0]) * 3.0 + rng.normal(0, 0.1, n)


def test_the_defaults_lose_to_smaller_leaves_on_a_few_rows_of_a_step(monkeypatch):
    monkeypatch.setattr(boosting_settings, "BOOSTING_GRID", TWO)
    x, y = _steps(60)
    settings, note = choose_settings(_regressor, x, y, False, 0, seconds=60.0)
    assert settings == TWO[1], note
    assert "cross-validation" in note and "the best of 2 of the 2 tried" in note


def test_the_grid_starts_at_scikit_learns_defaults():
    assert BOOSTING_GRID[0] == {} and len({str(s) for s in BOOSTING_GRID}) == len(BOOSTING_GRID)


def test_no_seconds_leaves_the_defaults_alone_tried():
    x, y = _steps(60)
    settings, note = choose_settings(_regressor, x, y, False, 0, seconds=0.0)
    assert settings == {} and f"the best of 1 of the {len(BOOSTING_GRID)}" in note


def test_too_few_rows_of_a_class_keep_the_defaults():
    x = np.arange(10.0)[:, None]
    y = np.r_[np.zeros(9), 1]

    def classifier(**settings):
        return HistGradientBoostingClassifier(random_state=0, **settings)

    settings, note = choose_settings(classifier, x, y, True, 0, seconds=60.0)
    assert settings == {} and "too few rows" in note


def test_a_classifier_is_chosen_by_its_log_loss(monkeypatch):
    monkeypatch.setattr(boosting_settings, "BOOSTING_GRID", TWO)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 3))
    y = (x[:, 0] + 0.3 * rng.normal(size=120) > 0).astype(int)

    def classifier(**settings):
        return HistGradientBoostingClassifier(random_state=0, **settings)

    settings, note = choose_settings(classifier, x, y, True, 0, seconds=60.0)
    assert settings in [dict(s) for s in TWO] and "the best of 2 of the 2" in note


def test_only_small_tables_are_tuned():
    assert tunable(500, 30, None, 12.0) and tunable(1000, 10, 10, 12.0)
    assert not tunable(100_000, 20, None, np.inf) and not tunable(2000, 64, 10, np.inf)
    assert tunable(1150, 64, 10, 12.0) and not tunable(1150, 64, 10, 3.0), "digits: 2m, 30 s"
    assert tuning_seconds(120.0) == 12.0 and tuning_seconds(None) == np.inf


def _task(x: np.ndarray, y: np.ndarray) -> ClusteredTask:
    n = len(y)
    parts = np.array_split(np.arange(n), [int(0.6 * n), int(0.8 * n)])

    def split(i: np.ndarray) -> Split:
        return Split(x[i].astype(np.float32), y[i, None].astype(np.float32), i % 3)

    train, val, test = (split(p) for p in parts)
    return ClusteredTask("table", train, val, test, loss="student_t", n_clusters=3)


def test_the_member_says_which_settings_it_was_fitted_with(monkeypatch):
    monkeypatch.setattr(boosting_settings, "BOOSTING_GRID", TWO)
    x, y = _steps(100)
    task = _task(x, y)
    tuned = GradientBoosting().fit_evaluate(task, MethodBudget(reference_seconds=60.0))
    plain = GradientBoosting().fit_evaluate(task, MethodBudget())
    assert "cross-validation on the training split" in tuned.note and plain.note == ""
    assert tuned.fitted is not None and tuned.fitted.estimator.min_samples_leaf < 20
    assert plain.fitted is not None and plain.fitted.estimator.min_samples_leaf == 20
