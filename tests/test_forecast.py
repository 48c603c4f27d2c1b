"""Student-t NLL, sampling, sample CRPS and the closed-form Student-t CRPS."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from sgem.forecast import (
    crps_sample,
    crps_student_t,
    forecast_scores,
    sample_student_t,
    split_params,
    student_t_nll,
    weighted_quantile_loss,
)
from sgem.train import per_sample_nll


def test_student_t_nll_matches_scipy():
    rng = np.random.default_rng(0)
    loc = rng.normal(size=200)
    scale = rng.uniform(0.01, 5.0, size=200)
    df = rng.uniform(2.0, 60.0, size=200)
    y = loc + scale * rng.standard_t(3.0, size=200) * 3
    got = student_t_nll(*(torch.as_tensor(a) for a in (loc, scale, df, y)))
    expected = -stats.t.logpdf(y, df, loc=loc, scale=scale)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-10)


def test_student_t_nll_matches_torch_distribution_and_has_gradients():
    loc = torch.tensor([0.3, -1.0], requires_grad=True)
    scale = torch.tensor([0.5, 2.0], requires_grad=True)
    df = torch.tensor([2.5, 10.0], requires_grad=True)
    y = torch.tensor([1.0, -4.0])
    nll = student_t_nll(loc, scale, df, y)
    ref = -torch.distributions.StudentT(df, loc, scale).log_prob(y)
    torch.testing.assert_close(nll, ref)
    nll.sum().backward()
    for p in (loc, scale, df):
        assert torch.isfinite(p.grad).all() and (p.grad != 0).all()


def test_per_sample_nll_student_t_is_the_mean_over_the_horizon():
    gen = torch.Generator().manual_seed(0)
    b, h = 5, 4
    loc = torch.randn(b, h, generator=gen)
    scale = torch.rand(b, h, generator=gen) + 0.1
    df = 2.0 + 5 * torch.rand(b, h, generator=gen)
    out = torch.stack([loc, scale, df], dim=-1)
    y = torch.randn(b, h, generator=gen)
    nll = per_sample_nll(out, y, "student_t")
    assert nll.shape == (b,)
    torch.testing.assert_close(nll, student_t_nll(loc, scale, df, y).mean(1))
    with pytest.raises(ValueError, match=r"\(batch, horizon, 3\)"):
        per_sample_nll(out.reshape(b, -1), y, "student_t")
    with pytest.raises(ValueError, match="targets must have shape"):
        per_sample_nll(out, y[:, :2], "student_t")
    assert [t.shape for t in split_params(out)] == [(b, h)] * 3


def test_sample_student_t_is_seeded_and_has_the_right_law():
    a = sample_student_t([0.0, 5.0], [1.0, 0.1], 4.0, 20_000, rng=1)
    b = sample_student_t([0.0, 5.0], [1.0, 0.1], 4.0, 20_000, rng=1)
    assert a.shape == (20_000, 2)
    np.testing.assert_array_equal(a, b)
    # Kolmogorov-Smirnov against the exact law of each column
    assert stats.kstest(a[:, 0], stats.t(4.0, 0.0, 1.0).cdf).pvalue > 1e-3
    assert stats.kstest(a[:, 1], stats.t(4.0, 5.0, 0.1).cdf).pvalue > 1e-3
    with pytest.raises(ValueError, match="n_samples"):
        sample_student_t(0.0, 1.0, 3.0, 0)


@pytest.mark.parametrize("fair", [True, False])
def test_crps_sample_sorted_form_equals_the_pairwise_definition(fair):
    rng = np.random.default_rng(3)
    samples = rng.normal(size=(37, 3, 2))
    y = rng.normal(size=(3, 2))
    got = crps_sample(samples, y, fair=fair)
    s = samples.shape[0]
    pair = np.abs(samples[:, None] - samples[None, :]).sum(axis=(0, 1))
    expected = np.abs(samples - y).mean(0) - 0.5 * pair / (s * (s - 1) if fair else s * s)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_crps_sample_of_a_point_mass_is_the_absolute_error():
    samples = np.full((10, 4), 2.0)
    y = np.array([2.0, 0.0, 5.0, -1.0])
    np.testing.assert_allclose(crps_sample(samples, y), np.abs(y - 2.0))


CASES = [  # (mu, sigma, nu, y)
    (0.0, 1.0, 3.0, 0.0),
    (0.0, 1.0, 3.0, 2.5),
    (1.5, 0.3, 5.0, 1.0),
    (-2.0, 2.0, 2.5, 4.0),
    (10.0, 0.05, 30.0, 10.02),
]


@pytest.mark.parametrize(("mu", "sigma", "nu", "y"), CASES)
def test_crps_closed_form_matches_numerical_integration(mu, sigma, nu, y):
    # CRPS = int (F(x) - 1{x >= y})^2 dx, split at y
    dist = stats.t(nu, mu, sigma)
    lo = integrate.quad(lambda x: dist.cdf(x) ** 2, -np.inf, y, limit=200)[0]
    hi = integrate.quad(lambda x: dist.sf(x) ** 2, y, np.inf, limit=200)[0]
    assert float(crps_student_t(mu, sigma, nu, y)) == pytest.approx(lo + hi, rel=1e-6)


def test_crps_sample_agrees_with_the_closed_form_within_sampling_error():
    mu, sigma, nu, y = (np.array(c) for c in zip(*CASES, strict=True))
    closed = crps_student_t(mu, sigma, nu, y)
    # 40 independent batches of 5000 draws: their spread gives the standard error
    samples = sample_student_t(mu, sigma, nu, 200_000, rng=0).reshape(40, 5000, len(mu))
    per_batch = np.stack([crps_sample(batch, y) for batch in samples])
    estimate = per_batch.mean(0)
    stderr = per_batch.std(0, ddof=1) / np.sqrt(len(per_batch))
    assert (np.abs(estimate - closed) < 4 * stderr + 1e-12).all(), (estimate, closed, stderr)
    assert (np.abs(estimate - closed) < 0.02 * closed).all()


def test_crps_closed_form_tends_to_the_gaussian_one_and_is_inf_for_df_at_most_1():
    z = np.linspace(-3, 3, 7)
    gauss = z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi)
    np.testing.assert_allclose(crps_student_t(0.0, 1.0, 1e6, z), gauss, rtol=1e-4, atol=1e-6)
    # location-scale equivariance
    np.testing.assert_allclose(
        crps_student_t(3.0, 2.0, 4.0, 3.0 + 2.0 * z), 2.0 * crps_student_t(0.0, 1.0, 4.0, z)
    )
    assert np.isinf(crps_student_t(0.0, 1.0, [0.5, 1.0], 0.0)).all()
    with pytest.raises(ValueError, match="scale > 0"):
        crps_student_t(0.0, 0.0, 3.0, 1.0)


def test_weighted_quantile_loss_on_a_point_forecast():
    samples = np.full((50, 3), 1.0)
    y = np.array([2.0, 1.0, -1.0])
    qs = (0.1, 0.5, 0.9)
    # quantile losses per level: |y - 1| * (q if y > 1 else 1 - q), summed, times 2 / sum|y|
    expected = np.mean([2 * (1.0 * q + 0.0 + 2.0 * (1 - q)) / 4.0 for q in qs])
    assert weighted_quantile_loss(samples, y, qs) == pytest.approx(expected)
    with pytest.raises(ValueError, match="sum"):
        weighted_quantile_loss(samples, np.zeros(3))


def test_forecast_scores_of_a_network_output():
    gen = torch.Generator().manual_seed(0)
    loc = torch.randn(64, 6, generator=gen)
    out = torch.stack([loc, torch.full_like(loc, 0.5), torch.full_like(loc, 4.0)], dim=-1)
    y = loc + 0.5 * torch.randn(64, 6, generator=gen)
    scores = forecast_scores(out, y, n_samples=400, rng=0)
    assert set(scores) == {"nll", "crps", "crps_closed_form"}
    assert scores["nll"] == pytest.approx(float(per_sample_nll(out, y, "student_t").mean()))
    assert scores["crps"] == pytest.approx(scores["crps_closed_form"], rel=0.05)
