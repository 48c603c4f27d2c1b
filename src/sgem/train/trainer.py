"""Train one architecture on a cluster mask; return its per-cluster validation NLL vector.

One training run yields the whole M-vector from a single pass over the validation set,
including clusters outside the mask (the out-of-region evidence the routing search needs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask
from ..space.arch import Arch
from .losses import bucket_by_cluster, per_sample_nll


@dataclass(frozen=True)
class TrainConfig:
    """How a candidate is trained. Full-batch Adam suits the small tabular tasks."""

    steps: int = 150
    lr: float = 0.03
    weight_decay: float = 0.0
    batch_size: int | None = None  # None: full batch

    def __post_init__(self) -> None:
        if self.steps < 1 or self.lr <= 0:
            raise ValueError(f"need steps >= 1 and lr > 0, got {self}")


@dataclass(frozen=True)
class TrainOutcome:
    losses: np.ndarray  # (M,) mean per-sample validation NLL on every cluster
    seconds: float


class Trainer:
    """Holds the task's tensors once; trains candidates on masks of clusters."""

    def __init__(
        self, task: ClusteredTask, space, config: TrainConfig | None = None, device: str = "cpu"
    ) -> None:
        self.task = task
        self.space = space
        self.config = config or TrainConfig()
        self.device = torch.device(device)
        tr, va = task.train, task.val
        self.x_train = torch.as_tensor(tr.x, dtype=torch.float32, device=self.device)
        self.y_train = torch.as_tensor(tr.y, device=self.device)
        self.c_train = torch.as_tensor(tr.cluster, device=self.device)
        self.x_val = torch.as_tensor(va.x, dtype=torch.float32, device=self.device)
        self.y_val = torch.as_tensor(va.y, device=self.device)
        self.c_val = torch.as_tensor(va.cluster, device=self.device)
        flat = tr.x.reshape(len(tr.x), -1)
        self.x_mean = flat.mean(0)
        # one scale for all features: distances (and so radial ops) keep their geometry
        self.x_std = np.full(flat.shape[1], float(flat.std(0).mean()) + 1e-6, dtype=np.float32)
        self.n_out = task.n_classes if task.loss == "cross_entropy" else 3
        if hasattr(space, "output_size"):  # a space that knows it decides (3 * horizon)
            self.n_out = space.output_size(task)

    def build(self, arch: Arch) -> nn.Module:
        return self.space.build(
            arch, int(np.prod(self.task.input_shape)), self.n_out, self.x_mean, self.x_std
        ).to(self.device)

    def fit(
        self,
        arch: Arch,
        x: torch.Tensor,
        y: torch.Tensor,
        seed: int,
        steps: int | None = None,
    ) -> nn.Module:
        """Train a fresh network for `arch` on (x, y) with a deterministic seed."""
        if len(x) == 0:
            raise ValueError("cannot train on an empty set of samples")
        cfg = self.config
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = self.build(arch)
        if hasattr(model, "data_init"):
            model.data_init(x, gen)
        opt = torch.optim.Adam(
            model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True
        )
        model.train()
        n = len(x)
        bs = cfg.batch_size or n
        for _ in range(steps or cfg.steps):
            if bs >= n:
                xb, yb = x, y
            else:
                idx = torch.randint(n, (bs,), generator=gen)
                xb, yb = x[idx], y[idx]
            loss = per_sample_nll(model(xb), yb, self.task.loss).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        model.eval()
        return model

    @torch.no_grad()
    def cluster_losses(self, model: nn.Module) -> np.ndarray:
        """Mean validation NLL per cluster: one forward pass, losses bucketed by cluster."""
        nll = per_sample_nll(model(self.x_val), self.y_val, self.task.loss)
        return bucket_by_cluster(nll, self.c_val, self.task.n_clusters).double().cpu().numpy()

    def train(self, arch: Arch, mask: np.ndarray, seed: int) -> TrainOutcome:
        """Train `arch` on the training samples of the clusters selected by `mask`."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (self.task.n_clusters,):
            raise ValueError(f"mask must have shape ({self.task.n_clusters},), got {mask.shape}")
        if not mask.any():
            raise ValueError("mask selects no cluster; a candidate needs training data")
        start = time.perf_counter()
        sel = torch.as_tensor(mask, device=self.device)[self.c_train]
        model = self.fit(arch, self.x_train[sel], self.y_train[sel], seed)
        losses = self.cluster_losses(model)
        return TrainOutcome(losses, time.perf_counter() - start)
