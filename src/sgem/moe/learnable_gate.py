"""The final model with a learnable gate: a small network mixes the experts' predictions.

p(y | x) = sum_k g_k(x) softmax(f_k(x))_y with g = softmax(gate(x)). Gate and experts train
jointly from scratch on train + validation with the same loop and protocol as the
cluster-gated MoE (`Trainer.optimise`: optimiser, schedule, clipping, mixed precision), then
the model is tested once. Unlike the cluster gate it needs no cluster ids at test time and
can compensate for a poor partition, which is why the paper reports it as a secondary row:
it masks the routing quality that the cluster gate exposes.

The forward pass returns log p(y | x), so the task's cross-entropy on it is the mixture's
negative log-likelihood (log_softmax leaves normalised log-probabilities unchanged).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data.task import ClusteredTask
from ..random_streams import gate_expert_seed
from ..space.arch import Arch
from ..train.losses import per_sample_nll
from ..train.trainer import Trainer


class ConvGate(nn.Module):
    """A small CNN gate: two conv-BN-ReLU blocks (the second strided), GAP, linear -> K."""

    def __init__(self, in_channels: int, n_experts: int, width: int = 16) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.out = nn.Linear(2 * width, n_experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(x))


class MLPGate(nn.Module):
    """For non-image inputs: flatten, one hidden layer, linear -> K."""

    def __init__(self, in_features: int, n_experts: int, width: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(in_features, width), nn.ReLU(), nn.Linear(width, n_experts)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class LearnableGatedMoE(nn.Module):
    """Experts plus a gate network; `forward(x)` returns mixture log-probabilities."""

    def __init__(self, experts: Sequence[nn.Module], gate: nn.Module, x_mean, x_std) -> None:
        super().__init__()
        if len(experts) < 1:
            raise ValueError("a mixture needs at least one expert")
        self.experts = nn.ModuleList(experts)
        self.gate = gate
        self.register_buffer("x_mean", torch.as_tensor(x_mean, dtype=torch.float32))
        self.register_buffer("x_std", torch.as_tensor(x_std, dtype=torch.float32))

    def gate_weights(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, K) softmax gate values."""
        return F.softmax(self.gate_logits(x).float(), dim=1)

    def gate_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate((x - self.x_mean) / self.x_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        log_gate = F.log_softmax(self.gate_logits(x).float(), dim=1)  # (B, K)
        log_experts = torch.stack(
            [F.log_softmax(e(x).float(), dim=1) for e in self.experts], dim=1
        )  # (B, K, classes)
        return torch.logsumexp(log_gate.unsqueeze(-1) + log_experts, dim=1)


@dataclass
class GatedMoEReport:
    test_accuracy: float
    test_nll: float
    gate_usage: list[float]  # mean gate weight per expert on the test set
    seconds: float

    def to_json(self) -> dict:
        return {
            "test_accuracy": self.test_accuracy,
            "test_nll": self.test_nll,
            "gate_usage": [round(u, 4) for u in self.gate_usage],
            "seconds": round(self.seconds, 3),
        }


def make_gate(task: ClusteredTask, n_experts: int, width: int = 16) -> nn.Module:
    """A small CNN for image tasks (N, C, H, W), an MLP otherwise."""
    return gate_for_shape(task.input_shape, n_experts, width)


def gate_for_shape(shape: Sequence[int], n_experts: int, width: int = 16) -> nn.Module:
    """The gate of `make_gate` for inputs of `shape` (what a saved model rebuilds)."""
    shape = tuple(int(s) for s in shape)
    if len(shape) == 3:
        return ConvGate(shape[0], n_experts, width)
    return MLPGate(int(np.prod(shape)), n_experts, 2 * width)


def train_learnable_gate_moe(
    task: ClusteredTask,
    trainer: Trainer,
    architectures: Sequence[Arch],
    seed: int,
    steps: int | None = None,
    epochs: int | None = None,
    gate_width: int = 16,
) -> tuple[LearnableGatedMoE, GatedMoEReport]:
    """Train experts for `architectures` and a gate jointly on train + val; test once.

    The budget follows `Trainer.optimise`: `steps`, `epochs`, or the trainer's config.
    Classification only: a softmax mixture of class distributions.
    """
    if task.loss != "cross_entropy":
        raise ValueError(
            f"the learnable-gate MoE mixes class distributions; task {task.name!r} has loss "
            f"{task.loss!r}. Use the cluster-gated MoE (train_final_moe) for it."
        )
    if len(architectures) < 1:
        raise ValueError("train_learnable_gate_moe needs at least one architecture")
    start = time.perf_counter()
    dev = trainer.device
    x = torch.as_tensor(np.concatenate([task.train.x, task.val.x]), dtype=torch.float32, device=dev)
    y = torch.as_tensor(np.concatenate([task.train.y, task.val.y]), device=dev)

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    experts = []
    for k, arch in enumerate(architectures):
        torch.manual_seed(gate_expert_seed(seed, k))
        experts.append(trainer.build(arch))
    torch.manual_seed(gate_expert_seed(seed, len(architectures)))
    shape = (1, *task.input_shape)
    moe = LearnableGatedMoE(
        experts,
        make_gate(task, len(architectures), gate_width),
        trainer.x_mean.reshape(shape[1:]),
        trainer.x_std.reshape(shape[1:]),
    ).to(dev)
    if trainer.uses_channels_last:
        moe = moe.to(memory_format=torch.channels_last)
    trainer.optimise(moe, x, y, gen, steps=steps, epochs=epochs)

    x_test = torch.as_tensor(task.test.x, dtype=torch.float32, device=dev)
    y_test = torch.as_tensor(task.test.y, device=dev)
    out = trainer.predict(moe, x_test)
    with torch.no_grad():
        usage = torch.cat(
            [moe.gate_weights(x_test[i : i + 1024]) for i in range(0, max(len(x_test), 1), 1024)]
        ).mean(0)
    nll = float(per_sample_nll(out, y_test, "cross_entropy").mean())
    acc = float((out.argmax(1) == y_test).float().mean())
    report = GatedMoEReport(acc, nll, usage.cpu().tolist(), time.perf_counter() - start)
    return moe, report
