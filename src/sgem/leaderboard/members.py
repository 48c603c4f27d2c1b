"""The leaderboard's members: what a user would otherwise pick, as predictions on the same
samples as the searched MoE.

Every member gives two sets of raw outputs in the task's model units (logits, or the
Student-t's (loc, scale, df) per step): on the VALIDATION split from a fit on the training
split only (out of sample, so members are compared and combined there), and on the HOLDOUT
(the test split) from a fit on train + validation (the protocol of the final MoE, so the
holdout row of every member is comparable). Members:

* the global network: one network of an expert's cell trained on every cluster (the
  reference the MoE must beat to be worth its experts); shippable, since a cluster-gated
  MoE whose clusters all go to it is that network;
* tables: logistic / ridge regression and histogram gradient boosting (scikit-learn);
* series: seasonal naive, and statsforecast's AutoETS / AutoTheta.

A member that needs training is skipped, and says why, once the time budget's fence has
passed (`sgem.train.time_fence`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask, Split
from ..execution.jobs import job_seed
from ..final.expert_fit import steps_for_epochs, train_val_tensors
from ..moe.classical import ClassicalMember, Stopped
from ..space.arch import Arch
from ..train.time_fence import fence_passed
from ..train.trainer import Trainer

#: the Student-t df that stands for a Normal predictive (the linear and boosted models)
NORMAL_DF = 1000.0


@dataclass
class Member:
    """One leaderboard entry's outputs (float64 arrays) and what it is."""

    name: str
    kind: str  # "sgem", "network", "scikit-learn", "classical"
    val: np.ndarray | None
    test: np.ndarray | None
    shippable: bool = False
    note: str = ""
    seconds: float = 0.0
    network: nn.Module | None = field(default=None, repr=False)  # shippable networks
    cell: Arch | None = None
    # scikit-learn: the estimator fitted on train + validation (saved as plain arrays,
    # `sgem.moe.portable`) and, for regression, its Normal scale in model units
    estimator: object | None = field(default=None, repr=False)
    scale: float = 1.0
    # a classical forecaster with its validated spread and tails (`sgem.moe.classical`)
    classical: ClassicalMember | None = field(default=None, repr=False)


def _x(split: Split) -> np.ndarray:
    return split.x.reshape(len(split.x), -1).astype(np.float64)


def _targets(split: Split) -> np.ndarray:
    return np.asarray(split.y)


# -- the global network -----------------------------------------------------------------------
@torch.no_grad()
def _predict(trainer: Trainer, net: nn.Module, split: Split) -> np.ndarray:
    x = torch.as_tensor(split.x, dtype=torch.float32, device=trainer.device)
    return trainer.predict(net.eval(), x).double().cpu().numpy()


def global_network(
    task: ClusteredTask,
    trainer: Trainer,
    cell: Arch,
    seed: int,
    steps: int,
    epochs: float | None = None,
) -> Member:
    """One network of `cell` on every cluster: `steps` (or `epochs` passes, as the final
    experts train) on the training split, scored on validation; then the same on train +
    validation, scored on the holdout (and shipped)."""

    def length(n: int) -> int:
        return steps if epochs is None else steps_for_epochs(n, epochs, trainer.config.batch_size)

    start = time.perf_counter()
    name = f"global network ({cell.key})"
    if fence_passed():
        return Member(name, "network", None, None, note="skipped: the time budget ended")
    every = np.ones(task.n_clusters, dtype=bool)
    dev = trainer.device
    seed = job_seed(seed, cell, every)
    x_tr = torch.as_tensor(task.train.x, dtype=torch.float32, device=dev)
    y_tr = torch.as_tensor(task.train.y, device=dev)
    net = trainer.fit(cell, x_tr, y_tr, seed=seed, steps=length(len(x_tr)))
    val = _predict(trainer, net, task.val)
    x_all, y_all = train_val_tensors(task, dev)
    net = trainer.fit(cell, x_all, y_all, seed=seed, steps=length(len(x_all)))
    cut = fence_passed()
    return Member(
        name,
        "network",
        val,
        _predict(trainer, net, task.test),
        shippable=not cut,
        note="trained for fewer steps: the time budget ended" if cut else "",
        seconds=time.perf_counter() - start,
        network=net.eval(),
        cell=cell,
    )


# -- tables: scikit-learn -------------------------------------------------------------------
def sklearn_members(task: ClusteredTask, seed: int) -> list[Member]:
    """Logistic / ridge regression and gradient boosting on the model's standardised
    features: what a user of scikit-learn would fit in two seconds."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.linear_model import LogisticRegression, Ridge

    if task.loss == "cross_entropy":
        makers = {
            "logistic regression": lambda: LogisticRegression(max_iter=2000),
            "gradient boosting": lambda: HistGradientBoostingClassifier(random_state=seed),
        }
    else:
        makers = {
            "ridge regression": lambda: Ridge(alpha=1.0),
            "gradient boosting": lambda: HistGradientBoostingRegressor(random_state=seed),
        }
    members = []
    for name, make in makers.items():
        start = time.perf_counter()
        try:
            (val,), _, _ = _sklearn_outputs(task, make, task.train, [task.val])
            joined = _joined(task.train, task.val)
            (test,), fitted, scale = _sklearn_outputs(task, make, joined, [task.test])
        except ValueError as exc:  # e.g. a class absent from the training split
            members.append(Member(name, "scikit-learn", None, None, note=f"failed: {exc}"))
            continue
        seconds = time.perf_counter() - start
        members.append(
            Member(name, "scikit-learn", val, test, seconds=seconds, estimator=fitted, scale=scale)
        )
    return members


def _joined(a: Split, b: Split) -> Split:
    return Split(
        np.concatenate([a.x, b.x]),
        np.concatenate([a.y, b.y]),
        np.concatenate([a.cluster, b.cluster]),
    )


def _sklearn_outputs(task: ClusteredTask, make, fit_on: Split, predict_on: list[Split]):
    """(outputs on each of `predict_on`, the fitted estimator, its Normal scale)."""
    x, y = _x(fit_on), _targets(fit_on)
    model = make()
    if task.loss == "cross_entropy":
        model.fit(x, y)
        out = []
        for split in predict_on:
            proba = np.full((len(split.x), task.n_classes or 0), 1e-12)
            proba[:, model.classes_.astype(int)] = np.maximum(model.predict_proba(_x(split)), 1e-12)
            out.append(np.log(proba / proba.sum(1, keepdims=True)))
        return out, model, 1.0
    from sklearn.model_selection import cross_val_predict

    target = y.reshape(len(y), -1)[:, 0]
    # the spread a user would quote: the cross-validated residuals' RMS (in-sample
    # residuals of a boosted model are far too small)
    folds = min(5, max(2, len(target) // 20))
    residual = target - cross_val_predict(make(), x, target, cv=folds)
    scale = float(np.sqrt(np.mean(residual**2))) or 1.0
    model.fit(x, target)
    out = []
    for split in predict_on:
        loc = model.predict(_x(split))[:, None]
        out.append(np.stack([loc, np.full_like(loc, scale), np.full_like(loc, NORMAL_DF)], -1))
    return out, model, scale


# -- series: classical forecasters ----------------------------------------------------------
def classical_members(task: ClusteredTask) -> list[Member]:
    """Seasonal naive, AutoETS and AutoTheta (statsforecast), each fitted on every window's
    own context (the same refit `sgem.moe.classical` does for a saved combination), with
    the season of the file's frequency where the task knows it."""
    from ..baselines.naive import fit_spread
    from ..baselines.seasonal_naive import seasonal_forecast

    horizon = int(task.test.y.shape[1])
    members = []
    start = time.perf_counter()

    def naive(fit_on: list[Split], split: Split) -> np.ndarray:
        """Seasonal naive with its spread multiplier and df fitted on `fit_on`'s windows
        (as `sgem.baselines.SeasonalNaive` does), forecasting `split`."""
        x = np.concatenate([_x(s) for s in fit_on])
        y = np.concatenate([np.asarray(s.y, dtype=np.float64) for s in fit_on])
        a, df = fit_spread(*seasonal_forecast(x, horizon), y)
        loc, base = seasonal_forecast(_x(split), horizon)
        return np.stack([loc, a * base, np.full_like(loc, df)], -1)

    members.append(
        Member(
            "seasonal naive",
            "classical",
            naive([task.train], task.val),
            naive([task.train, task.val], task.test),
            seconds=time.perf_counter() - start,
        )
    )
    seasons = _seasons(task, task.val), _seasons(task, task.test)
    for name in ("AutoETS", "AutoTheta"):
        if fence_passed():
            members.append(Member(name, "classical", None, None, note="skipped: budget ended"))
            continue
        start = time.perf_counter()
        ref = ClassicalMember(name)
        try:  # local fits stop at the budget's fence (a member cut short is not scored)
            val, test = (
                _classical(ref, task, part, horizon, season, stop=fence_passed)
                for part, season in zip(("val", "test"), seasons, strict=True)
            )
        except Stopped:
            members.append(Member(name, "classical", None, None, note="skipped: budget ended"))
            continue
        tuned = ref.fit_tails(val, task.val.y)  # spread and tails from validation
        val, test = (tuned.outputs(o[..., 0], o[..., 1]) for o in (val, test))
        note = f"interval width x{tuned.spread:.2f}, Student-t df {tuned.df:g} (on validation)"
        members.append(
            Member(
                name,
                "classical",
                val,
                test,
                note=note,
                seconds=time.perf_counter() - start,
                classical=tuned,
            )
        )
    return members


def classical_seconds(task: ClusteredTask, sample: int = 12) -> float:
    """What `classical_members` will take on this task, measured: AutoETS and AutoTheta
    timed on a few validation windows (as the leaderboard fits them) and scaled to every
    validation and holdout window, with a margin. A budget plan reserves it (local fits
    of seasonal models on thousands of windows take tens of seconds)."""
    n = min(sample, len(task.val))
    if n == 0:
        return 0.0
    horizon = int(task.test.y.shape[1])
    index = np.linspace(0, len(task.val) - 1, n).astype(int)
    season = _seasons(task, task.val)[index]
    for name in ("AutoETS", "AutoTheta"):  # warm-up: the first fit pays one-off start-up costs
        _classical(ClassicalMember(name), task, "val", horizon, season[:1], index[:1])
    start = time.perf_counter()
    for name in ("AutoETS", "AutoTheta"):
        _classical(ClassicalMember(name), task, "val", horizon, season, index)
    per_window = (time.perf_counter() - start) / n
    return 1.5 * per_window * (len(task.val) + len(task.test))


def _seasons(task: ClusteredTask, split: Split) -> np.ndarray:
    """Each window's seasonal period: the file's frequency where the task knows it (a
    user's file: `freq`; a benchmark's domains: `seasonality` per domain), else the
    context's own autocorrelation (`choose_seasons`), as a saved combination does."""
    from ..baselines.seasonal_naive import choose_seasons
    from ..forecast import task_seasons
    from ..moe.classical import season_of

    meta = task.meta if isinstance(task.meta, dict) else {}
    season = season_of(meta)
    if season:
        return np.full(len(split.y), season, dtype=np.int64)
    per_domain = np.atleast_1d(np.asarray(task_seasons(task), dtype=np.int64))
    source = np.asarray(split.source)
    if meta.get("seasonality") is not None and source.max(initial=0) < len(per_domain):
        return per_domain[source]
    return choose_seasons(_x(split))


def _classical(
    ref,
    task: ClusteredTask,
    part: str,
    horizon: int,
    season: np.ndarray,
    index: np.ndarray | None = None,
    stop=None,
) -> np.ndarray:
    """A classical member's outputs (model units) on every window of split `part` (or its
    windows `index`), fitted on the series' whole history up to the window's end where the
    task keeps it (as a saved combination refits at forecast time), else on the window's
    context."""
    split = getattr(task, part)
    histories, scale = _histories(task, part)
    rows = np.arange(len(split.y)) if index is None else np.asarray(index)
    if histories is None:
        loc, spread = ref.forecast(list(_x(split)[rows]), horizon, season, stop)
    else:
        loc, spread = ref.forecast([histories[i] for i in rows], horizon, season, stop)
        loc, spread = loc / scale[rows, None], spread / scale[rows, None]
    return np.stack([loc, spread, np.full_like(loc, NORMAL_DF)], -1)


def _histories(task: ClusteredTask, part: str) -> tuple[list | None, np.ndarray]:
    """(raw history up to each window's last context value, the window's scale) of a user's
    series task (`sgem.data.user_tasks.series_task` keeps them), else (None, ones)."""
    meta = task.meta if isinstance(task.meta, dict) else {}
    windows = (meta.get("windows") or {}).get("val" if part == "val" else part)
    series, offsets = meta.get("histories"), meta.get("history_offsets")
    if windows is None or series is None or offsets is None:
        return None, np.ones(len(getattr(task, part).y))
    ends = windows.start + int(meta["context"])
    histories = [
        series[i][: max(int(e) - offsets[i], 1)] for i, e in zip(windows.series, ends, strict=True)
    ]
    return histories, np.asarray(windows.scale, dtype=np.float64)


__all__ = [
    "NORMAL_DF",
    "Member",
    "classical_members",
    "classical_seconds",
    "global_network",
    "sklearn_members",
]
