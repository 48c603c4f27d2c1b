"""The GNN surrogate: fit / predict / MC dropout, target clipping, LCB and Kendall tau."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers import SMALL_SURROGATE, random_masks, synthetic_losses

from sgem.space import Arch
from sgem.surrogate import Surrogate, kendall_tau, lcb
from sgem.surrogate.model import DTYPE


def test_lcb_is_mean_minus_std():
    mean = np.array([1.0, 1.0, 0.5, 2.0, 0.2])
    std = np.array([0.0, 0.5, 0.0, 2.0, 0.1])
    np.testing.assert_allclose(lcb(mean, std), [1.0, 0.5, 0.5, 0.0, 0.1])


def test_lcb_prefers_low_mean_then_high_std():
    # equal std: the lower mean comes first; equal mean: the more uncertain comes first
    mean = np.array([3.0, 1.0, 2.0, 2.0])
    std = np.array([0.1, 0.1, 0.1, 0.9])
    order = np.argsort(lcb(mean, std)).tolist()
    assert order.index(1) < order.index(2) < order.index(0)
    assert order.index(3) < order.index(2)
    # bounds 2.9, 0.9, 1.9, 1.1: the uncertain 2.0 overtakes the certain 2.0, not the 1.0
    assert order == [1, 3, 2, 0]


def test_kendall_tau_basic_cases():
    x = np.arange(10.0)
    assert kendall_tau(x, 2 * x + 1) == pytest.approx(1.0)
    assert kendall_tau(x, -x) == pytest.approx(-1.0)
    assert np.isnan(kendall_tau(np.array([1.0]), np.array([2.0])))
    assert np.isnan(kendall_tau(np.ones(5), x[:5]))  # undefined for a constant input
    # matrices are ravelled
    assert kendall_tau(x.reshape(2, 5), x.reshape(2, 5)) == pytest.approx(1.0)


def test_predict_before_fit_raises(tabular_space):
    s = Surrogate(tabular_space, 4, SMALL_SURROGATE, seed=0)
    arch = tabular_space.sample(np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="fit"):
        s.predict([arch], np.ones((1, 4)))
    with pytest.raises(RuntimeError, match="fit"):
        s.predict_mc([arch], np.ones((1, 4)), seed=0)


def test_fit_without_observations_raises(tabular_space):
    s = Surrogate(tabular_space, 4, SMALL_SURROGATE, seed=0)
    with pytest.raises(ValueError, match="at least one observation"):
        s.fit([], np.zeros((0, 4)), np.zeros((0, 4)), seed=0)


@pytest.fixture(scope="module")
def learnt(tabular_space):
    """A surrogate fitted on 80 observations of the synthetic rule, plus 40 held out."""
    rng = np.random.default_rng(7)
    m = 6
    archs = tabular_space.sample_many(120, rng)
    masks = random_masks(120, m, rng)
    losses = synthetic_losses(archs, masks, rng)
    config = dataclasses.replace(SMALL_SURROGATE, hidden=32, epochs_first=250, clip_quantile=1.0)
    s = Surrogate(tabular_space, m, config, seed=0)
    train_mse = s.fit(archs[:80], masks[:80], losses[:80], seed=0)
    return s, train_mse, archs, masks, losses


def test_fit_then_predict_shapes_and_determinism(learnt):
    s, _, archs, masks, _ = learnt
    pred = s.predict(archs[:7], masks[:7])
    assert pred.shape == (7, 6)
    assert np.isfinite(pred).all()
    np.testing.assert_array_equal(pred, s.predict(archs[:7], masks[:7]))  # dropout off


def test_predict_mc_shape_and_spread(learnt):
    s, _, archs, masks, _ = learnt
    mc = s.predict_mc(archs[:5], masks[:5], seed=3, n_samples=11)
    assert mc.shape == (11, 5, 6)
    assert np.all(mc.std(axis=0) > 0)  # dropout is on: passes differ everywhere
    assert s.predict_mc(archs[:5], masks[:5], seed=1).shape[0] == SMALL_SURROGATE.mc_samples
    np.testing.assert_array_equal(mc, s.predict_mc(archs[:5], masks[:5], seed=3, n_samples=11))
    # after MC sampling the net is back in eval mode: predict is deterministic again
    np.testing.assert_array_equal(s.predict(archs[:5], masks[:5]), s.predict(archs[:5], masks[:5]))


def test_fit_learns_the_synthetic_rule(learnt):
    s, train_mse, archs, masks, losses = learnt
    variance = losses[:80].var()
    assert train_mse < 0.5 * variance
    pred_train = s.predict(archs[:80], masks[:80])
    assert np.mean((pred_train - losses[:80]) ** 2) < 0.2 * variance
    pred_test = s.predict(archs[80:], masks[80:])
    assert np.mean((pred_test - losses[80:]) ** 2) < 0.5 * losses[80:].var()
    assert kendall_tau(pred_test, losses[80:]) > 0.4


def test_predictions_follow_the_mask_and_the_op(learnt, tabular_space):
    s, *_ = learnt
    rbf = Arch(("rbf", "identity"), (0, 0))
    lin = Arch(("linear", "relu"), (0, 1))
    on = np.ones((1, 6))
    off = np.zeros((1, 6))
    # training on every cluster lowers every cluster's predicted loss (true effect -0.8)
    assert np.all(s.predict([lin], on)[0] < s.predict([lin], off)[0])
    # rbf helps the first half of the clusters (true effect -0.6), not the second half
    gain = s.predict([lin], on)[0] - s.predict([rbf], on)[0]
    assert gain[:3].mean() > gain[3:].mean() + 0.2


def test_target_clipping_at_the_configured_quantile(tabular_space):
    rng = np.random.default_rng(11)
    m = 4
    archs = tabular_space.sample_many(25, rng)
    masks = random_masks(25, m, rng)
    losses = synthetic_losses(archs, masks, rng)
    losses[0, 0] = 50.0  # an outlier, far above every quantile used below
    for quantile in (0.8, 0.9):
        config = dataclasses.replace(SMALL_SURROGATE, epochs_first=2, clip_quantile=quantile)
        s = Surrogate(tabular_space, m, config, seed=0)
        s.fit(archs, masks, losses, seed=0)
        flat = np.sort(losses.ravel())
        # the linear-interpolation quantile, computed from the sorted values
        pos = quantile * (flat.size - 1)
        lo = int(np.floor(pos))
        expected = flat[lo] + (pos - lo) * (flat[lo + 1] - flat[lo])
        assert s.clip_value_ == pytest.approx(expected, rel=1e-12)
        clipped = np.minimum(losses, expected)
        # the standardisation uses the clipped targets, so the outlier does not inflate it
        assert s.y_mean_ == pytest.approx(clipped.mean(), rel=1e-12)
        assert s.y_std_ == pytest.approx(clipped.std(), rel=1e-4)
        assert s.y_std_ < 1.0


def test_refit_counts_and_warm_start(tabular_space):
    rng = np.random.default_rng(12)
    archs = tabular_space.sample_many(10, rng)
    masks = random_masks(10, 3, rng)
    losses = synthetic_losses(archs, masks, rng)
    config = dataclasses.replace(SMALL_SURROGATE, epochs_first=3, epochs_refit=2)
    s = Surrogate(tabular_space, 3, config, seed=0)
    s.fit(archs, masks, losses, seed=0)
    first = s.predict(archs, masks)
    s.fit(archs, masks, losses, seed=1)
    assert s.n_fits_ == 2
    assert not np.array_equal(first, s.predict(archs, masks))


def test_network_dtype_and_float64_predictions(learnt):
    s, _, archs, masks, _ = learnt
    assert all(p.dtype == DTYPE for p in s.net.parameters())
    assert s.predict(archs[:3], masks[:3]).dtype == np.float64
    assert s.predict_mc(archs[:3], masks[:3], seed=0).dtype == np.float64


def test_repeated_archs_are_encoded_once_with_the_same_predictions(learnt):
    """Scoring one arch under many masks (the M-step's pool) gives what row-by-row gives."""
    s, _, archs, masks, _ = learnt
    distinct = list(dict.fromkeys(archs))[:4]
    rep = [a for a in distinct for _ in range(5)]
    tiled = np.tile(masks[:5], (4, 1))
    batched = s.predict(rep, tiled)
    one_by_one = np.concatenate([s.predict([a], b[None]) for a, b in zip(rep, tiled, strict=True)])
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-5, atol=1e-6)
    adj, _, index = s.distinct_graphs(rep)
    assert adj.shape[0] == 4 and index.tolist() == [i // 5 for i in range(20)]
    # the differentiable forward agrees with predict
    adj_all, feats_all = s.graphs(rep)
    with torch.no_grad():
        fwd = s.forward(adj_all, feats_all, torch.as_tensor(tiled)).numpy()
    np.testing.assert_allclose(fwd, batched, rtol=1e-5, atol=1e-6)


def test_forward_is_differentiable_in_the_masks_only(learnt):
    s, _, archs, masks, _ = learnt
    adj, feats = s.graphs(archs[:6])
    b = torch.tensor(masks[:6], dtype=torch.float64, requires_grad=True)
    for _ in range(2):  # the second call reuses the cached graph embeddings
        out = s.forward(adj, feats, b)
        assert out.dtype == torch.float64
        out.sum().backward()
    assert b.grad is not None and torch.isfinite(b.grad).all() and b.grad.abs().sum() > 0
    assert all(p.grad is None and p.requires_grad for p in s.net.parameters())


def test_cached_graph_embedding_follows_the_weights(tabular_space):
    rng = np.random.default_rng(5)
    archs = tabular_space.sample_many(12, rng)
    masks = random_masks(12, 3, rng)
    losses = synthetic_losses(archs, masks, rng)
    config = dataclasses.replace(SMALL_SURROGATE, epochs_first=5, epochs_refit=5)
    s = Surrogate(tabular_space, 3, config, seed=0)
    s.fit(archs, masks, losses, seed=0)
    adj, feats = s.graphs(archs)
    b = torch.as_tensor(masks)
    before = s.forward(adj, feats, b).detach().clone()
    s.fit(archs, masks, losses, seed=1)  # new weights: the cached embedding is stale
    np.testing.assert_allclose(s.forward(adj, feats, b).detach().numpy(), s.predict(archs, masks))
    assert not torch.equal(before, s.forward(adj, feats, b).detach())


def test_state_dicts_in_another_dtype_load(learnt, tabular_space):
    """Checkpoints written with weights in another dtype still restore."""
    s, _, archs, masks, _ = learnt
    state = s.state_dict()
    other_dtype = torch.float64 if torch.float32 == DTYPE else torch.float32
    state["net"] = {k: v.to(other_dtype) for k, v in state["net"].items()}
    other = Surrogate(tabular_space, s.n_clusters, s.config, seed=99)
    other.load_state_dict(state)
    assert all(p.dtype == DTYPE for p in other.net.parameters())
    np.testing.assert_allclose(
        other.predict(archs[:5], masks[:5]), s.predict(archs[:5], masks[:5]), rtol=1e-5
    )
