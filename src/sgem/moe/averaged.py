"""An expert shipped as several networks of its cell, averaged.

Why: the final stage trains networks it then throws away. A validation-chosen length trains
each expert twice, once on the training split while tracking validation (the tracked
network, at its best step) and once on train + validation (the refit); the two differ in
data and in luck, and their 50/50 predictive mixture beat both on every seed measured
(ts-offline, SGEM's final MoE, seeds 0-4: test NLL 0.150 against 0.181 for the refit alone
and 0.171 for the tracked alone; `benchmarks/results/refit_ensemble_sgem.json`). Shipping
both ("twins", `FinalProtocol.twins`) costs no training. A table's global network is also
trained once per fold for its out-of-fold outputs (`sgem.leaderboard.members`): those fold
networks are averaged with it.

An averaged expert is one module with the output contract of a single network, so routing,
scoring, calibration, saving (model.json's `networks`) and ONNX export see an ordinary
expert:

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

#: the most networks one expert may average (model.json's `networks`: 1 to this)
MAX_NETWORKS = 8


class AveragedExpert(nn.Module):
    """The averaged prediction of `networks` (same cell, same input and output shapes).

    `loss`: "cross_entropy" (outputs are logits) or "student_t" (outputs (..., 3) as
    (loc, scale, df)); the mixture is formed the way that loss reads an output. A member
    that is itself averaged contributes its networks (one flat average: saved and loaded as
    model.json's `networks` count)."""

    def __init__(self, networks: list[nn.Module], loss: str) -> None:
        super().__init__()
        networks = [m for n in networks for m in _members(n)]
        if len(networks) < 2:
            raise ValueError(f"an averaged expert needs at least 2 networks, got {len(networks)}")
        if loss not in ("cross_entropy", "student_t"):
            raise ValueError(f"an averaged expert mixes class or Student-t outputs, not {loss!r}")
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


def _members(network: nn.Module) -> list[nn.Module]:
    return list(network.networks) if isinstance(network, AveragedExpert) else [network]


def n_networks(expert: nn.Module | None) -> int:
    """How many networks an expert holds (model.json's `networks`)."""
    return len(expert.networks) if isinstance(expert, AveragedExpert) else 1


__all__ = ["MAX_NETWORKS", "AveragedExpert", "n_networks"]
