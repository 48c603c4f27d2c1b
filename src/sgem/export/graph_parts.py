"""The pieces of an exported graph, as torch modules that trace to plain ONNX ops.

Why torch: the experts already are torch modules, so writing preprocessing, routing and
calibration next to them as tensor ops lets one `torch.onnx.export` trace the whole model.
Every piece mirrors a numpy function of the predict path (named in its docstring) and works
in float64 where that function does, so routing ties and calibrated quantiles come out as
`SgemModel` computes them; only the experts run in float32, as they do in `predict`.
No data-dependent Python control flow: every expert runs on every row and each row keeps
its own expert's output (the experts are small; a static graph keeps one-row latency low).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from scipy import stats
from torch import nn

from ..moe.calibration import IntervalCalibration

#: points of the Student-t quantile table over u = 1 / df in [0, 1/2] (df > 2 always)
T_GRID = 16385


def _const(values, dtype=torch.float64) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values), dtype=dtype)


class NearestCentroid(nn.Module):
    """`sgem.data.clustering.assign_to_centroids`: argmin of |c|^2 - 2 z.c, in float64."""

    def __init__(self, centroids: np.ndarray) -> None:
        super().__init__()
        c = np.asarray(centroids, dtype=np.float64)
        self.register_buffer("centroids_t", _const(c.T))
        self.register_buffer("c_sq", _const((c**2).sum(1)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.argmin(self.c_sq - 2.0 * (z @ self.centroids_t), dim=1)


class GatedExperts(nn.Module):
    """`ClusterGatedMoE.forward` without its boolean indexing: each row keeps the output of
    the expert its cluster is assigned to (experts that own no cluster are left out)."""

    def __init__(self, experts: Sequence[nn.Module], used: Sequence[bool], assignment) -> None:
        super().__init__()
        self.index = [k for k, u in enumerate(used) if u]
        self.experts = nn.ModuleList(experts[k] for k in self.index)
        self.register_buffer("assignment", _const(assignment, torch.long))

    def forward(self, x: torch.Tensor, cluster: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        expert = self.assignment[cluster]
        out = None
        for k, net in zip(self.index, self.experts, strict=True):
            y = net(x)
            if out is None:
                out = y
                continue
            mask = (expert == k).reshape((-1,) + (1,) * (y.dim() - 1))
            out = torch.where(mask, y, out)
        assert out is not None
        return out, expert


class StudentTQuantiles(nn.Module):
    """`sgem.moe.calibration.t_quantiles` for a fixed set of quantiles.

    ONNX has no Student-t quantile function, so t.ppf(q, df) is read from a table over
    u = 1 / df (smooth in u, u = 0 is the Normal) with linear interpolation: its error is
    below 1e-7 times the scale (tests/test_export.py). The conformal correction of each
    quantile is precomputed per cluster (its own or the pooled one) and gathered by cluster.
    Output (Q, ...) in ascending q, sorted per sample as `t_quantiles` sorts them.
    """

    def __init__(
        self,
        quantiles: Sequence[float],
        calibration: IntervalCalibration | None,
        n_clusters: int,
    ) -> None:
        super().__init__()
        qs = sorted(float(q) for q in quantiles)
        self.n_grid = T_GRID
        u = np.linspace(0.0, 0.5, T_GRID)
        with np.errstate(divide="ignore"):
            df = np.where(u > 0, 1.0 / np.where(u > 0, u, 1.0), np.inf)
        table = np.stack([stats.t.ppf(q, df) for q in qs])  # (Q, grid)
        self.register_buffer("table", _const(table))
        corr = np.zeros((len(qs), n_clusters))
        sign = np.sign(np.asarray(qs) - 0.5)
        if calibration is not None:
            for i, q in enumerate(qs):
                if q != 0.5:
                    corr[i] = calibration.correction(abs(2 * q - 1), np.arange(n_clusters))
        self.register_buffer("shift", _const(corr * sign[:, None]))  # (Q, clusters)

    def forward(
        self, loc: torch.Tensor, scale: torch.Tensor, df: torch.Tensor, cluster: torch.Tensor
    ) -> torch.Tensor:
        pos = (1.0 / df) * float(2 * (self.n_grid - 1))  # u / (0.5 / (grid - 1))
        pos = torch.clamp(pos, 0.0, float(self.n_grid - 1))
        lo = torch.clamp(torch.floor(pos), max=float(self.n_grid - 2))
        frac = pos - lo
        lo_i = lo.long()
        values = []
        for i in range(self.table.shape[0]):
            row = self.table[i]
            t = row[lo_i] + (row[lo_i + 1] - row[lo_i]) * frac
            shift = self.shift[i][cluster].reshape((-1,) + (1,) * (loc.dim() - 1))
            values.append(loc + scale * t + shift * scale)
        return torch.sort(torch.stack(values), dim=0).values


def clip(values: torch.Tensor, support: dict | None) -> torch.Tensor:
    """`sgem.moe.calibration.clip_to_support`."""
    if not support:
        return values
    if support.get("lower") is not None:
        values = torch.clamp(values, min=float(support["lower"]))
    if support.get("upper") is not None:
        values = torch.clamp(values, max=float(support["upper"]))
    return values


class TableFeatures(nn.Module):
    """`sgem.data.files_tabular.encode_table` on numbers: numeric columns (NaN = missing)
    imputed with their training median and given their missing indicator, categorical
    columns one-hot from integer codes (-1 unseen: all zero; `n_categories`: missing, given
    the most frequent training category), in the encoding's column order, in float64 as
    `encode_table` gives them (a saved combination's trees split on exact values)."""

    def __init__(self, encoding: dict) -> None:
        super().__init__()
        self.plan: list[tuple[str, int, dict]] = []
        self.impute = encoding.get("missing", "error") == "impute"
        n_num = n_cat = 0
        for spec in encoding["columns"]:
            if spec["kind"] == "onehot":
                self.plan.append(("onehot", n_cat, spec))
                n_cat += 1
            else:
                self.plan.append(("numeric", n_num, spec))
                n_num += 1
        self.n_numeric, self.n_categorical = n_num, n_cat

    def forward(self, x: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        blocks = []
        for kind, j, spec in self.plan:
            if kind == "numeric":
                v = x[:, j : j + 1]
                absent = torch.isnan(v)
                if self.impute and "median" in spec:
                    v = torch.where(absent, torch.full_like(v, float(spec["median"])), v)
                blocks.append(v)
                if spec.get("indicator"):
                    blocks.append(absent.double())
                continue
            k = len(spec["categories"])
            c = codes[:, j : j + 1]
            if self.impute and spec.get("fill") is not None:
                fill = spec["categories"].index(spec["fill"])
                c = torch.where(c == k, torch.full_like(c, fill), c)
            blocks.append((c == torch.arange(k)).double())
        return torch.cat(blocks, dim=1)
