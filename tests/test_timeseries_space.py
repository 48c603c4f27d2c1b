"""The forecasting search space: ops, skeleton, Student-t head, and training with the Trainer."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sgem.data.timeseries import make_timeseries_task
from sgem.space import Arch
from sgem.space.timeseries import TIMESERIES_OPS, TimeSeriesSpace, make_op
from sgem.train import TrainConfig, Trainer, per_sample_nll

CONTEXT, HORIZON, BATCH = 96, 24, 8
# archs without a GRU train fastest on CPU; the GRU gets its own build / gradient tests
FAST_ARCH = Arch(("moving_average", "linear_trend", "dilated_conv"), (0, 1, 0))


@pytest.fixture(scope="module")
def space():
    return TimeSeriesSpace()


@pytest.fixture(scope="module")
def task(shared_timeseries_dir):
    return make_timeseries_task(offline=True, n_windows=600, n_clusters=5, seed=0)


@pytest.fixture(scope="module")
def trainer(task, space):
    return Trainer(task, space, TrainConfig(steps=20, batch_size=128, lr=0.01))


def _windows(n=BATCH, seed=0):
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(CONTEXT, dtype=torch.float32)
    level = 1.0 + 0.3 * torch.sin(2 * torch.pi * t / 24)
    return level + 0.1 * torch.randn(n, CONTEXT, generator=gen)


def _check_forward_backward(net, x):
    out = net(x)
    assert out.shape == (len(x), HORIZON, 3)
    _, scale, df = out.unbind(-1)
    assert torch.isfinite(out).all()
    assert (scale >= 1e-3).all() and (df > 2).all()
    y = torch.randn(len(x), HORIZON)
    per_sample_nll(out, y, "student_t").mean().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name


def test_the_space(space):
    assert space.op_names == TIMESERIES_OPS
    assert space.n_nodes == 3
    assert all("<" not in op and "|" not in op for op in space.op_names)
    assert space.size == 6 * 12 * 18


@pytest.mark.parametrize("op", TIMESERIES_OPS)
def test_every_op_alone_builds_and_gives_student_t_parameters(space, op):
    torch.manual_seed(0)
    net = space.build(Arch((op, op, op), (0, 1, 2)), CONTEXT, 3 * HORIZON, None, None)
    _check_forward_backward(net, _windows())


@pytest.mark.parametrize("op", TIMESERIES_OPS)
def test_ops_keep_the_sequence_shape(op):
    x = torch.randn(4, 16, CONTEXT)
    assert make_op(op, 16, CONTEXT)(x).shape == x.shape


def test_random_archs_build_and_train_a_step(space):
    rng = np.random.default_rng(0)
    for arch in space.sample_many(6, rng):
        torch.manual_seed(1)
        net = space.build(arch, CONTEXT, 3 * HORIZON, None, None)
        _check_forward_backward(net, _windows(seed=2))


@pytest.mark.parametrize("op", ["moving_average", "dilated_conv", "gru"])
def test_causal_ops_do_not_look_ahead(op):
    torch.manual_seed(0)
    m = make_op(op, 8, CONTEXT)
    x = torch.randn(2, 8, CONTEXT)
    x2 = x.clone()
    x2[..., 60:] += torch.randn(2, 8, CONTEXT - 60)
    with torch.no_grad():
        a, b = m(x), m(x2)
    torch.testing.assert_close(a[..., :60], b[..., :60])
    assert not torch.allclose(a[..., 60:], b[..., 60:])


def test_moving_average_and_linear_trend_are_what_they_say():
    x = torch.randn(3, 4, CONTEXT, dtype=torch.float64)
    ma = make_op("moving_average", 4, CONTEXT, ma_kernel=5)(x.float()).double()
    torch.testing.assert_close(ma[..., 10], x[..., 6:11].mean(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ma[..., 0], x[..., 0], rtol=1e-5, atol=1e-5)  # edge repeats x0
    trend = make_op("linear_trend", 4, CONTEXT)
    t = torch.arange(CONTEXT, dtype=torch.float32)
    line = (2.0 - 0.05 * t).expand(3, 4, CONTEXT)
    torch.testing.assert_close(trend(line), line, rtol=1e-4, atol=1e-4)  # a line is kept
    xf = x.float()
    fitted = trend(xf)
    torch.testing.assert_close(trend(fitted), fitted, rtol=1e-4, atol=1e-4)  # a projection
    # the residual is orthogonal to 1 and t: least squares
    resid = (xf - fitted).double()
    tt = t.double()
    assert resid.sum(-1).abs().max() < 1e-3 and (resid * tt).sum(-1).abs().max() < 1e-1


def test_patch_attention_handles_a_length_that_is_not_a_multiple_of_the_patch():
    m = make_op("patch_attention", 16, 100, patch_len=12)
    x = torch.randn(2, 16, 100, requires_grad=True)
    out = m(x)
    assert out.shape == x.shape
    out.sum().backward()
    assert torch.isfinite(x.grad).all()


def test_output_size_and_bad_n_out(space, task):
    assert space.output_size(task) == 3 * HORIZON
    with pytest.raises(ValueError, match=r"3 \* horizon"):
        space.build(FAST_ARCH, CONTEXT, 10, None, None)


def test_unknown_op_names_are_refused(space):
    with pytest.raises(ValueError, match=r"unknown op.*'rbf'"):
        TimeSeriesSpace(op_names=("skip", "rbf"))
    with pytest.raises(ValueError, match=r"unknown op.*'linear'"):
        space.build(Arch(("linear", "skip", "skip"), (0, 0, 0)), CONTEXT, 72, None, None)
    with pytest.raises(ValueError, match="unknown op 'conv'"):
        make_op("conv", 16, CONTEXT)


def test_arch_json_round_trip_and_encode(space):
    rng = np.random.default_rng(5)
    for arch in space.sample_many(10, rng):
        assert Arch.from_json(arch.dumps()) == arch
        assert Arch.from_json(json.loads(json.dumps(arch.to_json()))) == arch
        adj, feats = space.encode(arch)
        assert adj.shape == (5, 5) and feats.shape == (5, 8)
        assert feats[1:4, :6].sum(1).tolist() == [1.0, 1.0, 1.0]
    sub = TimeSeriesSpace(op_names=("gru", "skip"), n_nodes=2)
    assert sub.size == 2 * 4
    assert len(list(sub.enumerate())) == sub.size


def test_trainer_returns_finite_per_cluster_losses(trainer, task):
    m = task.n_clusters
    mask = np.zeros(m, dtype=bool)
    mask[[0, 2]] = True
    outcome = trainer.train(FAST_ARCH, mask, seed=3)
    assert outcome.losses.shape == (m,)
    assert np.isfinite(outcome.losses).all()
    again = trainer.train(FAST_ARCH, mask, seed=3)
    np.testing.assert_array_equal(outcome.losses, again.losses)


def test_training_lowers_the_nll(trainer, task):
    mask = np.ones(task.n_clusters, dtype=bool)
    trained = trainer.train(FAST_ARCH, mask, seed=0).losses
    torch.manual_seed(0)  # the same initialisation, untrained
    untrained = trainer.build(FAST_ARCH).eval()
    before = trainer.cluster_losses(untrained)
    sizes = task.val_cluster_sizes
    assert np.average(trained, weights=sizes) < np.average(before, weights=sizes) - 0.3


def test_trainer_with_gru_and_attention(task, space):
    tr = Trainer(task, space, TrainConfig(steps=3, batch_size=64, lr=0.01))
    arch = Arch(("gru", "patch_attention", "skip"), (0, 1, 0))
    losses = tr.train(arch, np.ones(task.n_clusters, dtype=bool), seed=0).losses
    assert losses.shape == (task.n_clusters,) and np.isfinite(losses).all()
