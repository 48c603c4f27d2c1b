"""The final model: a cluster-gated MoE, retrained on train + validation, tested once.

Each cluster is routed to exactly one expert (the hard assignment the search returned); a
test sample goes to the expert of its cluster (nearest training centroid).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask
from ..space.arch import Arch
from ..train.losses import per_sample_nll
from ..train.trainer import Trainer


class ClusterGatedMoE(nn.Module):
    """Experts plus a fixed cluster -> expert table. Unused experts are None."""

    def __init__(self, experts: list[nn.Module | None], assignment: np.ndarray) -> None:
        super().__init__()
        self.experts = nn.ModuleList(e if e is not None else nn.Identity() for e in experts)
        self.used = [e is not None for e in experts]
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
                out = torch.zeros((len(x), *y.shape[1:]), dtype=y.dtype)
            out[sel] = y
        return out


@dataclass
class MoEReport:
    test_accuracy: float | None
    test_nll: float
    per_expert_test_accuracy: list[float | None]
    seconds: float

    def to_json(self) -> dict:
        return {
            "test_accuracy": self.test_accuracy,
            "test_nll": self.test_nll,
            "per_expert_test_accuracy": self.per_expert_test_accuracy,
            "seconds": round(self.seconds, 3),
        }


def train_final_moe(
    task: ClusteredTask,
    trainer: Trainer,
    assignment: np.ndarray,
    architectures: list[Arch],
    steps: int,
    seed: int,
) -> tuple[ClusterGatedMoE, MoEReport]:
    """Retrain each expert from scratch on its region of train + validation; test once."""
    start = time.perf_counter()
    assignment = np.asarray(assignment)
    x = torch.as_tensor(
        np.concatenate([task.train.x, task.val.x]), dtype=torch.float32, device=trainer.device
    )
    y = torch.as_tensor(np.concatenate([task.train.y, task.val.y]), device=trainer.device)
    c = np.concatenate([task.train.cluster, task.val.cluster])
    experts: list[nn.Module | None] = []
    for k, arch in enumerate(architectures):
        region = assignment == k
        if not region.any():
            experts.append(None)
            continue
        sel = torch.as_tensor(region[c], device=trainer.device)
        experts.append(trainer.fit(arch, x[sel], y[sel], seed=seed * 101 + k, steps=steps))
    moe = ClusterGatedMoE(experts, assignment).eval()

    x_test = torch.as_tensor(task.test.x, dtype=torch.float32, device=trainer.device)
    y_test = torch.as_tensor(task.test.y, device=trainer.device)
    c_test = torch.as_tensor(task.test.cluster, device=trainer.device)
    with torch.no_grad():
        out = moe(x_test, c_test)
        nll = float(per_sample_nll(out, y_test, task.loss).mean())
    acc, per_expert = None, []
    if task.loss == "cross_entropy":
        correct = (out.argmax(1) == y_test).cpu().numpy()
        acc = float(correct.mean())
        expert_of = assignment[task.test.cluster]
        for k in range(len(architectures)):
            sel = expert_of == k
            per_expert.append(float(correct[sel].mean()) if sel.any() else None)
    return moe, MoEReport(acc, nll, per_expert, time.perf_counter() - start)
