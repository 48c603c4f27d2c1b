"""The shared training loop: legacy step mode unchanged, epoch mode, SGD, cosine, clipping,
chunked validation, device resolution, and CNN training on tiny images."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from test_darts_space import tiny_image_task

from sgem.data.task import ClusteredTask, Split
from sgem.data.toy import make_toy_task
from sgem.errors import SgemUserError
from sgem.space import Arch, DartsSpace, TabularSpace
from sgem.train import TrainConfig, Trainer, per_sample_nll, resolve_device
from sgem.train.adam import Adam
from sgem.train.trainer import clip_and_step, epoch_batches, make_optimizer, schedule_lr

TAB_ARCH = Arch(("linear", "relu", "rbf"), (0, 1, 0))
CNN_ARCH = Arch(("sep_conv_3x3", "skip", "max_pool_3x3", "sep_conv_3x3"), (0, 0, 0, 1))
IMAGE_TRAIN = TrainConfig(
    epochs=10,
    batch_size=16,
    optimizer="sgd",
    lr=0.05,
    weight_decay=3e-4,
    schedule="cosine",
    grad_clip=5.0,
    eval_batch_size=20,
)


@pytest.fixture(scope="module")
def image_task() -> ClusteredTask:
    return tiny_image_task()


def _legacy_fit(trainer: Trainer, arch: Arch, x, y, seed: int):
    """The loop the Trainer ran before epoch mode existed (full-batch Adam, fixed steps),
    with the fused Adam `make_optimizer` uses since."""
    cfg = trainer.config
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = trainer.build(arch)
    model.data_init(x, gen)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, fused=True)
    model.train()
    n = len(x)
    bs = cfg.batch_size or n
    for _ in range(cfg.steps):
        if bs >= n:
            xb, yb = x, y
        else:
            idx = torch.randint(n, (bs,), generator=gen)
            xb, yb = x[idx], y[idx]
        loss = per_sample_nll(model(xb), yb, "cross_entropy").mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model.eval()


@pytest.mark.parametrize("batch_size", [None, 64])
def test_default_step_mode_is_bit_identical_to_the_legacy_loop(batch_size) -> None:
    task = make_toy_task(1)
    trainer = Trainer(task, TabularSpace(), TrainConfig(steps=30, batch_size=batch_size))
    new = trainer.fit(TAB_ARCH, trainer.x_train, trainer.y_train, seed=4)
    old = _legacy_fit(trainer, TAB_ARCH, trainer.x_train, trainer.y_train, seed=4)
    for (name, p), q in zip(new.state_dict().items(), old.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_config_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(optimizer="rmsprop")
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(schedule="step")
    with pytest.raises(ValueError, match="epochs"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="grad_clip"):
        TrainConfig(grad_clip=0.0)
    with pytest.raises(ValueError, match="eval_batch_size"):
        TrainConfig(eval_batch_size=0)
    assert TrainConfig(epochs=2).minibatch == 128
    assert TrainConfig(epochs=2, batch_size=16).minibatch == 16


class _Counting(torch.nn.Module):
    """Linear classifier that records the batch size of every training forward."""

    def __init__(self, d: int, k: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(d, k)
        self.sizes: list[int] = []

    def forward(self, x):
        if self.training:
            self.sizes.append(len(x))
        return self.lin(x.reshape(len(x), -1))


def test_epoch_mode_makes_shuffled_passes() -> None:
    task = make_toy_task(0)
    trainer = Trainer(task, TabularSpace(), TrainConfig(epochs=3, batch_size=64))
    n = 200
    x, y = trainer.x_train[:n], trainer.y_train[:n]
    model = _Counting(2, task.n_classes)
    trainer.optimise(model, x, y, torch.Generator().manual_seed(0))
    assert model.sizes == [64, 64, 64, 8] * 3
    # an explicit step budget overrides the epochs, still drawing shuffled passes
    model = _Counting(2, task.n_classes)
    trainer.optimise(model, x, y, torch.Generator().manual_seed(0), steps=6)
    assert model.sizes == [64, 64, 64, 8, 64, 64]
    # a one-sample remainder is dropped (BatchNorm cannot train on one sample)
    batches = list(epoch_batches(129, 64, torch.Generator().manual_seed(0)))
    assert [len(b) for b in batches] == [64, 64]
    assert sorted(torch.cat(batches).tolist()) != list(range(129))
    assert [len(b) for b in epoch_batches(3, 1, torch.Generator())] == [1, 1, 1]


def test_sgd_cosine_and_clipping() -> None:
    p = torch.nn.Parameter(torch.zeros(3))
    cfg = TrainConfig(optimizer="sgd", lr=0.1, schedule="cosine", grad_clip=1.0)
    opt = make_optimizer([p], cfg)
    assert isinstance(opt, torch.optim.SGD)
    group = opt.param_groups[0]
    assert group["nesterov"] and group["momentum"] == 0.9
    lrs = []
    for step in (0, 5, 10):
        schedule_lr(opt, cfg, step, 10)
        lrs.append(group["lr"])
    assert lrs[0] == pytest.approx(0.1) and lrs[1] == pytest.approx(0.05)
    assert lrs[2] == pytest.approx(0.0, abs=1e-12)
    # plain SGD, first step: the parameter moves by lr * the clipped gradient
    plain = TrainConfig(optimizer="sgd", lr=0.1, momentum=0.0, grad_clip=1.0)
    q = torch.nn.Parameter(torch.zeros(3))
    q.grad = torch.tensor([30.0, 40.0, 0.0])  # norm 50 -> clipped to 1
    clip_and_step([q], make_optimizer([q], plain), plain)
    np.testing.assert_allclose(q.detach().numpy(), [-0.06, -0.08, 0.0], rtol=1e-5)
    # constant schedule leaves the rate alone
    const = TrainConfig(lr=0.1)
    opt2 = make_optimizer([p], const)
    schedule_lr(opt2, const, 7, 10)
    assert isinstance(opt2, Adam) and opt2.param_groups[0]["lr"] == 0.1
    assert math.isclose(lrs[1], 0.05)


def test_chunked_validation_equals_one_pass(image_task) -> None:
    space = DartsSpace(n_cell_nodes=2, init_channels=4)
    one = Trainer(image_task, space, TrainConfig(epochs=1, batch_size=32))
    chunked = Trainer(image_task, space, TrainConfig(epochs=1, batch_size=32, eval_batch_size=7))
    model = one.fit(CNN_ARCH, one.x_train, one.y_train, seed=0)
    a, b = one.cluster_losses(model), chunked.cluster_losses(model)
    np.testing.assert_allclose(a, b, rtol=1e-5)
    assert np.isfinite(a).all() and a.shape == (4,)


def test_cnn_learns_the_tiny_image_task(image_task) -> None:
    trainer = Trainer(image_task, DartsSpace(n_cell_nodes=2, init_channels=4), IMAGE_TRAIN)
    model = trainer.fit(CNN_ARCH, trainer.x_train, trainer.y_train, seed=0)
    pred = trainer.predict(model, trainer.x_val).argmax(1)
    acc = float((pred == trainer.y_val).float().mean())
    assert acc > 0.9  # 4 classes: chance is 0.25
    # training on two clusters only: low loss there, higher on the unseen source
    out = trainer.train(CNN_ARCH, np.array([True, True, False, False]), seed=1)
    assert out.losses[:2].mean() < out.losses[2:].mean()


def test_output_size_is_required_for_non_classification() -> None:
    rng = np.random.default_rng(0)

    def split(n):
        return Split(rng.normal(size=(n, 4)), rng.normal(size=(n, 2)), np.arange(n) % 3)

    task = ClusteredTask("reg", split(12), split(6), split(6), 3, loss="student_t")
    with pytest.raises(ValueError, match="output_size"):
        Trainer(task, TabularSpace())


def test_resolve_device() -> None:
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == want
    assert resolve_device("cpu").type == "cpu"
    trainer = Trainer(make_toy_task(0), TabularSpace(), device="auto")
    assert trainer.device.type == want
    assert not trainer.uses_channels_last  # 2-D inputs never go channels-last
    for bad in ("tpu", "cuda:x", "meta"):
        with pytest.raises(SgemUserError, match="device"):
            resolve_device(bad)
    if not torch.cuda.is_available():  # asked for by name, a missing GPU is a user error
        with pytest.raises(SgemUserError, match="sees no CUDA GPU: use --device cpu"):
            resolve_device("cuda")
