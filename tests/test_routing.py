"""Straight-through Bernoulli masks and the routing M-step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sgem.search.objective import q_function
from sgem.search.routing import expected_losses, routing_m_step, straight_through_bernoulli
from sgem.space import Arch


def test_straight_through_forward_is_binary_with_the_right_shape():
    gen = torch.Generator().manual_seed(0)
    r = torch.tensor([[0.1, 0.5, 0.9, 0.02], [0.7, 0.3, 0.5, 0.99]], dtype=torch.float64)
    masks = straight_through_bernoulli(r, 64, 0.5, gen)
    assert masks.shape == (2, 64, 4)
    assert masks.dtype == torch.float64
    values = masks.detach().numpy()
    near_binary = np.minimum(np.abs(values), np.abs(values - 1.0))
    assert near_binary.max() <= 1e-12
    assert (values[values < 0.5] == 0.0).all()  # zeros are exact
    assert 0 < (values > 0.5).mean() < 1
    # a single row of r -> (n, M)
    assert straight_through_bernoulli(r[0], 5, 0.5, gen).shape == (5, 4)


def test_straight_through_forward_is_exactly_binary():
    gen = torch.Generator().manual_seed(0)
    r = torch.full((8,), 0.5, dtype=torch.float64)
    masks = straight_through_bernoulli(r, 1000, 0.5, gen).detach()
    assert set(masks.unique().tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("temperature", [0.1, 0.5, 2.0])
def test_straight_through_mean_matches_r(temperature):
    gen = torch.Generator().manual_seed(1)
    r = torch.tensor([0.05, 0.2, 0.5, 0.8, 0.97], dtype=torch.float64)
    n = 20_000
    masks = straight_through_bernoulli(r, n, temperature, gen)
    mean = masks.detach().mean(0).numpy()
    std = np.sqrt(r.numpy() * (1 - r.numpy()) / n)
    assert np.all(np.abs(mean - r.numpy()) <= 5 * std), (mean, r)


def test_straight_through_gradient_is_finite_and_points_along_the_weights():
    gen = torch.Generator().manual_seed(2)
    r = torch.full((4,), 0.5, dtype=torch.float64, requires_grad=True)
    c = torch.tensor([1.0, -1.0, 2.0, 0.0], dtype=torch.float64)
    masks = straight_through_bernoulli(r, 500, 0.5, gen)
    (masks @ c).mean().backward()
    grad = r.grad.numpy()
    assert np.isfinite(grad).all()
    # d/dr E[c . b] = c: the relaxed gradient is biased but has the right signs
    assert grad[0] > 0 and grad[2] > 0 and grad[1] < 0
    assert grad[3] == 0.0
    assert grad[2] > grad[0]


def test_straight_through_gradient_finite_at_extreme_probabilities():
    gen = torch.Generator().manual_seed(3)
    r = torch.tensor([0.0, 1.0, 1e-12, 1 - 1e-12], dtype=torch.float64, requires_grad=True)
    masks = straight_through_bernoulli(r, 100, 0.5, gen)
    assert masks[:, 0].sum() == 0 and masks[:, 1].sum() == 100
    masks.sum().backward()
    assert torch.isfinite(r.grad).all()


class FakeSurrogate:
    """Stands in for `Surrogate` in the routing M-step.

    The favoured architecture's predicted loss on cluster m is 1 + effect[m] * b_m (b its
    training mask); every other prediction is the constant 1. A negative effect means that
    training the favoured expert on cluster m lowers its predicted loss there.
    """

    def __init__(self, favoured: Arch, effect: np.ndarray) -> None:
        self.favoured = favoured
        self.effect = torch.as_tensor(effect, dtype=torch.float64)
        self.net = torch.nn.Identity()

    def graphs(self, archs):
        flag = torch.tensor([[[1.0 if a == self.favoured else 0.0]] for a in archs])
        return torch.zeros(len(archs), 1, 1, dtype=torch.float64), flag.double()

    def forward(self, adj, feats, masks):
        is_fav = feats[:, 0, 0][:, None]
        return 1.0 + is_fav * self.effect[None, :] * masks

    def predict(self, archs, masks):
        adj, feats = self.graphs(archs)
        with torch.no_grad():
            return self.forward(adj, feats, torch.as_tensor(masks, dtype=torch.float64)).numpy()


FAV = Arch(("rbf", "linear"), (0, 1))
OTHER = Arch(("linear", "relu"), (0, 0))
M = 5


def run_step(effect, *, lr=0.1, steps=30, check=None, logits=None, seed=0):
    fake = FakeSurrogate(FAV, np.asarray(effect, dtype=np.float64))
    logits = np.zeros((M, 2)) if logits is None else logits
    q = np.full((M, 2), 0.5)
    sizes = np.array([5.0, 3.0, 8.0, 2.0, 4.0])
    return routing_m_step(
        logits,
        q,
        fake,
        [FAV, OTHER],
        sizes,
        steps=steps,
        lr=lr,
        n_samples=32,
        temperature=0.5,
        seed=seed,
        check_uniforms=check,
    )


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_routing_step_moves_towards_masks_with_lower_predicted_loss():
    effect = np.array([-2.0, 0.0, -2.0, 0.0, 0.0])  # clusters 0 and 2 favour expert 0
    new_logits, info = run_step(effect)
    assert info["accepted"] is True
    assert np.isfinite(new_logits).all()
    r = softmax(new_logits)
    assert r[0, 0] > 0.6 and r[2, 0] > 0.6
    # clusters where nothing depends on the mask get zero gradient: routing stays uniform
    np.testing.assert_allclose(r[[1, 3, 4]], 0.5, atol=1e-12)


def test_routing_step_moves_away_from_masks_with_higher_predicted_loss():
    effect = np.array([0.0, 2.0, 0.0, 0.0, 2.0])  # training expert 0 on 1 and 4 hurts them
    new_logits, _ = run_step(effect)
    r = softmax(new_logits)
    assert r[1, 0] < 0.4 and r[4, 0] < 0.4
    np.testing.assert_allclose(r[[0, 2, 3]], 0.5, atol=1e-12)


def test_routing_step_is_deterministic_given_the_seed():
    effect = np.array([-2.0, 1.0, -0.5, 0.0, 0.3])
    a, _ = run_step(effect, seed=4)
    b, _ = run_step(effect, seed=4)
    np.testing.assert_array_equal(a, b)


def hand_q(logits, uniforms, effect):
    """Q at logits with q uniform, from the fake surrogate's rule, computed directly."""
    r = softmax(logits)
    sizes = np.array([5.0, 3.0, 8.0, 2.0, 4.0])
    mask_freq = (uniforms[0] < r[:, 0][None, :]).mean(axis=0)  # expert 0 is FAV
    u = np.stack([1.0 + effect * mask_freq, np.ones(M)], axis=1)
    return float(np.sum(sizes[:, None] * 0.5 * (np.log(r) - u)))


def test_routing_step_accepted_when_the_checked_q_improves():
    rng = np.random.default_rng(0)
    uniforms = rng.random((2, 2000, M))
    effect = np.array([-2.0, 0.0, -2.0, 0.0, 0.0])
    old = np.zeros((M, 2))
    new_logits, info = run_step(effect, check=uniforms, logits=old)
    assert info["q_old"] == pytest.approx(hand_q(old, uniforms, effect), rel=1e-10)
    assert info["q_new"] == pytest.approx(hand_q(new_logits, uniforms, effect), rel=1e-10)
    assert info["accepted"] == (info["q_new"] >= info["q_old"])
    assert info["accepted"]
    assert not np.array_equal(new_logits, old)


def test_routing_step_rejected_keeps_old_logits():
    # a huge learning rate overshoots: Adam's first steps move every logit by ~lr, the
    # routing collapses onto one expert, and log r of the other (with q uniform) dominates Q
    rng = np.random.default_rng(1)
    uniforms = rng.random((2, 2000, M))
    effect = np.array([-2.0, 0.0, -2.0, 0.0, 0.0])
    old = np.random.default_rng(2).normal(scale=0.1, size=(M, 2))
    new_logits, info = run_step(effect, lr=50.0, steps=5, check=uniforms, logits=old)
    assert info["q_new"] < info["q_old"]
    assert not info["accepted"]
    np.testing.assert_array_equal(new_logits, old)
    assert new_logits is not old  # a copy, not the caller's array
    assert info["q_old"] == pytest.approx(hand_q(old, uniforms, effect), rel=1e-10)


def test_routing_step_with_a_real_surrogate_is_finite(fitted_surrogate, tabular_space):
    rng = np.random.default_rng(3)
    m = fitted_surrogate.n_clusters
    archs = tabular_space.sample_many(2, rng)
    logits = rng.normal(size=(m, 2))
    q = rng.dirichlet(np.ones(2), size=m)
    sizes = rng.integers(5, 50, size=m).astype(float)
    uniforms = rng.random((2, 16, m))
    new_logits, info = routing_m_step(
        logits,
        q,
        fitted_surrogate,
        archs,
        sizes,
        steps=5,
        lr=0.1,
        n_samples=8,
        temperature=0.5,
        seed=0,
        check_uniforms=uniforms,
    )
    assert new_logits.shape == (m, 2)
    assert np.isfinite(new_logits).all()
    u_old = expected_losses(fitted_surrogate, archs, softmax(logits), uniforms)
    assert info["q_old"] == pytest.approx(q_function(q, softmax(logits), u_old, sizes))
    assert bool(info["accepted"]) == (info["q_new"] >= info["q_old"])
    if not info["accepted"]:
        np.testing.assert_array_equal(new_logits, logits)
