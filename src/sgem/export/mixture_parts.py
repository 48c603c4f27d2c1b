"""A regression combination's quantiles as tensor ops: `sgem.moe.combination.
mixture_quantiles` (bisection of the mixture's CDF between the members' own extreme
quantiles), traced into the ONNX graph.

ONNX has no Student-t CDF. With t = sqrt(df) tan(phi), the density becomes
cos(phi)^(df - 1) up to a constant, so F(x) = 1/2 + sign(x) I(atan(|x| / sqrt(df))) /
(2 I(pi / 2)) with I(a) the integral of cos^(df - 1) over [0, a]: no Gamma function, and
the integrand is smooth. I is taken by 32-point Gauss-Legendre on two panels split at
8 / sqrt(df - 1) (where a large df's peak has fallen below e^-32): its error against
scipy is below 2e-9 for df in [2, 1e4] and |x| up to 600 (tests/test_export.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .graph_parts import StudentTQuantiles

#: Gauss-Legendre nodes per panel of the Student-t CDF's integral
NODES = 32
#: bisection steps, as `mixture_quantiles` takes them
STEPS = 60


def _atan(r: torch.Tensor) -> torch.Tensor:
    """atan(r) for r >= 0 in float64: onnxruntime's Atan takes float32 only, so its float32
    value is refined by two Newton steps on sin(phi) - r cos(phi) = 0."""
    phi = torch.atan(r.float()).double()
    for _ in range(2):
        sin, cos = torch.sin(phi), torch.cos(phi)
        phi = phi - (sin - r * cos) / (cos + r * sin)
    return phi


class StudentTCdf(nn.Module):
    """scipy.stats.t.cdf(x, df) for df > 1, float64 (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        nodes, weights = np.polynomial.legendre.leggauss(NODES)
        self.register_buffer("nodes", torch.as_tensor(nodes, dtype=torch.float64))
        self.register_buffer("weights", torch.as_tensor(weights, dtype=torch.float64))

    def integral(self, end: torch.Tensor, df: torch.Tensor) -> torch.Tensor:
        """The integral of cos(phi)^(df - 1) over [0, end], elementwise."""
        split = torch.minimum(end, 8.0 / torch.sqrt(torch.clamp(df - 1.0, min=1e-12)))
        total = torch.zeros_like(end)
        for lo, hi in ((torch.zeros_like(end), split), (split, end)):
            mid, half = (lo + hi) / 2, (hi - lo) / 2
            phi = mid.unsqueeze(-1) + half.unsqueeze(-1) * self.nodes
            f = torch.clamp(torch.cos(phi), min=0.0) ** (df - 1.0).unsqueeze(-1)
            total = total + half * (f * self.weights).sum(-1)
        return total

    def forward(self, x: torch.Tensor, df: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
        """`whole`: `integral(pi / 2, df)`, computed once per df."""
        end = _atan(torch.abs(x) / torch.sqrt(df))
        return 0.5 + torch.sign(x) * self.integral(end, df) / (2.0 * whole)


class MixtureQuantiles(nn.Module):
    """Quantiles (Q, n) of the weighted mixture of Student-t members given as (members, n)
    locations, scales and dfs: bracketed by the members' own extreme quantiles (t.ppf from
    `StudentTQuantiles`' table), then `STEPS` bisection steps of the mixture's CDF, each a
    quadrature per member, row and quantile (1024 rows, three members, three quantiles:
    0.73 s, `benchmarks/latency.py`). Where the CDF is flat at q (members far apart), any
    point of the flat stretch is a q-quantile, and the one found may differ from numpy's."""

    def __init__(self, quantiles: Sequence[float], weights: Sequence[float] | np.ndarray) -> None:
        super().__init__()
        qs = sorted(float(q) for q in quantiles)
        self.own = StudentTQuantiles(qs, None, 1)
        self.cdf = StudentTCdf()
        self.register_buffer("q", torch.as_tensor(qs, dtype=torch.float64)[:, None])
        self.register_buffer("w", torch.as_tensor(weights, dtype=torch.float64)[None, :, None])

    def forward(self, loc: torch.Tensor, scale: torch.Tensor, df: torch.Tensor) -> torch.Tensor:
        own = self.own(loc, scale, df, torch.zeros(1, dtype=torch.long))  # (Q, members, n)
        lo, hi = own.min(1).values, own.max(1).values
        whole = self.cdf.integral(torch.full_like(df, math.pi / 2), df)
        for _ in range(STEPS):
            mid = 0.5 * (lo + hi)
            z = (mid.unsqueeze(1) - loc) / scale  # (Q, members, n)
            below = (self.w * self.cdf(z, df.expand_as(z), whole.expand_as(z))).sum(1) < self.q
            lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
        return 0.5 * (lo + hi)


__all__ = ["NODES", "STEPS", "MixtureQuantiles", "StudentTCdf"]
