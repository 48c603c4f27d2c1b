"""The final model's routing: a cluster-gated MoE (a fixed cluster -> expert table).

Each cluster is routed to exactly one expert (the hard assignment the search returned); a
test sample goes to the expert of its cluster (nearest training centroid). The final stage
(`sgem.final.moe_fit.train_final_moe`) trains its experts; this module is only the model.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..space.arch import Arch


class ClusterGatedMoE(nn.Module):
    """Experts plus a fixed cluster -> expert table. Unused experts are None."""

    def __init__(
        self,
        experts: list[nn.Module | None],
        assignment: np.ndarray,
        architectures: list[Arch] | None = None,
    ) -> None:
        super().__init__()
        self.experts = nn.ModuleList(e if e is not None else nn.Identity() for e in experts)
        self.used = [e is not None for e in experts]
        self.architectures = list(architectures or [])
        self.register_buffer("assignment", torch.as_tensor(assignment, dtype=torch.long))

    def forward(self, x: torch.Tensor, cluster: torch.Tensor) -> torch.Tensor:
        expert_of = self.assignment[cluster]
        out = None
        for k, expert in enumerate(self.experts):
            sel = expert_of == k
            if not sel.any():
                continue
            if not self.used[k]:
                raise RuntimeError(f"expert {k} has no cluster but a sample was routed to it")
            y = expert(x[sel])
            if out is None:
                out = torch.zeros((len(x), *y.shape[1:]), dtype=y.dtype, device=y.device)
            out[sel] = y
        return out


def compact_assignment(assignment: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """The cluster -> expert table renumbered over the experts that own a cluster, in order,
    and those experts' old indices (what a saved model keeps)."""
    kept = sorted(set(np.asarray(assignment).tolist()))
    index = {k: i for i, k in enumerate(kept)}
    return np.asarray([index[int(a)] for a in assignment]), kept


__all__ = ["ClusterGatedMoE", "compact_assignment"]
