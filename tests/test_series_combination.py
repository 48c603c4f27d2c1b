"""A forecaster saved as a combination of the searched MoE with AutoETS / AutoTheta: the
classical members are refitted on each series at forecast time (nothing of them saved but
their names), their weights come from validation, and the model reloads and forecasts the
same."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from test_leaderboard import model_split
from test_series_gaps import TINY

import sgem
from sgem.leaderboard.series_members import DISPLAY
from sgem.moe import classical
from sgem.moe.classical import ClassicalMember
from sgem.moe.combination import Combination, mixture_quantiles
from sgem.moe.interval_width import conformal_spread


def trend_frame() -> pd.DataFrame:
    """Yearly series of smooth local trends (what exponential smoothing is made for), of
    different levels and lengths; networks trained for one step cannot match it."""
    rng = np.random.default_rng(5)
    rows = []
    for i in range(40):
        n = 20 + (i % 4) * 5
        slope = rng.normal(0.04, 0.02)
        y = (50 + 40 * i) * np.exp(slope * np.arange(n)) * (1 + rng.normal(0, 0.01, n))
        ds = pd.date_range("1980-01-01", periods=n, freq="YS")
        rows.append(pd.DataFrame({"unique_id": f"s{i}", "ds": ds, "y": y}))
    return pd.concat(rows, ignore_index=True)


def fit_trends(out, config: dict, **options):
    """`sgem.fit` on `trend_frame()` (horizon 4, context 8, no progress bars)."""
    return sgem.fit(
        trend_frame(), horizon=4, context=8, out=out, progress=False, config=config, **options
    )


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("combination") / "run"
    frame = trend_frame()
    search = {**TINY["search"], "train": {"steps": 1, "batch_size": 32}, "final_steps": 1}
    config = {**TINY, "search": search, "task": {"n_windows": 600, "n_clusters": 3}}
    model = sgem.fit(frame, horizon=4, context=8, out=out, progress=False, config=config)
    return model, out, frame


def test_classical_members_join_the_saved_forecaster_and_reload(fitted) -> None:
    model, out, frame = fitted
    mix = model.combination
    assert mix is not None and mix.forecasting, model.result["leaderboard"].get("shipped")
    assert set(mix.names) <= {"AutoETS", "AutoTheta", "seasonal naive"}
    assert mix.weights.sum() == pytest.approx(1)
    assert mix.season == 1  # yearly: from the file's frequency
    doc = json.loads((out / "model" / "model.json").read_text())
    saved = doc["info"]["combination"]["members"]
    named = [("sgem.classical/1", DISPLAY.get(m["name"], m["name"])) for m in saved]
    assert named == [("sgem.classical/1", n) for n in mix.names]
    assert all(m["spread"] > 0 and m["df"] > 2 for m in saved)  # tails fitted on validation
    series = [g["y"].to_numpy() for _, g in frame.groupby("unique_id", sort=False)]
    fc = model.forecast(series, quantiles=(0.1, 0.5, 0.9))
    assert fc.loc.shape == (40, 4) and np.isfinite(fc.loc).all()
    assert np.array_equal(fc.point, fc.quantiles[0.5])
    assert (fc.quantiles[0.1] <= fc.quantiles[0.5]).all()
    assert (fc.quantiles[0.5] <= fc.quantiles[0.9]).all()
    again = sgem.load(out).forecast(series, quantiles=(0.1, 0.5, 0.9))
    np.testing.assert_array_equal(again.quantiles[0.9], fc.quantiles[0.9])
    lb = model.result["leaderboard"]
    assert "a combination (" in lb["shipped"]["model"]
    # the saved model's metrics are the combination's own, without the MoE member's NLL
    # (quantiles are averaged: there is no density); `evaluate` on a Split refits the
    # classical members on the windows' contexts alone (a Split has no whole histories)
    scores = sgem.load(out).evaluate(model_split(out))
    assert "test_nll" not in model.spec.metrics and "test_nll" not in scores
    assert {"test_rmse", "test_crps"} <= set(scores) & set(model.spec.metrics)
    assert 0.0 <= scores["test_coverage_80"] <= 1.0


def test_the_mixture_median_lies_between_its_members() -> None:
    rng = np.random.default_rng(0)
    outs = [
        np.stack([rng.normal(size=(5, 3)), np.full((5, 3), s), np.full((5, 3), 5.0)], -1)
        for s in (0.5, 1.0)
    ]
    median = mixture_quantiles(outs, np.array([0.3, 0.7]), (0.5,))[0.5]
    lo = np.minimum(outs[0][..., 0], outs[1][..., 0]) - 1e-9
    hi = np.maximum(outs[0][..., 0], outs[1][..., 0]) + 1e-9
    assert ((median >= lo) & (median <= hi)).all()


def test_a_classical_member_forecasts_every_series_even_degenerate_ones() -> None:
    histories = [np.array([5.0]), np.array([3.0, 3.0, 3.0]), np.linspace(1, 20, 20)]
    loc, scale = ClassicalMember("AutoETS").forecast(histories, 3, 0)
    assert loc.shape == (3, 3) and np.isfinite(loc).all() and (scale > 0).all()


def test_refitting_many_series_shows_a_progress_bar_where_asked(monkeypatch, capsys) -> None:
    """`sgem predict` shows one while AutoETS is refitted per series (a minute for 2000)."""
    from sgem.execution.progress import shown

    monkeypatch.setattr(classical, "PROGRESS_SERIES", 3)
    rng = np.random.default_rng(0)
    histories = [10 + rng.normal(size=30).cumsum() for _ in range(3)]
    ClassicalMember("AutoETS").forecast(histories, 4, 1)
    assert "refitted per series" not in capsys.readouterr().err  # the library stays quiet
    with shown(True):
        loc, _ = ClassicalMember("AutoETS").forecast(histories, 4, 1)
    assert "AutoETS refitted per series" in capsys.readouterr().err and loc.shape == (3, 4)


def test_a_partial_forecast_stops_between_series_and_keeps_them_whole() -> None:
    """With `partial`, a stop leaves the series not reached NaN and every series reached
    done at all of its origins (the leaderboard scores a random subset of the series)."""
    rng = np.random.default_rng(0)
    base = [10 + rng.normal(size=40).cumsum() for _ in range(6)]
    histories = [b[:n] for b in base for n in (30, 35, 40)]  # three origins per series
    series = [i for i in range(6) for _ in range(3)]
    asked = iter(range(100))
    loc, scale = ClassicalMember("AutoETS").forecast(
        histories, 4, 1, stop=lambda: next(asked) >= 2, series=series, partial=True
    )
    done = np.isfinite(loc).all(1).reshape(6, 3)
    assert done.all(1).sum() == 2 and (done.all(1) | ~done.any(1)).all()
    assert np.array_equal(np.isfinite(scale), np.isfinite(loc))
    with pytest.raises(classical.Stopped):  # without `partial`, a stop is an error
        ClassicalMember("AutoETS").forecast(histories, 4, 1, stop=lambda: True, series=series)


def test_a_malformed_classical_state_is_refused() -> None:
    state = {"weights": [0.5, 0.5], "names": ["x"], "scales": [1.0], "loss": "student_t"}
    with pytest.raises(ValueError, match="unknown classical member"):
        Combination.from_state(
            {**state, "members": [{"format": "sgem.classical/1", "name": "os.system"}]}, {}
        )
    with pytest.raises(ValueError, match="season"):
        Combination.from_state(
            {
                **state,
                "season": "12",
                "members": [{"format": "sgem.classical/1", "name": "AutoETS"}],
            },
            {},
        )


def test_the_conformal_spread_makes_the_80_percent_interval_cover_80_percent() -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(0, 2.0, size=(4000, 3))  # twice as wide as the quantiles claim
    m = np.zeros_like(y)
    q = {0.1: m - 1.2816, 0.5: m, 0.9: m + 1.2816}
    c = conformal_spread(q, y)
    assert c == pytest.approx(2.0, rel=0.08)
    covered = np.mean(np.abs(y) <= c * 1.2816)
    assert covered == pytest.approx(0.8, abs=0.01)


def test_the_classical_references_are_fitted_before_the_search(fitted) -> None:
    """A budget that runs out in the final stage can no longer skip them: they come first."""
    model, _, _ = fitted
    stages = list(model.result["clock"]["stage_seconds"])
    assert stages.index("classical_references") < stages.index("search")
    rows = {r["model"]: r for r in model.result["leaderboard"]["rows"]}
    for name in ("seasonal naive", "AutoETS", "AutoTheta"):
        assert "skipped" not in rows[name].get("note", ""), rows[name]
        assert np.isfinite(rows[name]["holdout"]["crps"])


def test_the_leaderboard_runs_past_the_budget_fence_on_the_tracking_outputs(
    tmp_path, monkeypatch
) -> None:
    """With a validation-chosen length the MoE's validation outputs need no training, so a
    budget that ended in the final stage still gets its leaderboard and combination (the
    global networks, which would need training, are skipped and say so)."""
    import sgem.leaderboard.contest as contest
    import sgem.leaderboard.members as members

    monkeypatch.setattr(contest, "fence_passed", lambda: True)
    monkeypatch.setattr(members, "fence_passed", lambda: True)
    model = _fit_with_length(tmp_path, "validation", final_steps=2)
    lb = model.result["leaderboard"]
    assert "skipped" not in lb, lb.get("skipped")
    rows = {r["model"]: r for r in lb["rows"]}
    assert all("skipped" in r.get("note", "") for n, r in rows.items() if n.startswith("global"))
    assert model.combination is not None


def test_without_the_moes_validation_outputs_a_forecaster_is_combined_on_the_holdout(
    tmp_path, monkeypatch
) -> None:
    """The budget ended before the MoE's validation fits (a fixed final length needs them):
    the classical references, fitted before the search, are still combined with the MoE, on
    the holdout alone, rather than saving a final MoE the budget may have cut short."""
    import sgem.leaderboard.contest as contest

    monkeypatch.setattr(contest, "fence_passed", lambda: True)
    model = _fit_with_length(tmp_path, "fixed", final_steps=1)
    lb = model.result["leaderboard"]
    assert "holdout alone" in lb["rule"] and "a combination (" in lb["shipped"]["model"]
    assert model.combination is not None and model.combination.forecasting
    series = [g["y"].to_numpy() for _, g in trend_frame().groupby("unique_id", sort=False)]
    assert np.isfinite(model.forecast(series, quantiles=(0.1, 0.9)).quantiles[0.9]).all()


def _fit_with_length(tmp_path, length: str, final_steps: int):
    """A tiny fit of the trend series with the final length `length`."""
    search = {**TINY["search"], "train": {"steps": 1, "batch_size": 32}}
    config = {
        **TINY,
        "search": {**search, "final_steps": final_steps},
        "task": {"n_windows": 600, "n_clusters": 3},
        "final_length": length,
    }
    return sgem.fit(
        trend_frame(), horizon=4, context=8, out=tmp_path / "run", progress=False, config=config
    )


def test_one_daily_series_is_judged_on_its_end_with_its_week(tmp_path) -> None:
    """One series: validation windows are drawn at random (they overlap training windows),
    so the holdout at the series' end fits the combination's weights and interval width
    whatever its size, and the classical members model daily data's week (a frequency
    whose MASE period is 1)."""
    t = np.arange(400)
    y = 20 + 5 * np.sin(2 * np.pi * t / 7) + np.random.default_rng(0).normal(0, 1, 400)
    frame = pd.DataFrame(
        {"unique_id": "one", "ds": pd.date_range("2022-01-01", periods=400, freq="D"), "y": y}
    )
    search = {**TINY["search"], "train": {"steps": 1, "batch_size": 32}, "final_steps": 1}
    config = {**TINY, "search": search, "task": {"n_windows": 300, "n_clusters": 3}}
    model = sgem.fit(frame, horizon=7, context=21, out=tmp_path / "run", progress=False,
                     config=config)  # fmt: skip
    result = model.result
    assert result["series_report"]["held_out_windows"].startswith("holdout at series ends")
    mix = model.combination
    assert mix is not None and mix.season == 7
    assert re.search(
        r"weights fit on holdout \(interval width x[\d.]+ on the holdout", mix_note(result)
    )
    assert result["mase_seasons"] == [1]  # the score's period stays GluonTS's


def mix_note(result: dict) -> str:
    rows = result["leaderboard"]["rows"]
    return next(r["note"] for r in rows if r["model"] == "saved model (combination)")


def test_one_series_intervals_are_calibrated_on_its_end(tmp_path) -> None:
    """Validation windows of one series overlap its training windows: the MoE's own interval
    calibration uses the holdout at the series' end instead (its coverage there in-sample)."""
    t = np.arange(300)
    y = 10 + 0.05 * t + np.random.default_rng(1).normal(0, 1, 300)
    frame = pd.DataFrame(
        {"unique_id": "one", "ds": pd.date_range("2022-01-01", periods=300, freq="D"), "y": y}
    )
    search = {**TINY["search"], "train": {"steps": 1, "batch_size": 32}, "final_steps": 1}
    config = {**TINY, "search": search, "task": {"n_windows": 250, "n_clusters": 3}}
    model = sgem.fit(frame, horizon=7, context=14, out=tmp_path / "run", progress=False,
                     config=config, combine=False)  # fmt: skip
    report = model.result["calibration"]
    assert "holdout at the series' ends" in report["source"]
    cal = report["validation"]["coverage_80"]["calibrated"]
    assert 0.7 <= cal["overall"] <= 0.9  # fitted there: about 80 %
    assert "holdout" in str(model).split("interval coverage raw -> calibrated: ")[1][:8]


def test_one_series_without_an_id_column_is_fitted_and_predicted_by_its_own_names(
    tmp_path,
) -> None:
    """A user's single series as (date, sales): read as one series (not a table that lacks
    --target), and `sgem predict` reads new data with the names it was fitted with."""
    from sgem.run.fit_setup import infer_kind
    from sgem.run.predict_io import predict_file

    t = np.arange(200)
    frame = pd.DataFrame(
        {"date": pd.date_range("2023-01-01", periods=200, freq="D"), "sales": 5 + np.sin(t)}
    )
    path = tmp_path / "sales.csv"
    frame.to_csv(path, index=False)
    assert infer_kind(path, time_col="date", value_col="sales") == "timeseries"
    search = {**TINY["search"], "train": {"steps": 1, "batch_size": 32}, "final_steps": 1}
    config = {**TINY, "search": search, "task": {"n_windows": 150, "n_clusters": 3}}
    model = sgem.fit(path, horizon=7, context=14, time_col="date", value_col="sales",
                     out=tmp_path / "run", progress=False, config=config)  # fmt: skip
    assert model.spec.info["series_columns"] == {
        "id_col": None, "time_col": "date", "value_col": "sales",
    }  # fmt: skip
    fc = predict_file(model, path)
    assert len(fc) == 7 and np.isfinite(fc["forecast"]).all()
    assert "date" in fc.columns and "ds" not in fc.columns  # the user's own names


def test_a_classical_member_the_budget_cut_short_still_joins_the_combination(
    tmp_path, monkeypatch
) -> None:
    """The budget's fence ends AutoETS' fits after 32 of the 40 series (AutoTheta never
    starts): AutoETS still joins the saved combination, its weight fit on the windows of the
    series it reached, and the saved model forecasts every series with it."""
    import sgem.moe.classical_pool as classical_pool

    asked = {"n": 0}

    def fence() -> bool:
        asked["n"] += 1
        return asked["n"] > 33  # (asked once before the first series)

    monkeypatch.setattr(classical_pool, "fence_passed", fence)
    model = _fit_with_length(tmp_path, "validation", final_steps=1)
    rows = {r["model"]: r for r in model.result["leaderboard"]["rows"]}
    assert "subset" in rows["AutoETS"] and "skipped" in rows["AutoTheta"].get("note", "")
    mix = model.combination
    assert mix is not None and "AutoETS" in mix.names, mix_note(model.result)
    assert re.search(r"on the \d+ windows of the series AutoETS reached", mix_note(model.result))
    saved = rows["saved model (combination)"]["holdout"]
    assert np.isfinite(saved["crps"]) and np.isfinite(saved["rmse"])
    series = [g["y"].to_numpy() for _, g in trend_frame().groupby("unique_id", sort=False)]
    assert np.isfinite(model.forecast(series, quantiles=(0.1, 0.9)).quantiles[0.1]).all()


def test_the_leaderboard_shows_each_models_interval_coverage(fitted) -> None:
    """Every forecaster row has its 80 % interval's holdout coverage; the saved combination's
    is made to hold 80 % of the windows its width was fit on."""
    model, _, _ = fitted
    frame = model.leaderboard()
    assert {"val_coverage_80", "holdout_coverage_80"} <= set(frame.columns)
    held = frame.set_index("model")["holdout_coverage_80"]
    assert held.notna().all() and ((held >= 0) & (held <= 1)).all(), frame.to_string()
    assert "holdout_coverage_80" in str(model)


@pytest.fixture
def broken_statsforecast(monkeypatch):
    """statsforecast present but failing on import (as with one of its own dependencies
    missing): `import statsforecast.models` raises."""
    import sys

    classical.statsforecast_missing.cache_clear()
    monkeypatch.setitem(sys.modules, "statsforecast.models", None)
    yield
    classical.statsforecast_missing.cache_clear()


def test_a_broken_statsforecast_is_named_never_replaced_by_seasonal_naive(
    broken_statsforecast, tmp_path
) -> None:
    """Every failed local fit keeps the seasonal-naive forecast; an AutoETS that cannot be
    imported must not pass for one: a saved model's forecast refuses, naming the fix, and a
    fit's leaderboard says why AutoETS / AutoTheta are missing (seasonal naive still runs)."""
    from sgem.errors import SgemUserError

    histories = [np.linspace(1, 20, 20)]
    with pytest.raises(SgemUserError, match=r"^AutoETS needs statsforecast, which cannot be "):
        ClassicalMember("AutoETS").forecast(histories, 3, 1)
    assert np.isfinite(ClassicalMember("SeasonalNaive").forecast(histories, 3, 1)[0]).all()
    model = _fit_with_length(tmp_path, "validation", final_steps=1)
    rows = {r["model"]: r for r in model.result["leaderboard"]["rows"]}
    for name in ("AutoETS", "AutoTheta"):
        assert "skipped: statsforecast cannot be imported" in rows[name].get("note", "")
        assert "pip install --force-reinstall statsforecast" in rows[name]["note"]
    assert "seasonal naive" in rows and "holdout" in rows["seasonal naive"]
    mix = model.combination
    assert mix is None or not {"AutoETS", "AutoTheta"} & set(mix.names)


def test_the_leaderboard_says_what_a_forecast_s_classical_refits_will_cost(fitted) -> None:
    """A saved combination refits AutoETS / AutoTheta on every series at forecast time (3000
    long daily series: over 20 minutes on two cores, after a 2-minute fit): the leaderboard
    gives each saved member's expected seconds, timed while fitting, and `sgem fit` prints
    them with the forecast budget (none without a time budget)."""
    model, _, _ = fitted
    entry = model.result["leaderboard"]["forecast"]
    costly = {n for n in model.combination.names if n in ("AutoETS", "AutoTheta")}
    assert costly and set(entry["expected_seconds"]) == costly, entry
    assert all(v >= 0 for v in entry["expected_seconds"].values())
    assert entry["allowance_seconds"] is None and entry["left_out"] == {}
    text = str(model)
    assert "refitted per series at forecast time: " in text and "; no limit;" in text


def test_members_beyond_the_forecast_budget_are_left_out_of_the_combination(tmp_path) -> None:
    """With a forecast budget no refit fits in, the saved combination holds no AutoETS /
    AutoTheta (seasonal naive and the MoE still may), the leaderboard still scores them, and
    says which were left out and how to keep them."""
    search = {**TINY["search"], "train": {"steps": 1, "batch_size": 32}, "final_steps": 1}
    config = {**TINY, "search": search, "task": {"n_windows": 600, "n_clusters": 3}}
    model = fit_trends(tmp_path / "run", config, forecast_budget=1e-6)
    lb = model.result["leaderboard"]
    rows = {r["model"]: r for r in lb["rows"]}
    assert {"AutoETS", "AutoTheta"} <= set(rows) and "holdout" in rows["AutoETS"]
    assert set(lb["forecast"]["left_out"]) == {"AutoETS", "AutoTheta"}, lb["forecast"]
    assert lb["forecast"]["allowance_seconds"] == 1e-6
    mix = model.combination
    assert mix is None or not {"AutoETS", "AutoTheta"} & set(mix.names)
    assert "left out of the combination to keep the forecast within its budget" in str(model)


def test_the_costliest_refitted_members_are_left_out_first() -> None:
    from sgem.leaderboard.forecast_cost import FORECAST_SECONDS, within_allowance
    from sgem.methods.result import MethodResult

    def member(name: str, seconds: float | None) -> MethodResult:
        extra = {} if seconds is None else {FORECAST_SECONDS: seconds}
        return MethodResult(name, 0, kind="classical", extra=extra)

    refs = [member("AutoETS", 400.0), member("AutoTheta", 50.0), member("seasonal naive", None)]
    names = lambda kept: [m.method for m in kept]  # noqa: E731
    kept, out = within_allowance(refs, 300.0)
    assert names(kept) == ["AutoTheta", "seasonal naive"] and out == {"AutoETS": 400.0}
    assert within_allowance(refs, None) == (refs, {})
    assert within_allowance(refs, 450.0) == (refs, {})
    kept, out = within_allowance(refs, 10.0)
    assert names(kept) == ["seasonal naive"] and set(out) == {"AutoETS", "AutoTheta"}


def test_a_forecast_s_seconds_come_from_the_fits_not_the_wall_clock() -> None:
    """The expected forecast seconds scale the mean local fit (after the first, which pays
    start-up once) to every series on the forecast's processes: 36 fits of 10 ms after a
    2-second first one say about 2 s + 6000 x 10 ms over the cores, not 6000 / 36 x the
    leaderboard's clock (most of which started worker processes)."""
    from sgem.leaderboard.forecast_cost import expected_seconds
    from sgem.moe.classical_pool import pool_workers, pooled_seconds

    fits = [2.0] + [0.01] * 35
    expected = 1.99 + pooled_seconds(60.0, pool_workers(6000))
    assert expected_seconds(fits, 6000) == pytest.approx(expected)
    assert expected_seconds(fits, 6000) < 60.0 / 2 + 10
    assert expected_seconds([0.5], 10) == pytest.approx(5.0)  # (one fit: it is the rate)
    assert expected_seconds([], 10) == 0.0
    member = ClassicalMember("AutoTheta")
    member.forecast([np.linspace(1, 30, 30) + np.sin(np.arange(30))] * 3, 2, 1)
    assert len(member.fit_seconds) == 3 and all(t > 0 for t in member.fit_seconds)
