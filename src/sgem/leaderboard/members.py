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
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from ..baselines.naive import NORMAL_DF
from ..data.task import ClusteredTask, Split
from ..execution.jobs import job_seed
from ..final.expert_fit import steps_for_epochs, train_val_tensors
from ..final.length import resolve_length
from ..methods.budget import MethodBudget
from ..methods.protocol import Method
from ..methods.result import Fitted, MethodResult
from ..moe.averaged import AveragedExpert
from ..space.arch import Arch, CellSpace
from ..space.tabular import TabularSpace
from ..space.timeseries import TimeSeriesSpace
from ..train.time_fence import fence_passed
from ..train.trainer import Trainer
from .boosting_settings import choose_settings, tunable
from .series_members import ClassicalReference

#: `MethodResult.extra`'s key of a scikit-learn member's out-of-fold outputs on train + validation
OUT_OF_FOLD = "out_of_fold_output"
#: ... and of the rows its saved estimator was refitted on (`_refit_on_every_row`)
REFIT_ROWS = "refit_rows"
#: above this many train + validation rows a table's holdout is large enough alone, and five
#: more fits of each scikit-learn member are not worth their time
MAX_OUT_OF_FOLD_ROWS = 50_000
#: ... and up to this many, a saved global network's too (`network_out_of_fold`: five
#: network fits; above, its holdout of a fifth of the rows decides well enough)
MAX_NETWORK_OUT_OF_FOLD_ROWS = 5_000
#: a scikit-learn member of a fit with a time budget is fitted on a seeded sample of at most
#: this many values per second of the budget (rows x features x classes beyond two:
#: gradient boosting grows a tree per class per iteration; a regression: x 6, its spread is
#: cross-validated on 5 folds first), and of at least `MIN_SAMPLED_ROWS` rows. Why: on
#: 540 000 rows of 54 columns and 7 classes its two fits ran past the whole of a 3-minute
#: budget; 20 M values (the most at 2 minutes) take about 15 s a fit on a 2-core CPU, so
#: its two fits (or, sampled, one on twice the values) take about a quarter of the budget
SCIKIT_LEARN_VALUES_PER_SECOND = 20_000_000 / 120
MIN_SAMPLED_ROWS = 10_000


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
    and `trainer` itself as the run's one trainer (no reference builds another)."""
    budget = MethodBudget(
        seed=seed,
        space=trainer.space,
        train=trainer.config,
        final_steps=steps,
        final_epochs=epochs,
        final_length=length,
        crps_samples=crps_samples,
        device=str(trainer.device),
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


def _x(split: Split) -> np.ndarray:
    return split.x.reshape(len(split.x), -1).astype(np.float64)


def _targets(split: Split) -> np.ndarray:
    return np.asarray(split.y)


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


#: optimiser steps a global network's cell is timed on (beyond two that pay its set-up)
PROBE_STEPS = 8


def global_network_seconds(
    task: ClusteredTask, trainer: Trainer, cell: Arch, steps: int, epochs: float | None
) -> float:
    """What `GlobalNetwork(cell)` will take on `task`: its two trainings (training split,
    then train + validation) priced from a few optimiser steps of `cell`, timed (the
    set-up from a two-step training, each step from `PROBE_STEPS` more)."""
    x_tr = torch.as_tensor(task.train.x, dtype=torch.float32, device=trainer.device)
    y_tr = torch.as_tensor(task.train.y, device=trainer.device)
    took = []
    for n in (2, 2 + PROBE_STEPS):
        start = time.perf_counter()
        trainer.fit(cell, x_tr, y_tr, seed=0, steps=n)
        if x_tr.device.type == "cuda":  # (CUDA returns before its queued steps are done)
            torch.cuda.synchronize(x_tr.device)
        took.append(time.perf_counter() - start)
    per_step = (took[1] - took[0]) / PROBE_STEPS
    if per_step <= 0:  # timing noise: every second of the longer probe counted as steps
        per_step = took[1] / (2 + PROBE_STEPS)
    set_up = max(took[0] - 2 * per_step, 0.0)
    sizes = (len(task.train), len(task.train) + len(task.val))
    return 2 * set_up + per_step * sum(_steps(trainer, n, steps, epochs) for n in sizes)


def folded_table(task: ClusteredTask) -> bool:
    """Whether the members of `task` (a user's table of at most `MAX_OUT_OF_FOLD_ROWS`
    train + validation rows) get out-of-fold outputs."""
    return task.name == "table" and len(task.train) + len(task.val) <= MAX_OUT_OF_FOLD_ROWS


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
    joined = _joined(task.train, task.val)
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


# -- tables: scikit-learn -------------------------------------------------------------------
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
        joined = _joined(task.train, task.val)
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

        x, y = _x(task.train), _targets(task.train)
        if budget.reference_seconds is None or not tunable(
            len(y), x.shape[1], task.n_classes if classes else None
        ):
            return self.name, made, ""
        y = y if classes else _first_step(y)
        settings, note = choose_settings(made, x, y, classes, seed, budget.reference_seconds)
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
    every = _joined(joined, task.test)
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


def _joined(a: Split, b: Split) -> Split:
    return Split(
        np.concatenate([a.x, b.x]),
        np.concatenate([a.y, b.y]),
        np.concatenate([a.cluster, b.cluster]),
    )


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
    "MAX_NETWORK_OUT_OF_FOLD_ROWS",
    "MAX_OUT_OF_FOLD_ROWS",
    "OUT_OF_FOLD",
    "REFIT_ROWS",
    "GlobalNetwork",
    "GradientBoosting",
    "LinearModel",
    "folded_table",
    "global_network_seconds",
    "network_out_of_fold",
    "reference_budget",
    "reference_methods",
]
