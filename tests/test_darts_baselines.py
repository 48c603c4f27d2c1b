"""One-shot DARTS (supernet, alternating updates, genotype), DARTS x K, the DARTS oracle
MoE and the decomposition ablation, on tiny images."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from test_darts_space import tiny_image_task

from sgem.baselines.darts import (
    DartsConfig,
    DartsOracleMoE,
    DartsSupernet,
    DartsXK,
    darts_search,
    derive_genotype,
    edge_index,
    oracle_assignment,
)
from sgem.baselines.decomposition import DecompositionSetting, run_decomposition
from sgem.data.toy import make_toy_task
from sgem.methods.budget import MethodBudget
from sgem.space import Arch, DartsSpace, TabularSpace
from sgem.train import TrainConfig, Trainer

SPACE = DartsSpace(n_cell_nodes=2, init_channels=4)
TRAIN = TrainConfig(
    epochs=3, batch_size=16, optimizer="sgd", lr=0.1, schedule="cosine", grad_clip=5.0
)
FAST_DARTS = DartsConfig(
    weights=dataclasses.replace(TRAIN, epochs=2, lr=0.05, nesterov=False), alpha_lr=3e-3
)


@pytest.fixture(scope="module")
def task():
    return tiny_image_task(n=128)


def _setup(seed: int = 0) -> MethodBudget:
    return MethodBudget(
        seed=seed, space=SPACE, train=TRAIN, n_experts=2, final_steps=1, final_epochs=3
    )


def test_edges_and_genotype_rule() -> None:
    assert edge_index(3) == [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2)]
    ops = SPACE.op_names
    alpha = np.zeros((3, 4))
    # node 0 (one edge, from the input): its two strongest ops
    alpha[0, ops.index("sep_conv_5x5")] = 3.0
    alpha[0, ops.index("skip")] = 2.0
    # node 1: edge from state 1 is the strongest (pool), then from state 0 (sep 3x3)
    alpha[1, ops.index("sep_conv_3x3")] = 1.0
    alpha[2, ops.index("max_pool_3x3")] = 4.0
    arch = derive_genotype(alpha, SPACE)
    want = SPACE.canonical(
        Arch(("sep_conv_5x5", "skip", "max_pool_3x3", "sep_conv_3x3"), (0, 0, 1, 0))
    )
    assert arch == want
    with pytest.raises(ValueError, match="shape"):
        derive_genotype(np.zeros((2, 4)), SPACE)


def test_supernet_mixes_every_edge(task) -> None:
    net = DartsSupernet(SPACE, 4, None, None)
    assert net.alpha.shape == (3, 4)
    assert all(p is not net.alpha for p in net.weight_parameters())
    out = net(torch.randn(2, 3, 8, 8))
    assert out.shape == (2, 4)
    out.sum().backward()
    assert net.alpha.grad is not None and net.alpha.grad.abs().sum() > 0


def test_search_moves_alpha_and_returns_a_valid_cell(task) -> None:
    trainer = Trainer(task, SPACE, TRAIN)
    found = darts_search(trainer, None, FAST_DARTS, seed=0)
    SPACE.validate(found.arch)
    assert found.arch == derive_genotype(found.alpha, SPACE)
    assert np.abs(found.alpha).max() > 1e-2  # started at ~1e-3
    assert [h["epoch"] for h in found.history] == [1, 2]
    assert all(np.isfinite(h["train_loss"]) for h in found.history)
    again = darts_search(trainer, None, FAST_DARTS, seed=0)
    np.testing.assert_array_equal(found.alpha, again.alpha)
    with pytest.raises(ValueError, match="DartsSpace"):
        darts_search(Trainer(make_toy_task(0), TabularSpace()), None, FAST_DARTS)
    with pytest.raises(ValueError, match="mask"):
        darts_search(trainer, np.zeros(4, bool), FAST_DARTS)
    with pytest.raises(ValueError, match="epochs"):
        DartsConfig(weights=TrainConfig())


def test_darts_x_k_and_oracle(task) -> None:
    setup = _setup()
    xk = DartsXK(FAST_DARTS).fit_evaluate(task, setup).row(task)
    assert xk["method"] == "darts_x_k" and not xk["uses_domain_labels"]
    assert len(set(xk["architectures"])) == 1 and len(xk["assignment"]) == 4
    assert 0.0 <= xk["test_accuracy"] <= 1.0 and 0.5 <= xk["oracle_match"] <= 1.0
    oracle = DartsOracleMoE(FAST_DARTS).fit_evaluate(task, setup).row(task)
    assert oracle["uses_domain_labels"] and oracle["oracle_match"] == 1.0
    assert oracle["assignment"] == [0, 0, 1, 1]
    assert len(oracle["darts"]) == 2
    assert oracle["test_accuracy"] > 0.25  # above chance even after 3 epochs
    # one search on the full mixture and one per source, cached for later methods
    assert len(setup.cache) == 3


def test_decomposition_reuses_the_searches(task) -> None:
    setup = _setup(seed=1)
    DartsOracleMoE(FAST_DARTS).fit_evaluate(task, setup)
    rows = [r.row(task) for r in run_decomposition(task, setup, config=FAST_DARTS)]
    names = [r["method"] for r in rows]
    assert names == [
        "decomp_random_split_full_arch",
        "decomp_oracle_split_full_arch",
        "decomp_oracle_split_source0_arch",
        "decomp_oracle_split_source1_arch",
    ]
    assert len(setup.cache) == 3  # the per-source searches were shared with the oracle
    assert [r["oracle_match"] for r in rows[1:]] == [1.0, 1.0, 1.0]
    assert rows[0]["block"] == "i" and rows[2]["block"] == "ii"
    assert not rows[0]["uses_domain_labels"] and rows[2]["uses_domain_labels"]
    with pytest.raises(ValueError, match="routing"):
        DecompositionSetting("learned", "full")


def test_oracle_needs_sources() -> None:
    task = make_toy_task(0)
    no_oracle = dataclasses.replace(task, oracle_partition=None)
    with pytest.raises(ValueError, match="oracle partition"):
        oracle_assignment(no_oracle, 2)
    with pytest.raises(ValueError, match="n_experts"):
        oracle_assignment(tiny_image_task(n=64), 3)
