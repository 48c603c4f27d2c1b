"""Whole saved models as one torch module each, ready to trace: raw input in, what
`predict_proba` / `predict_quantiles` / `forecast` return (calibrated, as by default) out.

    TableGraph(model, quantiles)(x[, codes])  tables and the toy
    SeriesGraph(model, quantiles)(history)    forecasters

Each output is named in `OUTPUTS`; `sgem.export.onnx_export` exports these modules.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..moe.calibration import with_floor
from ..moe.model import SgemModel
from ..moe.preprocess import ForecastPreprocessor, TabularPreprocessor
from .combination_parts import combination_part
from .graph_parts import GatedExperts, NearestCentroid, StudentTQuantiles, TableFeatures, clip
from .series_parts import Descriptors, ScaledContext

#: output names per kind, in the order the graph returns them
OUTPUTS = {
    "classifier": ("probabilities", "label_index", "cluster", "expert"),
    "regressor": ("quantiles", "point", "cluster", "expert"),
    "forecaster": ("quantiles", "point", "cluster", "expert"),
}


def _buffer(values) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.float64)


class TableGraph(nn.Module):
    """Features (and categorical codes) -> standardised -> nearest centroid -> the cluster's
    expert -> class probabilities with the saved temperature and floor, or regression
    quantiles with the conformal corrections, in the target's units, clipped to its support;
    a saved combination's instead (`sgem.export.combination_parts`)."""

    def __init__(self, model: SgemModel, quantiles: Sequence[float]) -> None:
        super().__init__()
        pre = model.preprocessor
        assert isinstance(pre, TabularPreprocessor)
        encoding = model.spec.info.get("encoding")
        self.features = TableFeatures(encoding) if encoding else None
        self.register_buffer("mean", _buffer(pre.mean))
        self.register_buffer("std", _buffer(pre.std))
        self.route = NearestCentroid(pre.centroids)
        self.learnable = model.learnable_gate
        moe = model.moe
        self.gated = moe if self.learnable else GatedExperts(moe.experts, moe.used, moe.assignment)
        self.classifier = model.is_classifier
        self.temperature = model.temperature
        self.combination = combination_part(model, quantiles)  # (None: the MoE alone)
        self.floor = float(model.calibration.get("floor", 0.0))
        target = model.spec.info.get("target_standardisation") or {"mean": 0.0, "std": 1.0}
        self.t_mean, self.t_std = float(target["mean"]), float(target["std"])
        self.support = model.calibration.get("support")
        self.quantiles = StudentTQuantiles(
            quantiles, model.interval_calibration, model.spec.n_clusters
        )

    def forward(self, x: torch.Tensor, codes: torch.Tensor | None = None):
        f = x if self.features is None else self.features(x, codes)
        z = (f - self.mean) / self.std
        cluster = self.route(z)
        xm = z.float()
        if self.learnable:
            out = self.gated(xm).float()
            expert = self.gated.gate_weights(xm).argmax(1)
        else:
            out, expert = self.gated(xm, cluster)
            out = out.float()
        if self.combination is not None:  # the members read the inputs `predict` gives them
            if self.classifier:
                mixed = self.combination(out, xm.double())
                return mixed.float(), mixed.argmax(1), cluster, expert
            q, point = self.combination(out, xm.double())
            q, point = (clip(v * self.t_std + self.t_mean, self.support) for v in (q, point))
            return q.transpose(0, 1), point, cluster, expert
        if self.classifier:
            t = self.temperature
            probs = with_floor(torch.softmax(out if t is None else out / t, dim=1), self.floor)
            return probs, out.argmax(1), cluster, expert
        point = out[:, 0, 0] * self.t_std + self.t_mean  # float32, as `predict` computes it
        o = out.double()
        q = self.quantiles(o[:, 0, 0], o[:, 0, 1], o[:, 0, 2], cluster)  # (Q, n)
        q = clip(q * self.t_std + self.t_mean, self.support)
        return q.transpose(0, 1), clip(point, self.support), cluster, expert


class SeriesGraph(nn.Module):
    """History (n, L) -> filled, scaled context -> descriptors -> nearest centroid -> the
    cluster's expert -> Student-t in the series' units -> calibrated quantiles (n, Q, H),
    kept >= 0 for a series whose history never went below 0 (as `forecast`)."""

    def __init__(self, model: SgemModel, quantiles: Sequence[float]) -> None:
        super().__init__()
        pre = model.preprocessor
        assert isinstance(pre, ForecastPreprocessor)
        self.window = ScaledContext(pre.context, pre.floor_fraction, pre.min_scale)
        self.describe = Descriptors(pre.context)
        self.register_buffer("d_mean", _buffer(pre.descriptor_mean))
        self.register_buffer("d_std", _buffer(pre.descriptor_std))
        self.route = NearestCentroid(pre.centroids)
        moe = model.moe
        self.gated = GatedExperts(moe.experts, moe.used, moe.assignment)
        cal = model.interval_calibration
        self.calibrated = cal is not None
        self.quantiles = StudentTQuantiles(quantiles, cal, model.spec.n_clusters)

    def forward(self, history: torch.Tensor):
        scaled, scale, keep = self.window(history)
        cluster = self.route((self.describe(scaled) - self.d_mean) / self.d_std)
        out, expert = self.gated(scaled.float(), cluster)
        o = out.double()
        s = scale[:, None]
        loc, sc = o[..., 0] * s, o[..., 1] * s
        q = self.quantiles(loc, sc, o[..., 2], cluster)  # (Q, n, H)
        if self.calibrated:
            k = keep[:, None]
            loc = torch.where(k, torch.clamp(loc, min=0.0), loc)
            q = torch.where(k[None], torch.clamp(q, min=0.0), q)
        return q.transpose(0, 1), loc, cluster, expert
