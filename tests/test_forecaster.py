"""`SgemForecaster` (DataFrame in, DataFrame out) and `Forecast.to_frame`'s ds column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_series_gaps import TINY

import sgem
from sgem.errors import SgemUserError
from sgem.moe.model import Forecast


def monthly_frame() -> pd.DataFrame:
    """Six monthly series of different levels; one short (10 months) and one with a gap."""
    rng = np.random.default_rng(2)
    rows = []
    for i in range(6):
        n = 10 if i == 5 else 80 + 6 * i
        ds = pd.date_range("2015-01-01", periods=n, freq="MS")
        y = (1 + i) * (20 + 3 * np.sin(np.arange(n) * 2 * np.pi / 12)) + rng.normal(0, 0.3, n)
        rows.append(pd.DataFrame({"unique_id": f"m{i}", "ds": ds, "y": y}))
    frame = pd.concat(rows, ignore_index=True)
    frame.loc[30, "y"] = np.nan
    return frame


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> sgem.SgemForecaster:
    out = tmp_path_factory.mktemp("forecaster")
    config = {**TINY, "task": {"n_clusters": 3}}
    return sgem.SgemForecaster(h=6, out=out, config=config, quantiles=(0.1, 0.5, 0.9)).fit(
        monthly_frame()
    )


def test_fit_predict_round_trip_with_dates(fitted) -> None:
    preds = fitted.predict(level=[80])
    assert list(preds.columns) == [
        "unique_id",
        "ds",
        "SGEM",
        "SGEM-q-10",
        "SGEM-q-50",
        "SGEM-q-90",
        "SGEM-lo-80",
        "SGEM-hi-80",
    ]
    assert len(preds) == 6 * 6 and sorted(preds["unique_id"].unique()) == [
        f"m{i}" for i in range(6)
    ]
    assert pd.api.types.is_datetime64_any_dtype(preds["ds"])
    m0 = preds[preds["unique_id"] == "m0"]  # 80 months from 2015-01: next is 2021-09
    assert m0["ds"].tolist() == list(pd.date_range("2021-09-01", periods=6, freq="MS"))
    short = preds[preds["unique_id"] == "m5"]  # 10 months, shorter than the context
    assert short["ds"].iloc[0] == pd.Timestamp("2015-11-01") and np.isfinite(short["SGEM"]).all()
    np.testing.assert_allclose(preds["SGEM-lo-80"], preds["SGEM-q-10"], rtol=1e-9)
    np.testing.assert_allclose(preds["SGEM"], preds["SGEM-q-50"], rtol=1e-9)
    assert (preds["SGEM-q-10"] <= preds["SGEM"]).all() and (
        preds["SGEM"] <= preds["SGEM-q-90"]
    ).all()
    level = preds.groupby("unique_id")["SGEM"].mean()
    assert 3 < level["m4"] / level["m0"] < 8  # each series in its own units (m4 is 5x m0)


def test_predict_fewer_steps_and_new_histories_with_integer_times(fitted) -> None:
    frame = monthly_frame()
    frame = frame[frame["unique_id"] == "m1"].assign(ds=lambda f: np.arange(len(f)) * 2 + 100)
    preds = fitted.predict(h=3, df=frame, quantiles=[0.25])
    assert list(preds.columns) == ["unique_id", "ds", "SGEM", "SGEM-q-25"]
    last = 100 + 2 * (len(frame) - 1)
    assert preds["ds"].tolist() == [last + 2, last + 4, last + 6]
    # integer ids come back as integers (a user's merge on unique_id must work)
    numbered = frame.assign(unique_id=7)
    preds = fitted.predict(h=3, df=numbered)
    assert preds["unique_id"].tolist() == [7, 7, 7] and preds["unique_id"].dtype.kind == "i"
    with pytest.warns(UserWarning, match=r"levels are percentages.*level=\[80\]"):
        fitted.predict(h=3, df=numbered, level=[0.8])


def test_forecaster_errors_name_their_fix(fitted, tmp_path) -> None:
    with pytest.raises(
        SgemUserError, match=r"forecasts 1 to 6 steps; fit with SgemForecaster\(h=9\)"
    ):
        fitted.predict(h=9)
    with pytest.raises(SgemUserError, match=r"columns \['y'\] not found.*target_col="):
        fitted.predict(df=monthly_frame().rename(columns={"y": "sales"}))
    with pytest.raises(SgemUserError, match="level=100: a level is a percentage"):
        fitted.predict(level=[100])
    with pytest.raises(
        SgemUserError, match=r"1 missing values in 1 of 6 series .*--missing impute"
    ):
        sgem.SgemForecaster(h=6, out=tmp_path / "e", config=TINY, missing="error").fit(
            monthly_frame()
        )
    with pytest.raises(SgemUserError, match="call fit"):
        sgem.SgemForecaster(h=3).predict()
    with pytest.raises(SgemUserError, match="other data"):
        sgem.SgemForecaster(h=6, out=fitted.out, config=TINY).fit(monthly_frame().head(200))


def test_forecast_to_frame_dates_when_known_else_steps() -> None:
    loc = np.arange(6.0).reshape(2, 3)
    fc = Forecast(
        loc, np.ones_like(loc), np.full_like(loc, 5.0), {0.5: loc}, np.zeros(2), np.zeros(2)
    )
    plain = fc.to_frame(ids=["a", "b"])
    assert plain["ds"].tolist() == [1, 2, 3, 1, 2, 3] == plain["step"].tolist()
    dates = np.stack([pd.date_range(s, periods=3, freq="D") for s in ("2020-01-01", "2021-01-01")])
    framed = fc.to_frame(ids=["a", "b"], ds=dates)
    assert framed["ds"].iloc[3] == pd.Timestamp("2021-01-01") and list(framed.columns[:3]) == [
        "unique_id",
        "ds",
        "step",
    ]
    with pytest.raises(SgemUserError, match="ds holds 3 times for 2 series x 3 steps"):
        fc.to_frame(ids=["a", "b"], ds=dates[0])


def test_predict_refuses_series_of_another_frequency(fitted, tmp_path) -> None:
    """A monthly model given daily dates (day-first dates read month first, say) would
    date and season its forecasts wrongly."""
    from sgem.run.predict_io import predict_file

    frame = monthly_frame()
    frame.to_csv(tmp_path / "monthly.csv", index=False)
    assert len(predict_file(fitted.model_, tmp_path / "monthly.csv")) == 6 * 6
    daily = frame.assign(
        ds=lambda f: (
            pd.Timestamp("2020-01-01")
            + pd.to_timedelta(f.groupby("unique_id").cumcount(), unit="D")
        )
    )
    daily.to_csv(tmp_path / "daily.csv", index=False)
    with pytest.raises(SgemUserError, match=r"frequency 'D', but the model was fitted on 'MS'"):
        predict_file(fitted.model_, tmp_path / "daily.csv")


def test_a_loaded_forecaster_predicts_a_long_format_frame(fitted, tmp_path) -> None:
    """`sgem.load(run).predict(df)` on the user's long-format frame gives the rows
    `sgem predict` writes for the same data as a file; `forecast(df)` says where to go."""
    from sgem.run.predict_io import predict_file

    frame = monthly_frame()
    frame.to_csv(tmp_path / "monthly.csv", index=False)
    model = sgem.load(fitted.out)
    from_frame = model.predict(frame)
    from_file = predict_file(model, tmp_path / "monthly.csv")
    pd.testing.assert_frame_equal(from_frame, from_file)
    assert len(from_frame) == 6 * 6 and {"q0.1", "q0.9", "expert"} <= set(from_frame.columns)
    with pytest.raises(SgemUserError, match=r"use model.predict\(df\)"):
        model.forecast(frame)
    with pytest.raises(SgemUserError, match="the DataFrame: columns \\['y'\\] not found"):
        model.predict(frame.rename(columns={"y": "value"}))


def test_season_length_reaches_the_fit_as_its_season(monkeypatch, tmp_path) -> None:
    """statsforecast's `season_length` is `sgem fit --season`: what the classical members
    model and MASE scales by where the dates do not say it."""
    import sgem.run.fitting as fitting

    asked: dict = {}
    monkeypatch.setattr(fitting, "fit", lambda frame, **kwargs: asked.update(kwargs))
    sgem.SgemForecaster(h=6, out=tmp_path, season_length=1).fit(monthly_frame())
    assert asked["season"] == 1 and asked["horizon"] == 6
