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
    mase_per_window,
    original_unit_scores,
    quantile_loss_sums,
    relative_geomean,
    sample_student_t,
    seasonal_error,
    seasonality,
    split_params,
    student_t_nll,
    student_t_quantiles,
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


# -- the field's metrics: MASE, weighted quantile loss, relative geometric mean ------------


def test_seasonality_follows_gluonts_defaults():
    # gluonts.time_feature.get_seasonality: H 24, D 1, W 1, M 12, Q 4, T 1440; multiples
    # divide the base period when they can, else 1
    expected = {
        "hourly": 24,
        "daily": 1,
        "weekly": 1,
        "monthly": 12,
        "quarterly": 4,
        "yearly": 1,
        "half_hourly": 48,
        "10_minutes": 144,
        "minutely": 1440,
        "4_seconds": 1,
        "H": 24,
        "2H": 12,
        "7H": 1,
        "1M": 12,
        None: 1,
        "fortnightly": 1,
    }
    assert {f: seasonality(f) for f in expected} == expected


def test_mase_by_hand():
    # context 1, 3, 2, 4, 3 with m = 2: |2-1|, |4-3|, |3-2| -> seasonal error 1
    context = np.array([[1.0, 3.0, 2.0, 4.0, 3.0]])
    assert seasonal_error(context, 2)[0] == pytest.approx(1.0)
    # m = 1: |2|, |1|, |2|, |1| -> 1.5; a season >= the context length falls back to 1
    assert seasonal_error(context, 1)[0] == pytest.approx(1.5)
    assert seasonal_error(context, 5)[0] == pytest.approx(1.5)
    y = np.array([[5.0, 1.0]])
    point = np.array([[4.0, 3.0]])  # errors 1 and 2: mean 1.5
    assert mase_per_window(point, y, context, 2)[0] == pytest.approx(1.5)
    assert mase_per_window(point, y, context, 1)[0] == pytest.approx(1.0)
    # scale-free: the same in any units
    assert mase_per_window(7 * point, 7 * y, 7 * context, 2)[0] == pytest.approx(1.5)
    # a constant context has no seasonal error: NaN (dropped when aggregated)
    assert np.isnan(mase_per_window(point, y, np.ones((1, 5)), 2)[0])


def test_quantile_loss_by_hand():
    # y = 10, forecasts x_0.1 = 8, x_0.5 = 11, x_0.9 = 13
    # 2|QL|: q=0.1: 2 * (10-8) * 0.1 = 0.4; q=0.5: 2 * |(10-11)(0.5-1)| = 1.0;
    # q=0.9: 2 * |(10-13)(0.9-1)| = 0.6
    xq = np.array([[8.0], [11.0], [13.0]])
    got = quantile_loss_sums(xq, np.array([10.0]), (0.1, 0.5, 0.9))
    np.testing.assert_allclose(got[:, 0], [0.4, 1.0, 0.6])
    # the sample-based wQL reuses it: point masses give those quantiles exactly
    samples = np.stack([np.full((2, 1), 8.0), np.full((2, 1), 11.0)])  # two-sample
    wql = weighted_quantile_loss(samples, np.full((2, 1), 10.0), quantiles=(0.5,))
    # median of {8, 11} is 9.5: 2 * 0.5 * 0.5 per element, over sum |y| = 20 -> 0.5 * 2 / 20
    assert wql == pytest.approx(2 * 2 * 0.5 * 0.5 / 20)


def test_student_t_quantiles_match_scipy():
    q = student_t_quantiles(np.array([1.0]), np.array([2.0]), np.array([5.0]), (0.1, 0.5, 0.9))
    np.testing.assert_allclose(q[:, 0], stats.t.ppf([0.1, 0.5, 0.9], 5, loc=1, scale=2))


def test_original_unit_scores_by_hand():
    # two windows of one horizon step, scaled units; scales 1 and 10; tiny Student-t spread
    # so every quantile is the location
    context = np.array([[1.0, 2.0, 1.0, 2.0], [1.0, 1.0, 2.0, 2.0]])
    y = np.array([[2.0], [3.0]])
    loc = np.array([[1.0], [1.0]])
    out = torch.as_tensor(np.stack([loc, np.full_like(loc, 1e-9), np.full_like(loc, 5.0)], -1))
    scale = np.array([1.0, 10.0])
    res = original_unit_scores(out, context, y, scale, source=np.array([0, 1]), seasons=[1, 2])
    # window 0 (m = 1): seasonal error mean(1, 1, 1) = 1, |2 - 1| = 1 -> MASE 1
    # window 1 (m = 2): error mean(|2-1|, |2-1|) = 1, |3 - 1| = 2 -> MASE 2
    assert res["per_domain_mase"] == {0: pytest.approx(1.0), 1: pytest.approx(2.0)}
    assert res["mase"] == pytest.approx(1.5)
    # wQL, original units: window 0: y 2, x 1; window 1: y 30, x 10. Every level q has
    # 2|(y - x)(q - 0)| = 2 q (y - x): mean over q = 0.1..0.9 of 2q is 1.0
    assert res["per_domain_wql"][0] == pytest.approx(1.0 * 1 / 2)
    assert res["per_domain_wql"][1] == pytest.approx(1.0 * 20 / 30)
    assert res["wql"] == pytest.approx(1.0 * 21 / 32)  # pooled: windows count by magnitude
    assert res["n_mase_skipped"] == {0: 0, 1: 0}


def test_relative_geomean_by_hand():
    got = relative_geomean({"a": 2.0, "b": 0.5, "c": 1.0}, {"a": 1.0, "b": 1.0, "c": 4.0})
    assert got == pytest.approx((2.0 * 0.5 * 0.25) ** (1 / 3))
    assert relative_geomean({"a": 2.0, "b": None}, {"a": 4.0, "b": 1.0}) == pytest.approx(0.5)
    assert relative_geomean({"a": 1.0}, {}) is None
