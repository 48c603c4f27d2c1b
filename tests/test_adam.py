"""sgem's Adam takes torch.optim.Adam's steps bit for bit, without importing torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from sgem.train.adam import Adam


def _run(make_opt, dtype=torch.float32, steps=25):
    torch.manual_seed(0)
    a = torch.randn(7, 3, dtype=dtype, requires_grad=True)
    b = torch.randn(5, dtype=dtype, requires_grad=True)
    frozen = torch.randn(2, requires_grad=True)  # never gets a gradient: must stay put
    opt = make_opt([a, b, frozen])
    x = torch.randn(11, 7, dtype=dtype)
    for i in range(steps):
        loss = (torch.tanh(x @ a).sum(1) - b.sum()).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        frozen.grad = None
        if i == 10:  # schedules write the learning rate into param_groups
            opt.param_groups[0]["lr"] = 0.01
        opt.step()
    return [t.detach().clone() for t in (a, b, frozen)]


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_torch_adam_bit_for_bit(fused, weight_decay, dtype):
    ours = _run(lambda p: Adam(p, lr=0.05, weight_decay=weight_decay, fused=fused), dtype)
    theirs = _run(
        lambda p: torch.optim.Adam(
            p, lr=0.05, weight_decay=weight_decay, fused=fused, foreach=False
        ),
        dtype,
    )
    for x, y in zip(ours, theirs, strict=True):
        assert torch.equal(x, y)


def test_zero_grad_keeps_or_drops_gradients():
    p = torch.zeros(3, requires_grad=True)
    p.grad = torch.ones(3)
    opt = Adam([p])
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and torch.equal(p.grad, torch.zeros(3))
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # no gradient: nothing to do, no error
    assert torch.equal(p.detach(), torch.zeros(3))


@pytest.mark.parametrize(
    "kwargs", [{"lr": -1.0}, {"betas": (0.9, 1.0)}, {"eps": -1.0}, {"weight_decay": -0.1}]
)
def test_invalid_settings_are_named(kwargs):
    with pytest.raises(ValueError, match="invalid Adam settings"):
        Adam([torch.zeros(1, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam([])


def test_training_does_not_import_dynamo():
    """The reason this class exists: torch.optim's first use imports torch._dynamo (~1 s)."""
    code = (
        "import sys, numpy as np\n"
        "from sgem.data.toy import make_toy_task\n"
        "from sgem.space.tabular import TabularSpace\n"
        "from sgem.surrogate.model import Surrogate\n"
        "from sgem.train.trainer import TrainConfig, Trainer\n"
        "task = make_toy_task(seed=0, n_per_cloud=60, n_test_per_cloud=20, n_clusters=4)\n"
        "space = TabularSpace()\n"
        "tr = Trainer(task, space, TrainConfig(steps=3))\n"
        "arch = space.sample(np.random.default_rng(0))\n"
        "out = tr.train(arch, np.ones(4, bool), 0)\n"
        "s = Surrogate(space, 4)\n"
        "s.fit([arch], np.ones((1, 4)), out.losses[None], 0)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "False"


def test_parameters_that_skip_steps_keep_their_own_count():
    """A parameter without a gradient is not stepped and its bias correction lags, as in
    torch (the shared step counter splits up)."""

    def run(make_opt):
        torch.manual_seed(1)
        a = torch.randn(4, requires_grad=True)
        b = torch.randn(4, requires_grad=True)
        opt = make_opt([a, b])
        for i in range(12):
            opt.zero_grad(set_to_none=True)
            loss = (a**2).sum() + ((b**3).sum() if i % 3 else 0.0)
            loss.backward()
            opt.step()
        return a.detach().clone(), b.detach().clone()

    ours = run(lambda p: Adam(p, lr=0.1, fused=True))
    theirs = run(lambda p: torch.optim.Adam(p, lr=0.1, fused=True))
    for x, y in zip(ours, theirs, strict=True):
        assert torch.equal(x, y)
