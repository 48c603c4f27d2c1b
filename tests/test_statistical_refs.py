"""statsforecast references (AutoETS, AutoTheta): interval -> Normal conversion, divergence
fallback to seasonal naive, and an end-to-end fit on small real-looking series."""

from __future__ import annotations

import numpy as np
import pytest

from sgem.baselines import available, get_baseline
from sgem.baselines.statistical import (
    Z80,
    AutoThetaReference,
    diverged,
    normal_from_interval,
)
from sgem.data.timeseries import make_timeseries_task
from sgem.methods.budget import MethodBudget

CONTEXT, HORIZON = 48, 8


def _task():
    rng = np.random.default_rng(0)
    t = np.arange(400)
    domains = {
        "daily_cycle": [10 + 3 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 0.3, 400)],
        "walk": [50 + np.cumsum(rng.normal(0, 1, 400))],
        "trend": [1 + 0.05 * t + rng.normal(0, 0.5, 400)],
    }
    return make_timeseries_task(
        domains, n_windows=120, n_clusters=4, context=CONTEXT, horizon=HORIZON, seed=0
    )


def test_the_references_are_registered() -> None:
    assert {"auto_ets", "auto_theta"} <= set(available())


def test_an_80_percent_interval_gives_the_normal_scale() -> None:
    scale = normal_from_interval(np.zeros(3), -np.array([1.0, 2.0, 3.0]) * Z80, [Z80, 2 * Z80, 0])
    np.testing.assert_allclose(scale[:2], [1.0, 2.0])
    assert scale[2] > 0  # a degenerate interval keeps a positive floor


def test_divergence_is_detected() -> None:
    context = np.sin(np.arange(48) / 3.0) + 5
    ok = np.full(8, 5.0)
    assert not diverged(context, ok, np.full(8, 0.5))
    assert diverged(context, np.full(8, np.nan), np.full(8, 0.5))
    assert diverged(context, np.full(8, 5e4), np.full(8, 0.5))
    assert diverged(context, ok, np.full(8, 1e6))


def test_a_diverged_window_falls_back_to_seasonal_naive(monkeypatch) -> None:
    """Every window 'fails' here, so the result must equal seasonal naive's point forecast
    and count every window as a fallback."""
    pytest.importorskip("statsforecast")
    task = _task()
    ref = AutoThetaReference()

    def boom(context, horizon, season):
        raise RuntimeError("no fit")

    monkeypatch.setattr(ref, "forecast_window", boom)
    setup = MethodBudget(space=None, crps_samples=20)
    row = ref.fit_evaluate(task, setup).row(task)
    assert row["fallback_windows"] == row["windows"] == len(task.test)
    assert np.isfinite(row["test_nll"]) and np.isfinite(row["test_crps"])


@pytest.mark.parametrize("name", ["auto_theta", "auto_ets"])
def test_references_score_like_every_other_method(name) -> None:
    pytest.importorskip("statsforecast")
    task = _task()
    setup = MethodBudget(space=None, crps_samples=20)
    row = get_baseline(name).fit_evaluate(task, setup).row(task)
    naive = get_baseline("naive").fit_evaluate(task, setup).row(task)
    for key in ("test_nll", "test_crps", "test_mase", "test_wql"):
        assert np.isfinite(row[key]), key
    assert row["fallback_windows"] < row["windows"]
    # local ETS / Theta models forecast these clean seasonal and trend series better than
    # the last value
    assert row["test_crps"] < naive["test_crps"]


#: a weekly history on which AutoETS divided by zero (a `sgem fit` of series with zeros)
SHORT = [0.0, -0.67702141, 2.36091367, 2.76155, 0.80751209, 0.0, 0.0]


def test_autoets_on_a_short_history_says_nothing_to_the_user() -> None:
    """statsforecast's AutoETS divides by zero on some short histories (7 values, zeros
    among them; numpy's RuntimeWarning reached `sgem fit`'s output); the fit still returns
    a finite forecast."""
    import warnings

    from sgem.baselines.statistical import AutoETSReference

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, (mean, scale) = AutoETSReference().fit_window(np.array(SHORT), 6, 1)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(scale))


@pytest.mark.parametrize("name", ["AutoETS", "AutoTheta"])
def test_a_series_of_tiny_values_gets_an_interval_of_its_own_size(name) -> None:
    """The least spread of a classical member's forecast is relative to the series' level:
    an absolute floor of 1e-3 made the 80 % interval of a series around 1e-3 many times
    wider than its noise (a combination of AutoETS / AutoTheta saved on such series)."""
    from sgem.moe.classical import ClassicalMember

    rng = np.random.default_rng(0)
    level = 1e-3
    y = level * (1 + 0.01 * rng.standard_normal(80))
    loc, scale = ClassicalMember(name).forecast([y, y * 1e6], 6, 1)
    assert np.allclose(loc[0], level, rtol=0.05)
    noise = float(np.std(y))
    assert scale[0].max() < 5 * noise < 1e-4  # (floored at 1e-3 before)
    # the same series in larger units keeps its interval about in proportion (AutoTheta's
    # fit is not exactly scale-free)
    ratio = scale[1] / 1e6 / scale[0]
    assert np.all((ratio > 0.3) & (ratio < 3))
