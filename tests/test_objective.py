"""The cluster-aware objective, Q-function, E-step and the multilinear mask extension."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgem.search.objective import (
    e_step,
    hard_routing,
    measured_hard_objective,
    multilinear_extension,
    objective,
    one_hot_routing,
    q_function,
)
from sgem.search.routing import expected_losses

R = np.array([[0.3, 0.7], [0.5, 0.5], [0.9, 0.1]])
U = np.array([[1.0, 2.0], [0.2, 0.1], [3.0, -1.0]])
SIZES = np.array([10.0, 4.0, 7.0])


def test_e_step_matches_hand_computation():
    q = e_step(R, U)
    assert q.shape == (3, 2)
    for m in range(3):
        terms = [R[m, k] * math.exp(-U[m, k]) for k in range(2)]
        for k in range(2):
            assert q[m, k] == pytest.approx(terms[k] / sum(terms), rel=1e-12)
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-12)


def test_e_step_row_0_by_number():
    # 0.3 e^-1 / (0.3 e^-1 + 0.7 e^-2) = 0.3 / (0.3 + 0.7 / e)
    q = e_step(R, U)
    assert q[0, 0] == pytest.approx(0.3 / (0.3 + 0.7 / math.e), rel=1e-12)


def test_e_step_zero_routing_gets_zero_responsibility_and_large_losses_are_stable():
    r = np.array([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
    u = np.array([[0.0, 1.0, -1.0], [800.0, 801.0, 799.0]])  # exp(-800) underflows naively
    q = e_step(r, u)
    assert np.isfinite(q).all()
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-12)
    assert q[0, 1] == pytest.approx(1.0, abs=1e-9)
    # shifting a row of u by a constant does not change q: compare with the shifted row
    shifted = u[1] - 800.0
    terms = r[1] * np.exp(-shifted)
    np.testing.assert_allclose(q[1], terms / terms.sum(), rtol=1e-10)


def test_objective_matches_loop():
    expected = 0.0
    for m in range(R.shape[0]):
        inner = sum(R[m, k] * math.exp(-U[m, k]) for k in range(R.shape[1]))
        expected += SIZES[m] * math.log(inner)
    assert objective(R, U, SIZES) == pytest.approx(expected, rel=1e-12)


def test_q_function_matches_loop():
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.ones(2), size=3)
    expected = 0.0
    for m in range(3):
        for k in range(2):
            expected += SIZES[m] * q[m, k] * (math.log(R[m, k]) - U[m, k])
    assert q_function(q, R, U, SIZES) == pytest.approx(expected, rel=1e-12)


def test_objective_equals_q_plus_entropy_at_the_e_step():
    # log sum_j r_j e^{-u_j} = log r_k - u_k - log q_k for every k, hence J = Q + sum |C| H(q)
    rng = np.random.default_rng(1)
    r = rng.dirichlet(np.ones(3), size=4)
    u = rng.normal(size=(4, 3))
    sizes = rng.integers(1, 20, size=4).astype(float)
    q = e_step(r, u)
    entropy = -np.sum(sizes[:, None] * q * np.log(q))
    assert objective(r, u, sizes) == pytest.approx(q_function(q, r, u, sizes) + entropy, rel=1e-10)
    # and the E-step maximises Q + entropy over q: any other q gives a lower bound on J
    other = rng.dirichlet(np.ones(3), size=4)
    bound = q_function(other, r, u, sizes) - np.sum(sizes[:, None] * other * np.log(other))
    assert bound < objective(r, u, sizes)


def test_hard_and_one_hot_routing():
    assert hard_routing(R).tolist() == [1, 0, 0]  # ties go to the first expert
    oh = one_hot_routing(np.array([1, 0, 2]), 3)
    np.testing.assert_array_equal(oh, [[0, 1, 0], [1, 0, 0], [0, 0, 1]])


def test_measured_hard_objective_by_hand():
    assignment = np.array([0, 1, 1, 0])
    region_losses = np.array([[0.5, 9.0, 9.0, 0.25], [9.0, 1.0, 2.0, 9.0]])  # (K, M)
    sizes = np.array([2.0, 3.0, 1.0, 4.0])
    # -(2 * 0.5 + 3 * 1.0 + 1 * 2.0 + 4 * 0.25) = -7
    assert measured_hard_objective(assignment, region_losses, sizes) == pytest.approx(-7.0)


# -- multilinear extension ---------------------------------------------------------------


def nonlinear_vertex_fn(b: np.ndarray) -> np.ndarray:
    b = np.asarray(b, dtype=np.float64)
    w = np.arange(1, len(b) + 1, dtype=np.float64)
    return np.array([np.sin(b @ w) + b.sum() ** 2, np.exp(-b[0] * b[1]) * (1 + b[-1]), b.prod()])


def brute_force_expectation(fn, r: np.ndarray) -> np.ndarray:
    """E_{b ~ Bernoulli(r)} fn(b), enumerating the integers 0..2^M-1 as bit patterns."""
    m = len(r)
    total = np.zeros_like(fn(np.zeros(m)))
    for code in range(2**m):
        b = np.array([(code >> i) & 1 for i in range(m)], dtype=np.float64)
        p = 1.0
        for i in range(m):
            p *= r[i] if b[i] else 1.0 - r[i]
        total = total + p * fn(b)
    return total


@pytest.mark.parametrize("m", [4, 5])
def test_multilinear_extension_matches_brute_force(m):
    rng = np.random.default_rng(m)
    for _ in range(3):
        r = rng.random(m)
        np.testing.assert_allclose(
            multilinear_extension(nonlinear_vertex_fn, r),
            brute_force_expectation(nonlinear_vertex_fn, r),
            rtol=1e-12,
            atol=1e-12,
        )


@pytest.mark.parametrize("m", [4, 5])
def test_multilinear_extension_equals_vertex_fn_at_vertices(m):
    rng = np.random.default_rng(10 + m)
    for _ in range(4):
        b = (rng.random(m) < 0.5).astype(np.float64)
        np.testing.assert_allclose(
            multilinear_extension(nonlinear_vertex_fn, b), nonlinear_vertex_fn(b), atol=1e-12
        )


def test_multilinear_extension_is_affine_in_each_coordinate():
    rng = np.random.default_rng(7)
    m = 5
    r = rng.random(m)
    for i in range(m):
        values = {}
        for t in (0.0, 0.3, 0.75, 1.0):
            point = r.copy()
            point[i] = t
            values[t] = multilinear_extension(nonlinear_vertex_fn, point)
        for t in (0.3, 0.75):
            np.testing.assert_allclose(
                values[t], (1 - t) * values[0.0] + t * values[1.0], rtol=1e-10, atol=1e-12
            )
    # ...but not affine along a diagonal direction (the function is not linear)
    ends = [multilinear_extension(nonlinear_vertex_fn, np.full(m, t)) for t in (0.0, 0.5, 1.0)]
    assert not np.allclose(ends[1], 0.5 * (ends[0] + ends[2]))


def test_expected_losses_agrees_with_exact_extension(fitted_surrogate, tabular_space):
    surrogate = fitted_surrogate
    m = surrogate.n_clusters
    rng = np.random.default_rng(5)
    archs = tabular_space.sample_many(2, rng)
    col = np.array([0.9, 0.1, 0.75, 0.3, 0.5])
    routing = np.stack([col, 1.0 - col], axis=1)  # (M, K)
    n_samples = 4000
    uniforms = rng.random((2, n_samples, m))
    estimate = expected_losses(surrogate, archs, routing, uniforms)
    assert estimate.shape == (m, 2)

    for k, arch in enumerate(archs):

        def vertex(b, arch=arch):
            return surrogate.predict([arch], b[None, :])[0]

        exact = multilinear_extension(vertex, routing[:, k])
        second_moment = multilinear_extension(lambda b, v=vertex: v(b) ** 2, routing[:, k])
        sampling_std = np.sqrt(np.maximum(second_moment - exact**2, 0.0) / n_samples)
        assert np.all(np.abs(estimate[:, k] - exact) <= 5 * sampling_std + 1e-9), (
            estimate[:, k],
            exact,
            sampling_std,
        )

    # the surrogate does react to the mask, so the check above has teeth: evaluating the
    # extension at the other expert's routing column gives a clearly different answer
    def vertex0(b):
        return surrogate.predict([archs[0]], b[None, :])[0]

    wrong = multilinear_extension(vertex0, routing[:, 1])
    assert np.max(np.abs(estimate[:, 0] - wrong)) > 0.05
