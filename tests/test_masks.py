"""Cluster-mask samplers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgem.search.masks import bernoulli_masks, log_uniform_size_mask, nonempty_bernoulli_mask


def exact_size_pmf(m: int, min_size: int) -> dict[int, float]:
    """P(size = s) for size = floor(exp(U)), U ~ Uniform(log a, log(M + 1)), a = min(min_size, M):
    floor(exp(U)) = s  <=>  U in [log s, log(s + 1))."""
    a = min(min_size, m)
    width = math.log(m + 1) - math.log(a)
    return {s: (math.log(s + 1) - math.log(s)) / width for s in range(a, m + 1)}


@pytest.mark.parametrize(("m", "min_size"), [(20, 3), (7, 1), (50, 3)])
def test_log_uniform_size_distribution(m, min_size):
    rng = np.random.default_rng(m)
    n = 20_000
    sizes = np.empty(n, dtype=np.int64)
    for i in range(n):
        mask = log_uniform_size_mask(m, rng, min_size)
        assert mask.shape == (m,) and mask.dtype == bool
        sizes[i] = mask.sum()
    assert sizes.min() >= min_size and sizes.max() <= m
    pmf = exact_size_pmf(m, min_size)
    assert sum(pmf.values()) == pytest.approx(1.0)
    support = np.arange(min_size, m + 1)
    cdf_exact = np.cumsum([pmf[s] for s in support])
    cdf_empirical = np.array([(sizes <= s).mean() for s in support])
    # Kolmogorov-Smirnov distance: the 99.9% critical value for n = 20000 is ~0.014
    assert np.max(np.abs(cdf_exact - cdf_empirical)) < 0.014
    # log-uniform: exp(U) falls below the geometric mean t = sqrt(a (M + 1)) half of the time;
    # size <= exp(U) < size + 1, so P(size <= floor(t) - 1) <= 1/2 <= P(size <= floor(t))
    t = math.floor(math.sqrt(min_size * (m + 1)))
    assert (sizes <= t - 1).mean() <= 0.5 + 0.015
    assert (sizes <= t).mean() >= 0.5 - 0.015


def test_small_masks_are_far_more_frequent_than_under_bernoulli_half():
    m = 20
    rng = np.random.default_rng(0)
    sizes = np.array([log_uniform_size_mask(m, rng).sum() for _ in range(5000)])
    small = 5
    p_bernoulli = sum(math.comb(m, s) for s in range(small + 1)) / 2**m  # ~ 0.021
    p_log_uniform = (sizes <= small).mean()  # ~ (log 6 - log 3) / (log 21 - log 3) ~ 0.36
    assert p_log_uniform > 10 * p_bernoulli


def test_log_uniform_mask_chooses_clusters_uniformly():
    m = 10
    rng = np.random.default_rng(1)
    masks = np.stack([log_uniform_size_mask(m, rng) for _ in range(20_000)])
    freq = masks.mean(axis=0)
    # every cluster is in the mask with the same probability E[size] / M
    expected = sum(s * p for s, p in exact_size_pmf(m, 3).items()) / m
    np.testing.assert_allclose(freq, expected, atol=0.015)


def test_min_size_above_m_gives_the_full_mask():
    rng = np.random.default_rng(2)
    for _ in range(20):
        assert log_uniform_size_mask(4, rng, min_size=10).all()


def test_bernoulli_masks_mean_matches_r():
    rng = np.random.default_rng(3)
    r = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    n = 40_000
    masks = bernoulli_masks(r, n, rng)
    assert masks.shape == (n, 5) and masks.dtype == np.float64
    assert set(np.unique(masks)) <= {0.0, 1.0}
    std = np.sqrt(r * (1 - r) / n)
    assert np.all(np.abs(masks.mean(axis=0) - r) <= 5 * std + 1e-12)
    # independent coordinates: the correlation between two columns is near zero
    assert abs(np.corrcoef(masks[:, 1], masks[:, 2])[0, 1]) < 0.03


def test_nonempty_bernoulli_mask():
    rng = np.random.default_rng(4)
    fallback = np.array([False, True, False])
    np.testing.assert_array_equal(nonempty_bernoulli_mask(np.zeros(3), rng, fallback), fallback)
    np.testing.assert_array_equal(
        nonempty_bernoulli_mask(np.array([0.0, 0.0, 1.0]), rng, fallback), [False, False, True]
    )
    r = np.array([0.05, 0.05, 0.05])
    for _ in range(200):
        assert nonempty_bernoulli_mask(r, rng, fallback).any()
