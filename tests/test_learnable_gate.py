"""The learnable-gate MoE: a proper mixture, trained jointly, tested once."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_darts_space import tiny_image_task

from sgem.data.task import ClusteredTask, Split
from sgem.moe import LearnableGatedMoE, train_learnable_gate_moe
from sgem.moe.learnable_gate import ConvGate, MLPGate, make_gate
from sgem.space import Arch, DartsSpace, TabularSpace
from sgem.train import TrainConfig, Trainer

ARCHS = [
    Arch(("sep_conv_3x3", "skip", "max_pool_3x3", "sep_conv_3x3"), (0, 0, 0, 1)),
    Arch(("skip", "sep_conv_5x5", "skip", "max_pool_3x3"), (0, 0, 0, 1)),
]


class _Fixed(torch.nn.Module):
    def __init__(self, logits: list[float]) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.tensor(logits))

    def forward(self, x):
        return self.logits.expand(len(x), -1)


def test_mixture_is_the_gate_weighted_average_of_expert_probabilities() -> None:
    experts = [_Fixed([2.0, 0.0, -1.0]), _Fixed([-1.0, 0.5, 0.5])]
    gate = _Fixed([0.3, -0.2])
    moe = LearnableGatedMoE(experts, gate, np.zeros(4), np.ones(4))
    x = torch.randn(5, 4)
    out = moe(x)
    g = torch.softmax(torch.tensor([0.3, -0.2]), 0)
    p = g[0] * torch.softmax(torch.tensor([2.0, 0.0, -1.0]), 0) + g[1] * torch.softmax(
        torch.tensor([-1.0, 0.5, 0.5]), 0
    )
    torch.testing.assert_close(out.exp(), p.expand(5, -1))
    torch.testing.assert_close(moe.gate_weights(x), g.expand(5, -1))
    # normalised log-probabilities: cross-entropy on them is the mixture NLL
    torch.testing.assert_close(torch.log_softmax(out, 1), out)


def test_gate_factory_matches_the_input() -> None:
    images = tiny_image_task()
    assert isinstance(make_gate(images, 3), ConvGate)
    assert make_gate(images, 3)(torch.randn(2, 3, 8, 8)).shape == (2, 3)
    from sgem.data.toy import make_toy_task

    assert isinstance(make_gate(make_toy_task(0), 2), MLPGate)


def test_trained_jointly_on_tiny_images() -> None:
    task = tiny_image_task()
    cfg = TrainConfig(
        epochs=10, batch_size=16, optimizer="sgd", lr=0.1, schedule="cosine", grad_clip=5.0
    )
    trainer = Trainer(task, DartsSpace(n_cell_nodes=2, init_channels=4), cfg)
    moe, report = train_learnable_gate_moe(task, trainer, ARCHS, seed=0, gate_width=4)
    assert report.test_accuracy > 0.9  # chance is 0.25
    assert np.isfinite(report.test_nll)
    assert len(report.gate_usage) == 2 and sum(report.gate_usage) == pytest.approx(1.0)
    assert set(report.to_json()) == {"test_accuracy", "test_nll", "gate_usage", "seconds"}
    assert not moe.training
    # the same seed trains the same model
    _, again = train_learnable_gate_moe(task, trainer, ARCHS, seed=0, gate_width=4, steps=3)
    _, twice = train_learnable_gate_moe(task, trainer, ARCHS, seed=0, gate_width=4, steps=3)
    assert again.test_nll == twice.test_nll


def test_rejects_forecasting_tasks_and_empty_expert_lists() -> None:
    rng = np.random.default_rng(0)

    def split(n):
        return Split(rng.normal(size=(n, 4)), rng.normal(size=(n, 2)), np.arange(n) % 3)

    task = ClusteredTask("reg", split(12), split(6), split(6), 3, loss="student_t")

    class _Space(TabularSpace):
        def output_size(self, task):
            return 6

    with pytest.raises(ValueError, match="cluster-gated"):
        train_learnable_gate_moe(task, Trainer(task, _Space()), ARCHS, seed=0)
    images = tiny_image_task()
    trainer = Trainer(images, DartsSpace(n_cell_nodes=2, init_channels=4))
    with pytest.raises(ValueError, match="at least one"):
        train_learnable_gate_moe(images, trainer, [], seed=0)
