"""MoLE (Ni et al. 2024): a mixture of linear experts with its own learnable gate.

K DLinear experts each emit raw Student-t parameters; a softmax gate computed from the
context (a linear map L -> K; MoLE also feeds timestamps, which would reveal the domain's
frequency and are not used) weights them, and the mixed raw parameters are constrained
into one Student-t per step, as in MoLE, which mixes the experts' outputs, not their
densities. Trained end to end on train + validation; no clusters and no domain labels.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from .base import fit_network, forecast_result, require_forecasting
from .dlinear import DLinearRaw, constrain


class MixtureOfLinearExperts(nn.Module):
    """(B, L) -> (B, H, 3): gate-weighted sum of K DLinear experts' raw parameters."""

    def __init__(self, context: int, horizon: int, n_experts: int, kernel: int = 25) -> None:
        super().__init__()
        self.experts = nn.ModuleList(DLinearRaw(context, horizon, kernel) for _ in range(n_experts))
        self.gate = nn.Linear(context, n_experts)

    def gate_weights(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.gate(x.reshape(len(x), -1)), dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(len(x), -1)
        raw = torch.stack([e(x) for e in self.experts], dim=1)  # (B, K, H, 3)
        w = self.gate_weights(x)[:, :, None, None]
        return constrain((w * raw).sum(dim=1))


class MoLE:
    """Mixture of K linear experts with a learnable softmax gate over the context."""

    name = "mole"
    uses_domain_labels = False

    def __init__(self, kernel: int = 25) -> None:
        self.kernel = kernel

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        require_forecasting(task, self.name)
        start = time.perf_counter()
        context, horizon = task.train.x.shape[1], task.train.y.shape[1]
        torch.manual_seed(seed)
        net = MixtureOfLinearExperts(context, horizon, budget.n_experts, self.kernel)
        model, steps = fit_network(net, task, budget)
        with torch.no_grad():
            x = torch.as_tensor(task.test.x, dtype=torch.float32, device=budget.device)
            out = model(x)
            usage = model.gate_weights(x).mean(0).cpu().numpy()
        return forecast_result(
            self.name,
            budget,
            out,
            start,
            {"steps": steps, "gate_usage": np.round(usage, 4).tolist()},
        )
