"""The leaderboard's table references: what a scikit-learn user would fit in two seconds
(logistic / ridge regression, histogram gradient boosting), as methods
(`fit_evaluate(task, budget) -> MethodResult`) that predict the same samples as the searched
MoE (`sgem.leaderboard.members` says what the outputs are). On a user's table of at most
`MAX_OUT_OF_FOLD_ROWS` rows they also give out-of-fold outputs on every train + validation
row, and the estimator saved is refitted on every row, the holdout's too."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..baselines.naive import NORMAL_DF
from ..data.task import ClusteredTask, Split
from ..methods.budget import MethodBudget
from ..methods.result import Fitted, MethodResult
from ..train.time_fence import fence_passed
from .boosting_settings import choose_settings, tunable

#: `MethodResult.extra`'s key of a scikit-learn member's out-of-fold outputs on train + validation
OUT_OF_FOLD = "out_of_fold_output"
#: ... and of the rows its saved estimator was refitted on (`_refit_on_every_row`)
REFIT_ROWS = "refit_rows"
#: above this many train + validation rows a table's holdout is large enough alone, and five
#: more fits of each scikit-learn member are not worth their time
MAX_OUT_OF_FOLD_ROWS = 50_000
#: a scikit-learn member of a fit with a time budget is fitted on a seeded sample of at most
#: this many values per second of the budget (rows x features x classes beyond two:
#: gradient boosting grows a tree per class per iteration; a regression: x 6, its spread is
#: cross-validated on 5 folds first), and of at least `MIN_SAMPLED_ROWS` rows. Why: on
#: 540 000 rows of 54 columns and 7 classes its two fits ran past the whole of a 3-minute
#: budget; 20 M values (the most at 2 minutes) take about 15 s a fit on a 2-core CPU, so
#: its two fits (or, sampled, one on twice the values) take about a quarter of the budget
SCIKIT_LEARN_VALUES_PER_SECOND = 20_000_000 / 120
MIN_SAMPLED_ROWS = 10_000


def _x(split: Split) -> np.ndarray:
    return split.x.reshape(len(split.x), -1).astype(np.float64)


def _targets(split: Split) -> np.ndarray:
    return np.asarray(split.y)


def folded_table(task: ClusteredTask) -> bool:
    """Whether the members of `task` (a user's table of at most `MAX_OUT_OF_FOLD_ROWS`
    train + validation rows) get out-of-fold outputs."""
    return task.name == "table" and len(task.train) + len(task.val) <= MAX_OUT_OF_FOLD_ROWS


class _ScikitLearn:
    """A scikit-learn model on the model's standardised features: what a user of
    scikit-learn would fit in two seconds. Its name follows the task's kind (`_maker`)."""

    kind = "scikit-learn"
    uses_domain_labels = False
    name = "scikit-learn"

    def _maker(
        self, task: ClusteredTask, budget: MethodBudget
    ) -> tuple[str, Callable[[], Any], str]:
        """(its name, what builds it, a note on how it was set up: "" for the defaults)"""
        raise NotImplementedError

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        start = time.perf_counter()
        name, make, note = self._maker(task, budget)
        fields: dict[str, Any] = {"kind": self.kind, "crps_samples": budget.crps_samples}
        joined = task.train.joined(task.val)
        # a user's table's combination weighs its scikit-learn members on every row's
        # out-of-fold prediction (`sgem.leaderboard.combining`), not its holdout's alone
        folded = folded_table(task)
        values = budget.reference_values
        try:
            if values is not None and len(joined) > _most_rows(task, joined, values):
                # sampled: one fit on a sample of the training split, twice the rows of each
                # of two fits, predicts validation and holdout (3-minute fits on 540 000
                # rows: gradient boosting on 79 000 rows scored 0.835, on 159 000 0.845; a
                # refit on the validation rows too adds a fifth of the rows at twice the time)
                (val, test), fitted, scale, oof = _sklearn_outputs(
                    task, make, task.train, [task.val, task.test], (budget.seed, 2 * values)
                )
            else:
                sample = (budget.seed, values)
                (val,), _, _, _ = _sklearn_outputs(task, make, task.train, [task.val], sample)
                (test,), fitted, scale, oof = _sklearn_outputs(
                    task, make, joined, [task.test], sample, folded and not fence_passed()
                )
        except ValueError as exc:  # e.g. a class absent from the training split
            return MethodResult(name, budget.seed, note=f"failed: {exc}", **fields)
        extra: dict[str, Any] = {} if oof is None else {OUT_OF_FOLD: oof}
        refit = _refit_on_every_row(task, make, joined) if oof is not None else None
        if refit is not None:
            fitted, extra[REFIT_ROWS] = refit
        return MethodResult(
            name,
            budget.seed,
            seconds=time.perf_counter() - start,
            val_output=val,
            test_output=test,
            fitted=Fitted(estimator=fitted, scale=scale),
            extra=extra,
            note=note,
            **fields,
        )


class LinearModel(_ScikitLearn):
    """Logistic regression (classes) or ridge regression (a target)."""

    name = "linear model"

    def _maker(
        self, task: ClusteredTask, budget: MethodBudget
    ) -> tuple[str, Callable[[], Any], str]:
        from sklearn.linear_model import LogisticRegression, Ridge

        if task.loss == "cross_entropy":
            return "logistic regression", lambda: LogisticRegression(max_iter=2000), ""
        return "ridge regression", lambda: Ridge(alpha=1.0), ""


class GradientBoosting(_ScikitLearn):
    """Histogram gradient boosting (classifier or regressor), seeded by the budget; on a
    small table with `budget.reference_seconds`, its settings chosen by cross-validation on
    the training split (`sgem.leaderboard.boosting_settings`)."""

    name = "gradient boosting"

    def _maker(
        self, task: ClusteredTask, budget: MethodBudget
    ) -> tuple[str, Callable[[], Any], str]:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        classes = task.loss == "cross_entropy"
        model = HistGradientBoostingClassifier if classes else HistGradientBoostingRegressor
        seed = budget.seed

        def made(**settings: Any) -> Any:
            return model(random_state=seed, **settings)

        seconds = budget.reference_seconds
        features = int(np.prod(task.train.x.shape[1:]))  # (its size only: no copy of a large x)
        if seconds is None or not tunable(
            len(task.train), features, task.n_classes if classes else None, seconds
        ):
            return self.name, made, ""
        x, y = _x(task.train), _targets(task.train)
        y = y if classes else _first_step(y)
        settings, note = choose_settings(made, x, y, classes, seed, seconds)
        return self.name, lambda: made(**settings), note


def _refit_on_every_row(task: ClusteredTask, make, joined: Split) -> tuple[Any, int] | None:
    """(the member a user's table saves, its rows): refitted on every row the fit was given
    (train + validation + holdout) once its holdout outputs are scored, as AutoGluon's
    refit_full does; None where the fence has passed or that fit fails (the train +
    validation fit is saved). Why: the holdout is a fifth of a user's rows (statecrime's
    saved members saw 32 of its 40); fitted on 100 % rather than 80 % of the training
    rows, the members were better on average for 17 of 24 (8 splits of 12 bundled tables,
    `benchmarks/refit_members.py`). Only where every row has out-of-fold outputs
    (`folded_table`: at most `MAX_OUT_OF_FOLD_ROWS` rows, so one more fit is cheap): the
    weights are then fit on outputs of models that did not see the row they weigh."""
    if fence_passed():
        return None
    every = joined.joined(task.test)
    y = _targets(every)
    model = make()
    try:
        model.fit(_x(every), y if task.loss == "cross_entropy" else _first_step(y))
    except ValueError:
        return None
    return model, len(y)


def _first_step(y: np.ndarray) -> np.ndarray:
    """A regression's target as a scikit-learn model fits it: the first step of each row's."""
    return y.reshape(len(y), -1)[:, 0]


def _folds(rows: int) -> int:
    return min(5, max(2, rows // 20))


def _most_rows(task: ClusteredTask, fit_on: Split, values: int) -> int:
    """The most rows of `fit_on` a scikit-learn member may be fitted on under `values`
    (`SCIKIT_LEARN_VALUES_PER_SECOND` times the budget): rows x features x fits at most."""
    if task.loss == "cross_entropy":
        classes = int(task.n_classes or 2)
        fits = classes if classes > 2 else 1  # (trees per iteration)
    else:
        fits = _folds(len(fit_on)) + 1  # (the spread's cross-validation, then the model)
    features = int(np.prod(fit_on.x.shape[1:]))
    return max(values // (features * fits), MIN_SAMPLED_ROWS)


def _sklearn_outputs(
    task: ClusteredTask,
    make,
    fit_on: Split,
    predict_on: list[Split],
    sample: tuple[int, int | None] = (0, None),
    out_of_fold: bool = False,
):
    """(outputs on each of `predict_on`, the fitted estimator, its Normal scale, and with
    `out_of_fold` the outputs on `fit_on`'s rows of models fit on the other folds, or None).
    `sample` (seed, most values): fitted on a seeded sample of `fit_on`'s rows where they
    hold more values than that (and then without out-of-fold outputs); None: every row."""
    from sklearn.model_selection import cross_val_predict

    x, y = _x(fit_on), _targets(fit_on)
    folds = _folds(len(y))
    seed, values = sample
    most = len(y) if values is None else _most_rows(task, fit_on, values)
    if len(y) > most:  # (out-of-fold outputs would then miss rows: none)
        keep = np.sort(np.random.default_rng(seed).choice(len(y), most, replace=False))
        x, y, out_of_fold = x[keep], y[keep], False
    model = make()
    if task.loss == "cross_entropy":
        model.fit(x, y)
        oof = None
        if out_of_fold:
            try:
                with warnings.catch_warnings():  # a class rarer than the folds: said below
                    warnings.simplefilter("ignore")
                    proba = cross_val_predict(make(), x, y, cv=folds, method="predict_proba")
                oof = _log_proba(task, np.unique(y), proba)
            except ValueError:  # a fold without a class the others have: no out-of-fold rows
                oof = None
        out = [_log_proba(task, model.classes_, model.predict_proba(_x(s))) for s in predict_on]
        return out, model, 1.0, oof
    target = _first_step(y)
    # the spread a user would quote: the cross-validated residuals' RMS (in-sample
    # residuals of a boosted model are far too small)
    folded = cross_val_predict(make(), x, target, cv=folds)
    scale = float(np.sqrt(np.mean((target - folded) ** 2))) or 1.0
    model.fit(x, target)

    def normal(loc: np.ndarray) -> np.ndarray:
        loc = loc[:, None]
        return np.stack([loc, np.full_like(loc, scale), np.full_like(loc, NORMAL_DF)], -1)

    out = [normal(model.predict(_x(split))) for split in predict_on]
    return out, model, scale, normal(folded) if out_of_fold else None


def _log_proba(task: ClusteredTask, classes: np.ndarray, proba: np.ndarray) -> np.ndarray:
    """Log probabilities over all the task's classes (a class the model never saw: ~0)."""
    full = np.full((len(proba), task.n_classes or 0), 1e-12)
    full[:, np.asarray(classes).astype(int)] = np.maximum(proba, 1e-12)
    return np.log(full / full.sum(1, keepdims=True))


__all__ = [
    "MAX_OUT_OF_FOLD_ROWS",
    "MIN_SAMPLED_ROWS",
    "OUT_OF_FOLD",
    "REFIT_ROWS",
    "SCIKIT_LEARN_VALUES_PER_SECOND",
    "GradientBoosting",
    "LinearModel",
    "folded_table",
]
