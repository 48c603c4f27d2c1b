"""`SgemModel`: a saved Mixture-of-Experts, loaded, routing and predicting on new data.

    model = sgem.load("runs/toy-seed0")
    model.route(x)            # cluster and expert per sample
    model.predict(x)          # class labels (classification) / point forecasts
    model.predict_proba(x)
    model.forecast(series)    # Student-t parameters, point forecast, quantiles, original units
    model.evaluate(x, y)      # the metrics of result.json
    print(model)              # experts, architectures, clusters, test metrics

A new sample is treated exactly as a test sample was: the stored preprocessing, the nearest
stored centroid, that cluster's expert.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from ..data.task import Split
from ..errors import SgemUserError
from .artifact import ModelSpec, load_parts
from .calibration import (
    IntervalCalibration,
    clip_to_support,
    coverage,
    expected_calibration_error,
    never_negative,
    probability_nll,
    quantile_levels,
    softmax,
    t_quantiles,
    with_floor,
)
from .combination import Combination, load_combination
from .forecast_result import Forecast
from .learnable_gate import LearnableGatedMoE
from .preprocess import ForecastPreprocessor, ImagePreprocessor, Preprocessor
from .scoring import in_target_units, labelled_rows, score_outputs, without_moe_densities

DEFAULT_QUANTILES = (0.1, 0.5, 0.9)


@dataclass(frozen=True)
class Routing:
    """Per sample: the cluster it falls in and the expert that owns that cluster."""

    cluster: np.ndarray
    expert: np.ndarray


@contextlib.contextmanager
def _torch_threads(n: int | None):
    """Run a block on `n` torch threads (None: as is), restoring the count afterwards."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


class SgemModel:
    """A cluster-gated MoE with its preprocessing, rebuilt from a model directory."""

    def __init__(
        self,
        spec: ModelSpec,
        moe: nn.Module,
        preprocessor: Preprocessor,
        path: str | None = None,
    ) -> None:
        self.spec = spec
        self.preprocessor = preprocessor
        self.path = path
        self.moe = moe.eval()
        self.result: dict | None = None  # result.json of the run that made it (sgem.fit)
        #: a saved combination with scikit-learn members (`sgem.moe.combination`), or None
        self.combination: Combination | None = None

    @classmethod
    def load(cls, path: str | os.PathLike) -> SgemModel:
        spec, moe, pre = load_parts(path)
        model = cls(spec, moe, pre, path=str(path))
        model.combination = load_combination(path, spec.info)
        return model

    @property
    def learnable_gate(self) -> bool:
        return isinstance(self.moe, LearnableGatedMoE)

    # -- facts -----------------------------------------------------------------------------
    @property
    def is_classifier(self) -> bool:
        return self.spec.loss == "cross_entropy"

    @property
    def is_forecaster(self) -> bool:
        return isinstance(self.preprocessor, ForecastPreprocessor)

    @property
    def assignment(self) -> np.ndarray:
        return np.asarray(self.spec.assignment)

    @property
    def classes(self) -> list:
        return self.spec.classes or list(range(self.spec.n_classes or 0))

    @property
    def calibration(self) -> dict:
        """The saved calibration (`sgem.moe.calibration`; {} for a model saved without)."""
        return self.spec.info.get("calibration") or {}

    @property
    def temperature(self) -> float | None:
        value = self.calibration.get("temperature")
        return None if value is None else float(value)

    @property
    def interval_calibration(self) -> IntervalCalibration | None:
        doc = self.calibration.get("intervals")
        return None if doc is None else IntervalCalibration.from_json(doc)

    # -- routing and raw outputs -----------------------------------------------------------
    def _prepare(self, x: Any, **kwargs) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        if isinstance(self.preprocessor, ForecastPreprocessor):
            return self.preprocessor.transform(x)
        if isinstance(self.preprocessor, ImagePreprocessor):
            return (*self.preprocessor.transform(x, embeddings=kwargs.get("embeddings")), None)
        # tables: columns matched by name, encoded and imputed as at fit (the encoding)
        return (*self.preprocessor.transform(x, self.spec.info.get("encoding")), None)

    def route(self, x: Any, embeddings: np.ndarray | None = None) -> Routing:
        """Cluster and expert of each sample (features, images, or series for forecasting)."""
        x_model, cluster, _ = self._prepare(x, embeddings=embeddings)
        return Routing(cluster, self._experts_of(x_model, cluster))

    @torch.no_grad()
    def _experts_of(self, x_model: np.ndarray, cluster: np.ndarray) -> np.ndarray:
        if self.learnable_gate:  # the gate decides: the expert with the largest weight
            x = torch.as_tensor(x_model, dtype=torch.float32)
            return self.moe.gate_weights(x).argmax(1).numpy()
        return self.assignment[cluster]

    @torch.no_grad()
    def outputs(self, x_model: np.ndarray, cluster: np.ndarray) -> torch.Tensor:
        """The MoE's raw outputs on preprocessed inputs with known clusters (logits, or
        Student-t parameters in scaled units)."""
        x = torch.as_tensor(x_model, dtype=torch.float32)
        if self.learnable_gate:
            return self.moe(x).float()  # mixture log-probabilities
        return self.moe(x, torch.as_tensor(cluster)).float()

    # -- classification --------------------------------------------------------------------
    def predict_proba(
        self, x: Any, embeddings: np.ndarray | None = None, calibrated: bool = True
    ) -> np.ndarray:
        """Class probabilities (n, n_classes), columns in the order of `classes`; with the
        saved temperature and floor applied (`calibrated=False`: the network's own softmax)."""
        self._require(self.is_classifier, "predict_proba", "classification")
        x_model, cluster, _ = self._prepare(x, embeddings=embeddings)
        out = self.outputs(x_model, cluster)
        if self.combination is not None:  # mixed with its members (weights fit on validation)
            return self.combination.proba(out.double().numpy(), x_model)
        if not calibrated:
            return torch.softmax(out, dim=1).numpy()
        probs = torch.softmax(out / (self.temperature or 1.0), dim=1)
        return with_floor(probs, float(self.calibration.get("floor", 0.0))).numpy()

    def predict(self, x: Any, embeddings: np.ndarray | None = None) -> Any:
        """Class labels (decoded to the original labels), or for a regression / forecasting
        model the point prediction (the Student-t location, or a saved combination's
        `Combination.point_prediction`, in original units). A forecaster
        given a long-format DataFrame (its fit's id / time / value columns) returns the frame
        `sgem predict` writes: one row per series and step, with quantiles, expert, cluster."""
        if self.is_forecaster:
            import pandas as pd

            if isinstance(x, pd.DataFrame):
                from .series_io import forecast_long

                return forecast_long(self, x)
            return self.forecast(x).point
        x_model, cluster, _ = self._prepare(x, embeddings=embeddings)
        out = self.outputs(x_model, cluster)
        mix = self.combination
        if self.is_classifier:
            best = out if mix is None else torch.as_tensor(mix.proba(out.double().numpy(), x_model))
            idx = best.argmax(1).numpy()
            return np.asarray(self.classes)[idx] if self.spec.classes else idx
        return self._point(out.double().numpy(), x_model)

    def _point(self, raw: np.ndarray, x_model: np.ndarray) -> np.ndarray:
        """A regression's prediction from its raw outputs: the Student-t location, or the
        combination's point (`Combination.point_prediction`), in the target's units, kept
        inside its training support."""
        mix = self.combination
        if mix is not None:  # the mixture's mean (or median: `Combination.point`)
            point = mix.point_prediction(raw, x_model)
            return clip_to_support(self._unscale_target(point), self.calibration.get("support"))
        point = self._unscale_target(raw[..., 0]).reshape(len(raw), -1).squeeze(1)
        return clip_to_support(point, self.calibration.get("support"))

    def predict_quantiles(
        self, x: Any, quantiles: Sequence[float] = DEFAULT_QUANTILES, calibrated: bool = True
    ) -> dict[float, np.ndarray]:
        """Regression: {q: (n,)} predictive quantiles of the target, in its own units,
        conformally calibrated and kept inside the target's support seen in training (a
        target never below 0 gets no quantile below 0); `calibrated=False`: the raw
        Student-t quantiles (a combination's: its mixture without its width factor)."""
        self._require(
            not self.is_classifier and not self.is_forecaster, "predict_quantiles", "regression"
        )
        quantiles = quantile_levels(quantiles)
        x_model, cluster, _ = self._prepare(x)
        raw = self.outputs(x_model, cluster).double().numpy()
        out = raw[:, 0, :]
        cal = self.interval_calibration if calibrated else None
        mix = self._combination(calibrated)
        if mix is not None:  # the mixture's quantiles (bisection of its CDF)
            qv = mix.quantiles(raw, x_model, quantiles)
        else:
            qv = t_quantiles(out[:, 0], out[:, 1], out[:, 2], quantiles, cluster, cal)
        support = self.calibration.get("support") if calibrated else None
        return {q: clip_to_support(self._unscale_target(v), support) for q, v in qv.items()}

    def _combination(self, calibrated: bool) -> Combination | None:
        """The saved combination, or (`calibrated=False`) the same without its interval
        width factor: its members' quantiles as they mix."""
        mix = self.combination
        if mix is None or calibrated:
            return mix
        return replace(mix, interval_scale=1.0, width_edges=None, width_factors=None)

    def _unscale_target(self, values: np.ndarray) -> np.ndarray:
        target = self.spec.info.get("target_standardisation")
        if not target:
            return values
        return values * float(target["std"]) + float(target["mean"])

    # -- forecasting -----------------------------------------------------------------------
    def forecast(
        self,
        series: Any,
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
        calibrated: bool = True,
    ) -> Forecast:
        """Forecast the next `horizon` steps of each series (each of length >= context),
        in the series' own units: the window scaling is undone on every output. The
        quantiles are conformally calibrated, and a series whose history never went below 0
        gets no point or quantile below 0 (clipped); `calibrated=False`, or a model saved
        without calibration: the raw Student-t. A model saved as a combination with
        classical forecasters (`sgem.moe.combination`) refits them on each history and
        gives the mixture's quantiles, its median as the point (`scale` and `df` are NaN:
        the mixture is no single Student-t; `calibrated=False`: without its width factor)."""
        self._require(self.is_forecaster, "forecast", "forecasting")
        qs = quantile_levels(quantiles)
        x_model, cluster, scale = self._prepare(series)
        out = self.outputs(x_model, cluster).double().numpy()
        s = scale[:, None]
        loc, sc, df = out[..., 0] * s, out[..., 1] * s, out[..., 2]
        cal = self.interval_calibration if calibrated else None
        mix = self._combination(calibrated)
        if mix is not None and mix.forecasting:  # the mixture with refitted classical members
            assert isinstance(self.preprocessor, ForecastPreprocessor)
            histories = self.preprocessor.histories(series)
            qv = mix.forecast(out, histories, scale, tuple(dict.fromkeys((*qs, 0.5))))
            loc = qv[0.5] if 0.5 in qs else qv.pop(0.5)
            # the mixture has no one Student-t: the MoE member's scale and df beside the
            # mixture's median read as an interval 20-40x too wide; NaN says "none"
            sc, df = np.full_like(loc, np.nan), np.full_like(loc, np.nan)
        else:
            qv = t_quantiles(loc, sc, df, qs, cluster, cal)
        if calibrated:  # the support: >= 0 where the history never went below 0 (also
            # where the budget left no time to calibrate: a count gets no negative quantile)
            keep = never_negative(series, x_model)[:, None]
            loc = np.where(keep, np.maximum(loc, 0.0), loc)
            qv = {q: np.where(keep, np.maximum(v, 0.0), v) for q, v in qv.items()}
        return Forecast(loc, sc, df, qv, cluster, self._experts_of(x_model, cluster))

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(
        self,
        x: Any,
        y: Any = None,
        crps_samples: int | None = None,
        seed: int | None = None,
    ) -> dict:
        """The test metrics of result.json on labelled data.

        `x` is raw data with labels `y` (routed as new samples), or a `Split` of a task
        built like the run's (preprocessed, cluster ids known, e.g. `task.test`): then the
        scores equal the run's exactly (the forward pass runs on the run's torch thread
        count, since a different count changes float summation order). `seed` and
        `crps_samples` (default: the run's) drive the sample CRPS. A forecaster saved as a
        combination refits its classical members on each series given (raw input), or on
        each window's context (a `Split`, which holds no whole histories: then its scores
        differ from the run's, whose members saw each series up to the window's end). A
        table's scikit-learn members are saved refitted on every row, the holdout's too:
        on the run's holdout their scores are then above the run's, which were of the
        members fitted without it.
        """
        info = self.spec.info
        seed = int(info.get("seed", 0)) if seed is None else int(seed)
        crps_samples = int(info.get("crps_samples", 100)) if crps_samples is None else crps_samples
        source, scale = None, None
        if isinstance(x, Split):
            x_model, cluster, y, source = x.x, x.cluster, x.y, x.source
        else:
            if y is None:
                raise SgemUserError("evaluate needs the true labels/targets: evaluate(x, y)")
            x_model, cluster, scale = self._prepare(x)
            y = np.asarray(y)
            if not self.is_classifier and not self.is_forecaster and len(y) == len(x_model):
                x_model, cluster, y = labelled_rows(x_model, cluster, y)
            target = info.get("target_standardisation")
            if scale is not None:
                y = y / scale[:, None]
            elif self.spec.classes and self.is_classifier:
                y = self._encode_labels(y)
            elif target and not self.is_classifier:
                y = ((y.astype(np.float64) - target["mean"]) / target["std"]).reshape(len(y), -1)
        if len(y) != len(x_model):
            raise SgemUserError(f"x has {len(x_model)} samples but y has {len(y)}")
        with _torch_threads(info.get("torch_threads")):
            out = self.outputs(x_model, cluster)
        scores = score_outputs(
            out,
            np.asarray(y),
            self.spec.loss,
            self._experts_of(x_model, cluster),
            self.spec.n_experts,
            source=source,
            crps_samples=crps_samples,
            seed=seed,
        )
        mix = self.combination
        if mix is not None and mix.forecasting:  # classical members refit on each context
            histories, s = (
                (list(np.asarray(x_model, np.float64)), np.ones(len(x_model)))
                if isinstance(x, Split)
                else (self.preprocessor.histories(x), scale)  # type: ignore[union-attr]
            )
            outs = [out.double().numpy(), *mix.classical_outputs(histories, s, out.shape[1])]
            combined = mix.scores_of(outs, np.asarray(y))
            q = mix.quantiles_of(outs, (0.1, 0.9))
            cover = coverage(np.asarray(y), q[0.1], q[0.9])["overall"]
            return without_moe_densities(scores | combined, combined) | {"test_coverage_80": cover}
        raw = out.double().numpy()
        if mix is not None:  # the saved combination's own scores
            scores |= mix.scores(raw, x_model, np.asarray(y))
        target = info.get("target_standardisation")
        if target and not self.is_classifier:  # a table's regression: the target's units
            scores |= in_target_units(scores, raw, y, float(target["std"]))
            # RMSE and MAE of what `predict` gives (the combination's point, clipped)
            truth = np.asarray(y, np.float64).reshape(len(y)) * target["std"] + target["mean"]
            err = self._point(raw, x_model) - truth
            scores["test_rmse"] = float(np.sqrt(np.mean(err**2)))
            scores["test_mae"] = float(np.mean(np.abs(err)))
        return scores | self._calibration_scores(raw, np.asarray(y), cluster, x, x_model)

    def _calibration_scores(
        self, out: np.ndarray, y: np.ndarray, cluster, x: Any, x_model: np.ndarray
    ) -> dict:
        """How calibrated what the model gives is on these labels: the ECE (15 bins) of
        `predict_proba` (and, without a combination, the NLL of its temperature-scaled
        probabilities: `test_nll` stays the network's own, as result.json has it), or the
        coverage of the central 80 % interval of `predict_quantiles` / `forecast` (as
        saved: calibrated where the model is, mixed where it is a combination)."""
        mix = self.combination
        if self.is_classifier:
            if mix is not None:
                return {"test_ece_15": expected_calibration_error(mix.proba(out, x_model), y)}
            t, floor = self.temperature or 1.0, float(self.calibration.get("floor", 0.0))
            probs = with_floor(softmax(out, t), floor)
            return {
                "test_ece_15": expected_calibration_error(probs, y),
                "test_nll_calibrated": probability_nll(probs, y),
            }
        cal = self.interval_calibration
        if mix is not None and not mix.forecasting:  # as `predict_quantiles` mixes them
            q = mix.quantiles(out, x_model, (0.1, 0.9))
        else:
            q = t_quantiles(out[..., 0], out[..., 1], out[..., 2], (0.1, 0.9), cluster, cal)
        lo, hi = q[0.1], q[0.9]
        if self.is_forecaster:  # as `forecast` clips (scale-free)
            context = x.x if isinstance(x, Split) else self._prepare(x)[0]
            keep = never_negative(x, context)[:, None]
            lo, hi = (np.where(keep, np.maximum(v, 0.0), v) for v in (lo, hi))
        elif not self.is_forecaster:  # as `predict_quantiles` gives them, in target units
            support = self.calibration.get("support")
            lo, hi, y = (self._unscale_target(v) for v in (lo, hi, y.astype(np.float64)))
            lo, hi = clip_to_support(lo, support), clip_to_support(hi, support)
        return {"test_coverage_80": coverage(y, lo, hi)["overall"]}

    def _encode_labels(self, y: np.ndarray) -> np.ndarray:
        index = {str(c): i for i, c in enumerate(self.classes)}
        try:
            return np.asarray([index[str(v)] for v in y], dtype=np.int64)
        except KeyError as exc:
            raise SgemUserError(
                f"label {exc.args[0]!r} is not one of the model's classes {self.classes}"
            ) from exc

    def _require(self, ok: bool, what: str, kind: str) -> None:
        if not ok:
            raise SgemUserError(
                f"{what}() is for {kind} models; this one is a "
                f"{'classifier' if self.is_classifier else 'forecaster/regressor'}"
            )

    # -- the leaderboard ---------------------------------------------------------------------
    def leaderboard(self):
        """The fit's leaderboard as a DataFrame: one row per model (the searched MoE, the
        global networks of its cells, the references of its kind, the saved model), its
        validation and holdout scores (`val_nll`, `holdout_nll`, ...); empty for a model
        saved without one."""
        from ..leaderboard.frame import leaderboard_frame

        return leaderboard_frame(self.spec.info.get("leaderboard"))

    # -- explanations ------------------------------------------------------------------------
    def explain(self, x: Any, embeddings: np.ndarray | None = None, ids: list | None = None):
        """Per row or series: cluster and expert (as `route`), distances to every centroid (a
        learnable gate's probabilities), the expert's and the fallback's validation NLL on
        the cluster, as a DataFrame (`sgem.moe.explain.explain`)."""
        from .explain import explain

        return explain(self, x, embeddings=embeddings, ids=ids)

    def explain_importance(self, x: Any, y: Any, n_repeats: int = 5, seed: int = 0):
        """Tables: permutation importance of each input column for each expert, on the rows
        routed to it (`sgem.moe.explain.permutation_importance`)."""
        from .explain import permutation_importance

        return permutation_importance(self, x, y, n_repeats=n_repeats, seed=seed)

    def export_onnx(self, path: str | os.PathLike, quantiles: Sequence[float] = DEFAULT_QUANTILES):
        """Write this model as one ONNX graph that onnxruntime runs alone; returns an
        `ExportInfo` naming its inputs and outputs (`sgem.export`; pip install
        'sgem[export]')."""
        from ..export import export_onnx

        return export_onnx(self, path, quantiles=quantiles)

    # -- summary ---------------------------------------------------------------------------
    def summary(self) -> str:
        """The model card: experts, their cells, their clusters and sizes, test metrics."""
        from .card import model_card

        return model_card(self)

    def __repr__(self) -> str:
        return self.summary()


def load(path: str | os.PathLike) -> SgemModel:
    """Load a saved model from a run directory (its `model/`) or a model directory."""
    return SgemModel.load(path)


__all__ = ["DEFAULT_QUANTILES", "Forecast", "Routing", "SgemModel", "load"]
