"""An expert shipped as two networks of its cell: the refit and the tracked one, averaged.

Why: a validation-chosen final length trains each network twice, once on the training split
while tracking validation (the tracked network, at its best step) and once on train +
validation for the chosen length (the refit). The two differ in data and in luck, and their
50/50 predictive mixture beat both on every seed measured (ts-offline, SGEM's final MoE,
seeds 0-4: test NLL 0.150 against 0.181 for the refit alone and 0.171 for the tracked
alone; `benchmarks/refit_ensemble.py`). The tracked network is free: it exists already.

A twin is one module with the output contract of a single network, so routing, scoring,
calibration, saving and ONNX export see an ordinary expert:

- classes: the log of the mean of the members' probabilities (exactly the mixture);
- Student-t outputs (loc, scale, df): the mean location, the mean df, and a scale that
  keeps the members' mean squared scale plus their locations' spread converted to scale
  units at that df (moment matching; exact where the members agree, and never narrower
  than their mean where they disagree).
"""

from __future__ import annotations

import math

import torch
from torch import nn

#: what model.json's expert entry says when the expert is a twin (`networks`: 2)
TWIN_NETWORKS = 2


class TwinExpert(nn.Module):
    """The averaged prediction of `networks` (same cell, same input and output shapes).

    `loss`: "cross_entropy" (outputs are logits) or "student_t" (outputs (..., 3) as
    (loc, scale, df)); the mixture is formed the way that loss reads an output."""

    def __init__(self, networks: list[nn.Module], loss: str) -> None:
        super().__init__()
        if len(networks) < 2:
            raise ValueError(f"a twin expert needs at least 2 networks, got {len(networks)}")
        if loss not in ("cross_entropy", "student_t"):
            raise ValueError(f"a twin expert averages class or Student-t outputs, not {loss!r}")
        self.networks = nn.ModuleList(networks)
        self.loss = loss

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = torch.stack([net(x) for net in self.networks])
        if self.loss == "cross_entropy":
            log_p = torch.log_softmax(outs.float(), dim=-1)
            return torch.logsumexp(log_p, dim=0) - math.log(len(self.networks))
        loc, scale, df = outs[..., 0], outs[..., 1], outs[..., 2]
        mean_loc, mean_df = loc.mean(0), df.mean(0)
        spread = ((loc - mean_loc) ** 2).mean(0) * (mean_df - 2.0) / mean_df
        mixed_scale = torch.sqrt((scale**2).mean(0) + spread)
        return torch.stack([mean_loc, mixed_scale, mean_df], dim=-1)


def n_networks(expert: nn.Module | None) -> int:
    """How many networks an expert holds (model.json's `networks`): 2 for a twin, else 1."""
    return len(expert.networks) if isinstance(expert, TwinExpert) else 1


__all__ = ["TWIN_NETWORKS", "TwinExpert", "n_networks"]
