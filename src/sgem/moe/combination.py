"""A saved model that is a weighted combination: the cluster-gated MoE plus scikit-learn
members (tables) or classical forecasters (series), mixed as predictive distributions with
weights fitted on validation.

Why: on a table a logistic regression or gradient boosting can beat the searched MoE, and a
user should get the better model (or a combination in which the MoE keeps its weight where
it helps) instead of a worse one. The members are stored as plain arrays
(`sgem.leaderboard.portable`: no pickle) in `members.safetensors`, their names, weights and
states in model.json's info["combination"]; classical forecasters (`sgem.moe.classical`)
store only their name and are refitted on each series' history at forecast time. Predicting
mixes class probabilities, or Student-t / Normal densities whose quantiles are found by
bisection of the mixture's CDF; a forecaster averages its members' quantiles instead (its
weights are chosen for the quantile loss, as AutoGluon's time-series ensemble does: a
density mixture of a sharp and a wide member is wider than either).
Scores of a combination come from `scores`, one function for the run and `evaluate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy import stats
from scipy.special import logsumexp

from ..baselines.naive import NORMAL_DF
from ..forecast import student_t_nll
from ..train.losses import per_sample_nll
from .classical import FORMAT as CLASSICAL_FORMAT
from .classical import ClassicalMember
from .interval_width import width_bins
from .portable import PortableModel

MEMBERS_FILE = "members.safetensors"


@dataclass
class Combination:
    """`weights[0]` is the MoE's, `weights[1:]` the members' (same order)."""

    weights: np.ndarray
    names: list[str]
    members: list[PortableModel | ClassicalMember]
    scales: list[float]  # regression: each member's Normal scale in model units
    loss: str
    n_classes: int | None = None
    season: int = 0  # forecasting: the classical members' period (0: each series' own)
    #: every quantile's distance from the median is multiplied by this (split-conformal on
    #: held-out outputs, `conformal_spread`), so the 80 % interval covers 80 % (1: a
    #: regression saved before it was fit)
    interval_scale: float = 1.0
    #: a regression's point prediction: the mixture's "mean" (its weights were chosen for
    #: the squared error of that mean) or its "median" (models saved before, their weights
    #: chosen for the log density)
    point: str = "median"
    #: a regression's width factor by bin of its point prediction (Mondrian split-conformal,
    #: `binned_spreads`): `width_edges` (ascending, model units) cut the point into bins,
    #: one more than edges, each with its factor in `width_factors` (None: `interval_scale`
    #: for every row)
    width_edges: tuple[float, ...] | None = None
    width_factors: tuple[float, ...] | None = None

    @property
    def forecasting(self) -> bool:
        return any(isinstance(m, ClassicalMember) for m in self.members)

    # -- saving and loading ----------------------------------------------------------------
    @classmethod
    def build(
        cls,
        weights: np.ndarray,
        names: list[str],
        scales: list[float],
        task,
        exported: list,
        season: int = 0,
        interval_scale: float = 1.0,
        point: str = "median",
        width_bins: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
    ) -> tuple[Combination, dict, dict[str, np.ndarray]]:
        """(the combination as loading will rebuild it, model.json's state, the members'
        arrays) from the weights (the MoE's first) and the members' `portable.export`s
        (a classical member: its `ClassicalMember.state()` and no arrays)."""
        arrays = {f"m{i}.{k}": v for i, (_, a) in enumerate(exported) for k, v in a.items()}
        state = {
            "weights": [float(w) for w in weights],
            "names": list(names),
            "members": [s for s, _ in exported],
            "scales": [float(s) for s in scales],
            "loss": task.loss,
            "n_classes": task.n_classes,
            "season": int(season),
            "interval_scale": float(interval_scale),
            "point": point,
            "width_edges": None if width_bins is None else [float(v) for v in width_bins[0]],
            "width_factors": None if width_bins is None else [float(v) for v in width_bins[1]],
            "weights_by_name": {"MoE": float(weights[0])}
            | {n: float(w) for n, w in zip(names, weights[1:], strict=True)},
        }
        return cls.from_state(state, arrays), state, arrays

    @classmethod
    def from_state(cls, doc: dict, arrays: dict[str, np.ndarray]) -> Combination:
        """Rebuild from model.json's info["combination"] and the members' arrays; a state
        that does not hold together raises ValueError naming what."""
        try:
            weights = np.asarray(doc["weights"], dtype=np.float64)
            states, names = list(doc["members"]), list(doc["names"])
            scales, loss = [float(s) for s in doc["scales"]], str(doc["loss"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the combination's description is malformed: {exc}") from exc
        if len(weights) != len(states) + 1 or len(names) != len(states):
            raise ValueError("the combination lists a different number of weights and members")
        if not (np.all(np.isfinite(weights)) and np.all(weights >= 0)) or not np.isclose(
            weights.sum(), 1.0
        ):
            raise ValueError("the combination's weights must be >= 0 and sum to 1")
        if (
            loss not in ("cross_entropy", "student_t")
            or len(scales) not in ({len(states)} if loss == "student_t" else {0, len(states)})
            or not all(np.isfinite(s) and s > 0 for s in scales)
        ):
            raise ValueError("the combination's loss or member scales are malformed")
        season = doc.get("season", 0)
        if type(season) is not int or not 0 <= season <= 10_000:
            raise ValueError(f"the combination's season must be an integer >= 0, got {season!r}")
        members: list[PortableModel | ClassicalMember] = []
        for i, state in enumerate(states):
            if isinstance(state, dict) and state.get("format") == CLASSICAL_FORMAT:
                if loss != "student_t":
                    raise ValueError("a classical forecaster cannot join a classifier")
                members.append(ClassicalMember.from_state(state))
                continue
            own = {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith(f"m{i}.")}
            members.append(PortableModel.from_state(state, own))
        if any(isinstance(m, ClassicalMember) for m in members) and not all(
            isinstance(m, ClassicalMember) for m in members
        ):
            raise ValueError("a combination mixes either classical or scikit-learn members")
        spread = doc.get("interval_scale", 1.0)
        if type(spread) not in (int, float) or not (np.isfinite(spread) and 0 < spread < 1e3):
            raise ValueError("the combination's interval_scale must be a positive number")
        point = doc.get("point", "median")
        if point not in POINTS:
            raise ValueError(f"the combination's point must be one of {POINTS}, got {point!r}")
        edges, factors = width_bins(doc.get("width_edges"), doc.get("width_factors"))
        return cls(
            weights,
            names,
            members,
            scales,
            loss,
            doc.get("n_classes"),
            season,
            float(spread),
            point,
            edges,
            factors,
        )

    # -- predicting -------------------------------------------------------------------------
    def member_outputs(self, x_model: np.ndarray) -> list[np.ndarray]:
        """Each member's outputs in model units: log-probabilities (n, C), or Normal
        parameters (n, 1, 3)."""
        if self.forecasting:
            raise ValueError("a forecasting combination's members need histories: use forecast")
        x = np.asarray(x_model, dtype=np.float64).reshape(len(x_model), -1)
        out = []
        for member, scale in zip(
            self.members, self.scales or [1.0] * len(self.members), strict=True
        ):
            if self.loss == "cross_entropy":
                assert isinstance(member, PortableModel)
                proba = np.full((len(x), int(self.n_classes or 0)), 1e-12)
                codes = np.asarray(member.classes, dtype=int)
                proba[:, codes] = np.maximum(member.predict_proba(x), 1e-12)
                out.append(np.log(proba / proba.sum(1, keepdims=True)))
            else:
                assert isinstance(member, PortableModel)
                loc = member.predict(x)[:, None]
                out.append(
                    np.stack([loc, np.full_like(loc, scale), np.full_like(loc, NORMAL_DF)], -1)
                )
        return out

    def _with_members(self, moe_out: np.ndarray, x_model: np.ndarray) -> list[np.ndarray]:
        """The MoE's outputs, then each member's on the same inputs."""
        return [np.asarray(moe_out, dtype=np.float64), *self.member_outputs(x_model)]

    def proba(self, moe_logits: np.ndarray, x_model: np.ndarray) -> np.ndarray:
        """Mixed class probabilities (n, C)."""
        outs = self._with_members(moe_logits, x_model)
        probs = [_softmax(o) for o in outs]
        return sum(w * p for w, p in zip(self.weights, probs, strict=True))

    def quantiles(self, moe_params: np.ndarray, x_model: np.ndarray, qs) -> dict[float, np.ndarray]:
        """Quantiles (model units) of the mixture of Student-t / Normal members, (n,) each."""
        outs = self._with_members(moe_params, x_model)
        return {q: v[:, 0] for q, v in self.quantiles_of(outs, qs).items()}

    def point_of(self, outs: list[np.ndarray]) -> np.ndarray:
        """A regression's point prediction (model units) from its members' outputs (the
        MoE's first): the mixture's mean (the weighted mean of the Student-t / Normal
        locations) or its median (`point`)."""
        if self.point == "mean":
            return mixture_mean(stacked_locations(outs), self.weights)
        return self.quantiles_of(outs, (0.5,))[0.5]

    def point_prediction(self, moe_params: np.ndarray, x_model: np.ndarray) -> np.ndarray:
        """`point_of` from the MoE's outputs and the inputs, (n,)."""
        outs = self._with_members(moe_params, x_model)
        return self.point_of(outs)[:, 0]

    def forecast(
        self, moe_params: np.ndarray, histories: list[np.ndarray], window_scale, qs
    ) -> dict[float, np.ndarray]:
        """Forecast quantiles, {q: (n, horizon)} in the series' units: the MoE's Student-t
        (scaled units, `moe_params` (n, horizon, 3)) mixed with each classical member
        refitted on the series' whole `histories` (original units)."""
        s = np.asarray(window_scale, dtype=np.float64)[:, None]
        moe = np.asarray(moe_params, dtype=np.float64)
        outs = [moe, *self.classical_outputs(histories, s, moe.shape[1])]
        return {q: v * s for q, v in self.quantiles_of(outs, qs).items()}

    def quantiles_of(self, outs: list[np.ndarray], qs) -> dict[float, np.ndarray]:
        """The combination's quantiles from its members' outputs (the MoE's first): a
        forecaster averages the members' quantiles with the weights (quantile averaging,
        as the weights were chosen for the quantile loss); a regressor mixes densities.
        Either's distances from its median are then multiplied by `interval_scale` (a
        regression's by its point's bin's `width_factors`, where it has them)."""
        levels = tuple(dict.fromkeys((*(float(q) for q in qs), 0.5)))
        binned = self.width_factors is not None and not self.forecasting
        if self.forecasting:
            found = averaged_quantiles(outs, self.weights, levels)
        elif self.interval_scale == 1.0 and not binned:
            return mixture_quantiles(outs, self.weights, qs)
        else:
            found = mixture_quantiles(outs, self.weights, levels)
        median = found[0.5]
        spread: float | np.ndarray = self.interval_scale
        if binned:  # (the point as `point_of` gives it: the median is found already)
            assert self.width_edges is not None and self.width_factors is not None
            point = median if self.point == "median" else self.point_of(outs).reshape(median.shape)
            at = np.searchsorted(np.asarray(self.width_edges), point, side="right")
            spread = np.asarray(self.width_factors, dtype=np.float64)[at]
        return {float(q): median + spread * (found[float(q)] - median) for q in qs}

    def classical_outputs(
        self, histories: list[np.ndarray], window_scale, horizon: int
    ) -> list[np.ndarray]:
        """Each classical member's (loc, scale, df) per step, in the MoE's scaled units."""
        out = []
        s = np.asarray(window_scale, dtype=np.float64).reshape(-1, 1)
        for member in self.members:
            assert isinstance(member, ClassicalMember)
            loc, scale = member.forecast(histories, horizon, self.season)
            out.append(member.outputs(loc / s, scale / s))
        return out

    def scores(self, moe_out: np.ndarray, x_model: np.ndarray, y: np.ndarray) -> dict:
        """Holdout scores of the combination from the MoE's outputs and the inputs."""
        outs = self._with_members(moe_out, x_model)
        return self.scores_of(outs, y)

    def scores_of(self, outs: list[np.ndarray], y: np.ndarray) -> dict:
        """Scores of the mixture of the members' outputs (the MoE's first), model units:
        its NLL, and accuracy (classes) or the RMSE of its point (`point_of`; a forecast's
        median)."""
        nll = None if self.forecasting else mixture_nll(outs, self.weights, y, self.loss)
        if self.loss == "cross_entropy":
            mixed = sum(w * _softmax(o) for w, o in zip(self.weights, outs, strict=True))
            return {"test_nll": nll, "test_accuracy": float((mixed.argmax(1) == y).mean())}
        point = self.point_of(outs)  # (a forecaster's: the averaged quantiles' median)
        err = point.reshape(len(point), -1) - np.asarray(y, np.float64).reshape(len(point), -1)
        rmse = float(np.sqrt(np.mean(err**2)))
        if not self.forecasting:  # a regression: its NLL, RMSE and interval's coverage
            q = self.quantiles_of(outs, (0.1, 0.9))
            return {"test_nll": nll, "test_rmse": rmse, "test_coverage_80": _inside(q, y)}
        q = self.quantiles_of(outs, CRPS_GRID)  # no density: the CRPS from the quantile loss
        return {  # on a fine grid
            "test_rmse": rmse,
            "test_crps": float(quantile_loss(q, y).mean()),
            "test_coverage_80": _inside(q, y),
        }


#: a regression combination's point predictions (`Combination.point`)
POINTS = ("mean", "median")
#: quantile levels whose mean pinball loss (x 2) approximates the CRPS
CRPS_GRID = tuple(np.round(np.arange(0.05, 0.96, 0.05), 2))
#: the levels the weights of a forecasting combination are chosen on (the wQL's)
WQL_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def _inside(quantiles: dict[float, np.ndarray], y: np.ndarray) -> float:
    """The share of `y` inside the central 80 % interval of these quantiles."""
    target = np.asarray(y, np.float64).reshape(quantiles[0.1].shape)
    return float(((target >= quantiles[0.1]) & (target <= quantiles[0.9])).mean())


def member_quantiles(out: np.ndarray, qs) -> np.ndarray:
    """(len(qs), ...) quantiles of one member's Student-t outputs (..., 3)."""
    return np.stack([out[..., 0] + out[..., 1] * stats.t.ppf(q, out[..., 2]) for q in qs])


def averaged_quantiles(outs: list[np.ndarray], weights, qs) -> dict[float, np.ndarray]:
    """The weighted average of the members' quantiles, level by level (Vincentisation)."""
    w = np.asarray(weights, dtype=np.float64)
    total = sum(wi * member_quantiles(o, qs) for wi, o in zip(w, outs, strict=True) if wi > 0)
    total = np.asarray(total) / w[w > 0].sum()
    return {float(q): total[i] for i, q in enumerate(qs)}


def quantile_loss(quantiles: dict[float, np.ndarray], y: np.ndarray) -> np.ndarray:
    """Per sample, 2 x the mean pinball loss over the levels and steps (the CRPS on a fine
    grid of levels; the weighted quantile loss's numerator on the wQL's levels)."""
    y = np.asarray(y, dtype=np.float64)
    losses = []
    for q, v in quantiles.items():
        d = y.reshape(v.shape) - v
        losses.append(2 * np.maximum(q * d, (q - 1) * d).reshape(len(v), -1).mean(axis=1))
    return np.mean(losses, axis=0)


def stacked_locations(outs: list[np.ndarray]) -> np.ndarray:
    """The members' Student-t / Normal locations, (members, n, steps)."""
    return np.stack([np.asarray(o, np.float64)[..., 0].reshape(len(o), -1) for o in outs])


def mixture_mean(locations: np.ndarray, weights) -> np.ndarray:
    """The mixture's mean, (n, steps): its members' `stacked_locations`, weighted."""
    w = np.asarray(weights, dtype=np.float64)
    return np.tensordot(w / w.sum(), locations, axes=1)


def mixture_quantiles(outs: list[np.ndarray], weights, qs) -> dict[float, np.ndarray]:
    """Quantiles of the weighted mixture of Student-t members, each output (..., 3) as
    (loc, scale, df): bisection of the mixture's CDF between the members' own extreme
    quantiles, elementwise over the leading shape."""
    loc, scale, df = (np.stack([o[..., i] for o in outs]) for i in range(3))
    w = np.asarray(weights, dtype=np.float64).reshape(-1, *[1] * (loc.ndim - 1))
    result = {}
    for q in qs:
        own = loc + scale * stats.t.ppf(q, df)
        lo, hi = own.min(0), own.max(0)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            below = (w * stats.t.cdf((mid - loc) / scale, df)).sum(0) < q
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        result[float(q)] = 0.5 * (lo + hi)
    return result


def log_density(out: np.ndarray, y: np.ndarray, loss: str) -> np.ndarray:
    """log p(y) per sample (classification) or per sample and step (Student-t)."""
    t = torch.as_tensor(out, dtype=torch.float64)
    if loss == "cross_entropy":
        logp = torch.log_softmax(t, dim=1)
        idx = torch.as_tensor(np.asarray(y), dtype=torch.long)[:, None]
        return logp.gather(1, idx)[:, 0].numpy()
    y_t = torch.as_tensor(np.asarray(y, dtype=np.float64)).reshape(t.shape[:-1])
    return (-student_t_nll(t[..., 0], t[..., 1], t[..., 2], y_t)).numpy()


def sample_nll(out: np.ndarray, y: np.ndarray, loss: str) -> np.ndarray:
    """Per-sample NLL, (n,), as the search scores candidates."""
    t = torch.as_tensor(out, dtype=torch.float64)
    y_t = torch.as_tensor(np.asarray(y))
    if loss == "student_t":
        y_t = y_t.to(torch.float64).reshape(t.shape[:-1])
    return per_sample_nll(t, y_t, loss).numpy()


def mixed_log_density(logs: np.ndarray, weights) -> np.ndarray:
    """Per-sample log density of the weighted mixture, from the members' stacked log
    densities (members, n[, steps]); forecasts: the mean over steps."""
    w = np.asarray(weights, dtype=np.float64)
    keep = w > 0
    shift = np.log(w[keep] / w.sum()).reshape(-1, *[1] * (logs.ndim - 1))
    mixed = logsumexp(logs[keep] + shift, axis=0)
    return mixed if mixed.ndim == 1 else mixed.mean(axis=1)


def mixture_nll(outs: list[np.ndarray], weights: np.ndarray, y: np.ndarray, loss: str) -> float:
    """Mean NLL of the weighted mixture of the members' predictive distributions."""
    logs = np.stack([log_density(o, y, loss) for o in outs])
    return float(-mixed_log_density(logs, weights).mean())


def load_combination(path, info: dict) -> Combination | None:
    """The combination a model directory saved (None without one); its members' arrays are
    checksummed like the weights, and a malformed state is refused naming the fix."""
    doc = info.get("combination")
    if not doc:
        return None
    from ..errors import SgemUserError
    from .artifact import read_members

    arrays = read_members(path)
    if arrays is None:
        raise SgemUserError(
            f"{path}: model.json describes a combination but lists no {MEMBERS_FILE}; the "
            "model directory is incomplete: copy it again or re-fit"
        )
    from .artifact import read_model_json
    from .artifact_checks import check_combination

    model = read_model_json(path)
    file = Path(model["_dir"]) / "model.json"
    try:
        combination = Combination.from_state(doc, arrays)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        raise SgemUserError(
            f"{file}: the saved combination (info.combination with {MEMBERS_FILE}) is unusable "
            f"({exc}); re-fit or restore the model directory"
        ) from exc
    check_combination(combination, model, file)
    return combination


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


__all__ = [
    "MEMBERS_FILE",
    "Combination",
    "averaged_quantiles",
    "load_combination",
    "log_density",
    "member_quantiles",
    "mixed_log_density",
    "mixture_mean",
    "mixture_nll",
    "mixture_quantiles",
    "quantile_loss",
    "sample_nll",
    "stacked_locations",
]
