"""DLinear (Zeng et al. 2023) with a Student-t head.

The context is split into a trend (moving average of width `kernel`, edges padded by
repetition) and a remainder; one linear map L -> H per component, summed, gives the
location. For a probabilistic forecast two more linear maps L -> H give the raw scale and
degrees of freedom (scale = min_scale + softplus, df = 2 + softplus, the convention of the
search space's head). Trained on train + validation with the final-training protocol
(`fit_network`): one global model, no routing.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from .base import fit_network, forecast_result, require_forecasting


def decompose(x: torch.Tensor, kernel: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(trend, remainder) of (B, L) windows: centred moving average, replicate padding."""
    left, right = (kernel - 1) // 2, kernel // 2
    padded = torch.cat([x[:, :1].expand(-1, left), x, x[:, -1:].expand(-1, right)], dim=1)
    trend = F.avg_pool1d(padded.unsqueeze(1), kernel, stride=1).squeeze(1)
    return trend, x - trend


class DLinearRaw(nn.Module):
    """(B, L) -> (B, H, 3) raw (unconstrained) Student-t parameters."""

    def __init__(self, context: int, horizon: int, kernel: int = 25) -> None:
        super().__init__()
        self.kernel, self.horizon = kernel, horizon
        self.trend = nn.Linear(context, horizon)
        self.season = nn.Linear(context, horizon)
        self.scale = nn.Linear(context, horizon)
        self.df = nn.Linear(context, horizon)
        nn.init.zeros_(self.df.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        trend, rest = decompose(x, self.kernel)
        loc = self.trend(trend) + self.season(rest)
        # the spread sees the context's roughness as well as its values
        return torch.stack([loc, self.scale(x.abs()), self.df(x)], dim=-1)


def constrain(raw: torch.Tensor, min_scale: float = 1e-3) -> torch.Tensor:
    """Raw (loc, scale, df) -> (loc, min_scale + softplus, 2 + softplus)."""
    loc = raw[..., 0]
    scale = min_scale + F.softplus(raw[..., 1])
    df = 2.0 + F.softplus(raw[..., 2])
    return torch.stack([loc, scale, df], dim=-1)


class DLinearT(nn.Module):
    """DLinear with a Student-t head: (B, L) -> (B, H, 3)."""

    def __init__(self, context: int, horizon: int, kernel: int = 25) -> None:
        super().__init__()
        self.raw = DLinearRaw(context, horizon, kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return constrain(self.raw(x.reshape(len(x), -1)))


class DLinear:
    """One global DLinear forecaster with a Student-t head."""

    name = "dlinear"
    uses_domain_labels = False

    def __init__(self, kernel: int = 25) -> None:
        self.kernel = kernel

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        require_forecasting(task, self.name)
        start = time.perf_counter()
        context, horizon = task.train.x.shape[1], task.train.y.shape[1]
        torch.manual_seed(seed)
        model, steps = fit_network(DLinearT(context, horizon, self.kernel), task, budget)
        with torch.no_grad():
            x = torch.as_tensor(task.test.x, dtype=torch.float32, device=budget.device)
            out = model(x)
        return forecast_result(self.name, budget, out, start, {"steps": steps})
