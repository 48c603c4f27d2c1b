"""The hand-written backward pass of a chunk of tabular cells equals autograd's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sgem.data import make_toy_task
from sgem.space import Arch, TabularSpace
from sgem.train import TrainConfig, Trainer
from sgem.train.batched import BatchedTabularTrainer
from sgem.train.cell_program import CellProgram

OPS = ("linear", "rbf", "identity", "square", "shift", "relu", "dropout")


@pytest.fixture(scope="module")
def task():
    return make_toy_task(2, n_per_cloud=60, n_test_per_cloud=10)


def _chunk(task, space: TabularSpace, archs: list[Arch], seed: int):
    """A chunk's program, its trainable tensors and inputs, after a few random updates (so
    the padded and the used parameters are not at their initial values)."""
    batched = BatchedTabularTrainer(Trainer(task, space, TrainConfig(steps=1)))
    tr = batched.trainer
    nets = []
    for j, arch in enumerate(archs):
        torch.manual_seed(seed + j)
        net = tr.build(arch)
        net.data_init(tr.x_train, torch.Generator().manual_seed(seed + j))
        nets.append(net)
    nodes = batched._plan(archs)
    params = batched._stack(nets, nodes)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t, (key, _) in zip(params["all"], params["keys"], strict=True):
            if key in ("head", "bias") or key[0] != "linear":
                continue
            t.add_(0.1 * torch.randn(t.shape, generator=gen))
    x = batched.x_train[:37].T.contiguous().expand(len(archs), -1, -1).contiguous()
    program = CellProgram(nodes, params, batched.width, space.hidden, space.dropout)
    return batched, program, params, x


def _grads_both_ways(program, params, x, seed: int):
    weights = torch.randn(x.shape[0], 4, x.shape[2], generator=torch.Generator().manual_seed(99))
    for t in params["all"]:
        t.requires_grad_(True)
    out = program.forward(x, torch.Generator().manual_seed(seed))
    (out[:, : weights.shape[1]] * weights).sum().backward()
    reference = [t.grad.clone() for t in params["all"]]
    for t in params["all"]:
        t.requires_grad_(False)
        t.grad = None
    out2 = program.forward(x, torch.Generator().manual_seed(seed))  # the same dropout masks
    torch.testing.assert_close(out2, out.detach())
    g_out = torch.zeros_like(out2)
    g_out[:, : weights.shape[1]] = weights
    grads = program.backward(g_out)
    mine = [grads[k] if part is None else grads[k][part] for k, part in params["keys"]]
    return reference, mine


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 7), centres=st.sampled_from([1, 3]))
def test_backward_equals_autograd_for_any_chunk(task, seed, n, centres) -> None:
    space = TabularSpace(op_names=OPS, hidden=5, rbf_centres=centres, dropout=0.3)
    rng = np.random.default_rng(seed)
    archs = [space.sample(rng) for _ in range(n)]
    _, program, params, x = _chunk(task, space, archs, seed)
    reference, mine = _grads_both_ways(program, params, x, seed)
    for (key, _), r, m in zip(params["keys"], reference, mine, strict=True):
        torch.testing.assert_close(m, r, rtol=1e-4, atol=1e-5, msg=f"gradient of {key}")


def test_every_op_at_every_position_with_padding(task) -> None:
    # hidden < width (the RBF centres set the width): linear outputs are zero-padded
    space = TabularSpace(op_names=OPS, hidden=3, rbf_centres=6, dropout=0.5)
    archs = [Arch((op, "rbf", op), (0, 1, 1)) for op in OPS]
    archs += [Arch(("relu", op, "square"), (0, 0, 2)) for op in OPS]
    # each op between two trained layers: its input gradient reaches parameters
    archs += [Arch(("linear", op, "linear"), (0, 1, 2)) for op in OPS]
    _, program, params, x = _chunk(task, space, archs, 3)
    reference, mine = _grads_both_ways(program, params, x, 3)
    for (key, _), r, m in zip(params["keys"], reference, mine, strict=True):
        torch.testing.assert_close(m, r, rtol=1e-4, atol=1e-5, msg=f"gradient of {key}")


def test_classifier_loss_gradient_is_softmax_minus_one_hot(task) -> None:
    space = TabularSpace(op_names=OPS)
    batched = BatchedTabularTrainer(Trainer(task, space, TrainConfig(steps=1)))
    gen = torch.Generator().manual_seed(0)
    out = torch.randn(3, batched.trainer.n_out, 11, generator=gen)
    target = batched._targets(torch.randint(0, batched.trainer.n_out, (3, 11), generator=gen))
    weights = torch.rand(3, 11, generator=gen)
    leaf = out.clone().requires_grad_()
    (batched._nll(leaf, target) * weights).sum().backward()
    torch.testing.assert_close(batched._loss_gradient(out, target, weights), leaf.grad)


def test_backward_needs_a_training_forward(task) -> None:
    space = TabularSpace(op_names=OPS)
    _, program, _, x = _chunk(task, space, [space.sample(np.random.default_rng(0))], 0)
    program.forward(x, None)  # evaluation: nothing kept
    with pytest.raises(AssertionError, match="training forward"):
        program.backward(torch.zeros(1, 4, x.shape[2]))
