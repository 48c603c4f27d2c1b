"""Series with gaps, short series and many series: filled, padded, never left out, and every
refusal names the flag that fixes it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import TINY_SEARCH
from hypothesis import given, settings
from hypothesis import strategies as st

import sgem
from sgem.cli import main
from sgem.data.files import check_series_lengths, read_long_series
from sgem.data.files_series import data_context, default_context
from sgem.data.series_gaps import fill_gaps, fill_series
from sgem.data.series_plan import plan_series
from sgem.data.ts_windows import make_windows
from sgem.data.user_tasks import series_task
from sgem.errors import SgemUserError
from sgem.moe.preprocess import ForecastPreprocessor

#: a seconds-long forecasting fit (the keys of tests/test_fit.py's TINY)
TINY = {
    "search": {**TINY_SEARCH, "n_experts": 2, "train": {"steps": 10, "batch_size": 32}},
    "task": {"n_windows": 300, "n_clusters": 4},
    "space": {"channels": 4, "n_nodes": 2},
    "crps_samples": 10,
}


def gappy_frame() -> pd.DataFrame:
    """Daily series (horizon 7, context 28): five long ones, one with empty values and
    absent days, one short (15 values), one with its last values empty."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(8):
        n = 15 if i == 6 else 120 + 10 * i
        ds = pd.date_range("2021-01-01", periods=n, freq="D")
        y = (1 + i) * (10 + np.sin(np.arange(n) * 2 * np.pi / 7)) + rng.normal(0, 0.2, n)
        frame = pd.DataFrame({"unique_id": f"s{i}", "ds": ds, "y": y})
        if i == 5:
            frame.loc[[20, 21, 60], "y"] = np.nan  # empty values
            frame = frame.drop(index=[40, 41, 42])  # absent days
        if i == 7:
            frame.loc[frame.index[-2:], "y"] = np.nan  # the last two empty
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


@pytest.fixture(scope="module")
def gappy_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gaps") / "series.csv"
    gappy_frame().to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def gappy_run(gappy_csv) -> Path:
    out = gappy_csv.parent / "run"
    sgem.fit(gappy_csv, horizon=7, out=out, progress=False, config=TINY, seed=0)
    return out


# -- filling -------------------------------------------------------------------------------


def test_fill_gaps_interpolates_inside_and_takes_the_nearest_value_at_the_ends() -> None:
    values, observed = fill_gaps(np.array([np.nan, 2.0, np.nan, np.nan, 5.0, np.nan]))
    np.testing.assert_allclose(values, [2.0, 2.0, 3.0, 4.0, 5.0, 5.0])
    assert observed.tolist() == [False, True, False, False, True, False]
    empty, seen = fill_gaps(np.full(3, np.nan))
    assert np.isnan(empty).all() and not seen.any()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(-1e6, 1e6), st.just(float("nan"))), min_size=1, max_size=40
    ).filter(lambda v: any(x == x for x in v))
)
def test_filled_values_stay_between_their_observed_neighbours(raw) -> None:
    raw = np.asarray(raw)
    values, observed = fill_gaps(raw)
    assert np.isfinite(values).all() and (observed == np.isfinite(raw)).all()
    np.testing.assert_array_equal(values[observed], raw[observed])
    known = np.flatnonzero(observed)
    for i in np.flatnonzero(~observed):
        left, right = known[known < i], known[known > i]
        near = [raw[left[-1]]] if len(left) else []
        near += [raw[right[0]]] if len(right) else []
        assert min(near) - 1e-6 <= values[i] <= max(near) + 1e-6


def test_windows_never_score_a_filled_value_and_the_level_skips_it() -> None:
    raw = np.arange(1.0, 61.0)
    raw[[10, 30, 31]] = np.nan
    values, observed = fill_gaps(raw)
    w = make_windows({"d": [values]}, 8, 4, n_windows=30, seed=0, observed={"d": [observed]})
    for start in w.start:
        assert observed[start + 8 : start + 12].all()  # the target: observed only
    assert w.filled is not None and w.filled.max() >= 1  # contexts may hold filled values
    counted = [(~observed[s : s + 8]).sum() for s in w.start]
    assert w.filled.tolist() == counted


def test_the_series_level_behind_the_scale_floor_skips_filled_values() -> None:
    values = np.r_[np.full(10, 1000.0), np.full(10, 0.001), np.ones(4)]
    observed = np.r_[np.zeros(10, bool), np.ones(14, bool)]
    masked = make_windows({"d": [values]}, 10, 4, n_windows=11, observed={"d": [observed]})
    plain = make_windows({"d": [values]}, 10, 4, n_windows=11)
    last = masked.start == 10  # a context of 0.001s after ten filled 1000s
    assert masked.scale[last][0] == pytest.approx(0.001)  # floor: 0.2 x observed level 0.001
    assert plain.scale[plain.start == 10][0] == pytest.approx(0.2 * 500.0005)


def test_scaling_is_robust_to_zero_and_negative_series() -> None:
    zero = np.zeros(40)
    negative = -1000.0 + np.sin(np.arange(40.0))
    w = make_windows({"d": [zero, negative]}, 8, 4, n_windows=40, seed=0)
    assert np.isfinite(w.context).all() and np.isfinite(w.target).all()
    assert (w.scale[w.series == 0] == 1.0).all()  # no level: raw units
    neg = w.series == 1
    assert (w.scale[neg] > 900).all() and (w.context[neg] < -0.9).all()  # sign kept


def test_default_context_keeps_the_frequency_default_unless_most_series_are_short() -> None:
    assert data_context("MS", 18, [200, 300, 40]) == default_context("MS", 18) == 36
    assert data_context("MS", 18, [30, 40, 300]) == 40 - 18  # median 40 < 36 + 18
    assert data_context("YS", 6, [14, 19, 41]) == 12  # M3 yearly: median 19 >= 12 + 6
    assert data_context("YS", 4, [7, 8, 43]) == 4
    assert data_context(None, 6, [5, 5, 5]) == 2  # never below 2


# -- the task: nothing left out --------------------------------------------------------------


def test_a_file_with_gaps_and_a_short_series_leaves_no_series_out(gappy_csv) -> None:
    task = series_task({"path": str(gappy_csv), "horizon": 7}, seed=0)
    report = task.meta["series_report"]
    assert task.meta["context"] == 28 and task.meta["missing"] == "impute"
    assert report["series_short_padded"] == 1 and report["series_left_out"] == []
    assert report["series_with_gaps"] == 2 and report["values_filled"] == 3 + 3 + 2
    assert report["series_trained"] == 8 == len(np.unique(task.meta["windows"]["train"].series))
    # no target of any split holds a filled value: s7's last two are never a target
    data = read_long_series(gappy_csv)
    plan = plan_series(data, {"horizon": 7})
    for part in task.meta["windows"].values():
        for j, start in zip(part.series, part.start, strict=True):
            assert plan.observed[j][start + 28 : start + 35].all()


def test_the_default_context_trains_on_every_series_of_many_short_ones(tmp_path) -> None:
    rng = np.random.default_rng(1)
    lengths = rng.integers(7, 44, 150)  # a yearly collection: 7-43 values, h = 4
    rows = [
        pd.DataFrame(
            {
                "unique_id": f"y{i}",
                "ds": pd.date_range("1980-01-01", periods=n, freq="YS"),
                "y": 100 + np.cumsum(rng.normal(1, 3, n)),
            }
        )
        for i, n in enumerate(lengths)
    ]
    path = tmp_path / "yearly.csv"
    pd.concat(rows).to_csv(path, index=False)
    task = series_task({"path": str(path), "horizon": 4}, seed=0)
    assert task.meta["series_report"]["series_trained"] == 150
    assert task.meta["series_report"]["series_short_padded"] > 0


def test_a_given_season_overrides_the_frequencys_for_members_and_mase(tmp_path) -> None:
    """M3's "other" series carry quarterly dates but no season: --season 1 is what the
    classical members model and what MASE scales by; left out, the dates' 4 is."""
    from sgem.moe.classical import season_of

    rng = np.random.default_rng(2)
    rows = [
        pd.DataFrame(
            {
                "unique_id": f"o{i}",
                "ds": pd.date_range("1990-01-01", periods=70, freq="QS"),
                "y": 100 + np.cumsum(rng.normal(0.5, 2, 70)),
            }
        )
        for i in range(8)
    ]
    path = tmp_path / "other.csv"
    pd.concat(rows).to_csv(path, index=False)
    dated = series_task({"path": str(path), "horizon": 8}, seed=0)
    given = series_task({"path": str(path), "horizon": 8, "season": 1}, seed=0)
    assert (season_of(dated.meta), dated.meta["seasonality"]) == (4, [4])
    assert (season_of(given.meta), given.meta["seasonality"]) == (1, [1])
    assert given.meta["freq"] == dated.meta["freq"]  # (the dates still date the forecasts)


def test_season_is_refused_for_data_that_is_not_series(tmp_path) -> None:
    from sgem.run.fit_setup import fit_config

    table = tmp_path / "t.csv"
    pd.DataFrame({"a": [1.0, 2.0, 3.0], "y": [0, 1, 0]}).to_csv(table, index=False)
    with pytest.raises(SgemUserError, match=r"^--season is for series; this is tabular data"):
        fit_config(table, target="y", kind="tabular", season=1)
    with pytest.raises(SgemUserError, match=r"^--forecast-budget is for series; this is tab"):
        fit_config(table, target="y", kind="tabular", forecast_budget="5m")
    from sgem.cli import _parser

    series = _csv(tmp_path, [60, 60])
    args = _parser().parse_args(["fit", str(series), "--season", "7"])
    assert fit_config(series, season=args.season)["task"]["season"] == 7  # (alone: series)
    args = _parser().parse_args(["fit", str(series), "--forecast-budget", "5m"])
    assert fit_config(series, forecast_budget=args.forecast_budget)["forecast_budget"] == 300.0
    assert fit_config(series, forecast_budget="none")["forecast_budget"] == float("inf")
    assert "forecast_budget" not in fit_config(series, time_budget="5m")  # (no limit)


# -- refusals that name their fix ----------------------------------------------------------


def _csv(tmp_path: Path, lengths: list[int], gap: bool = False) -> Path:
    rows = []
    for i, n in enumerate(lengths):
        y = np.linspace(1.0, 2.0, n)
        if gap:
            y[n // 2] = np.nan
        ds = pd.date_range("2020-01-01", periods=n, freq="D")
        rows.append(pd.DataFrame({"unique_id": f"s{i}", "ds": ds, "y": y}))
    path = tmp_path / "s.csv"
    pd.concat(rows).to_csv(path, index=False)
    return path


def test_missing_error_refuses_gaps_and_names_the_flag(tmp_path) -> None:
    path = _csv(tmp_path, [60, 60], gap=True)
    with pytest.raises(
        SgemUserError,
        match=r"^2 missing values in 2 of 2 series \(the first in series 's0' at step 30 of 60\);"
        r" let sgem fill them \(--missing impute, the default\)",
    ):
        series_task({"path": str(path), "horizon": 3, "missing": "error"}, seed=0)
    with pytest.raises(SgemUserError, match=r"missing='drop'.*--missing impute"):
        fill_series({"a": np.ones(3)}, "drop")


def test_a_horizon_longer_than_every_series_names_a_horizon_that_fits(tmp_path) -> None:
    path = _csv(tmp_path, [5, 8])
    with pytest.raises(
        SgemUserError,
        match=r"^2 of 2 series have at most 8 values, no more than the horizon \(the shortest, "
        r"'s0', has 5\).*; use --horizon 4 or less",
    ):
        series_task({"path": str(path), "horizon": 8}, seed=0)


def test_a_context_longer_than_every_series_names_one_that_reads_them(tmp_path, caplog) -> None:
    path = _csv(tmp_path, [40, 60, 50])
    data = read_long_series(path)
    with caplog.at_level("WARNING", logger="sgem.data.series_plan"):
        plan_series(data, {"horizon": 6, "context": 500})
    assert "--context 500 is longer than every series allows" in caplog.text
    assert "--context 54 (the longest minus the horizon)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="sgem.data.series_plan"):
        plan_series(data, {"horizon": 6, "context": 54})  # fits the longest: no warning
    assert "longer than every series" not in caplog.text


def test_short_series_without_padding_name_a_context_that_fits() -> None:
    series = {"a": np.ones(50), "b": np.ones(12)}
    with pytest.raises(
        SgemUserError,
        match=r"^1 of 2 series are shorter than context \+ horizon = 20 \+ 8 = 28 \(the "
        r"shortest, 'b', has 12 values\); use a context of at most 4: --context 4",
    ):
        check_series_lengths(series, 20, 8)
    with pytest.raises(SgemUserError, match=r"use --horizon 10 or less"):
        check_series_lengths(series, 20, 11)


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"context": 1}, r"^context=1: it must be at least 2; use --context 2 or more$"),
        ({"horizon": 0}, r"^horizon=0: it must be at least 1; use --horizon 1 or more$"),
        ({"season": 0}, r"^season=0: it must be at least 1; use --season 1 or more$"),
        ({"n_clusters": 1}, r"^n_clusters=1: it must be at least 3; use --clusters 3 or more$"),
        (
            {"n_clusters": 500},
            r"^--clusters 500: k-means needs a training window per cluster, and the series give "
            r"224 of 320 windows for training; use --clusters 24 or fewer$",
        ),
        (
            {"n_windows": 10_000},
            r"^asked for 10000 windows but the series hold only 320 windows .* set n_windows to "
            r"at most 320 \(task section of --config\)$",
        ),
    ],
)
def test_each_bad_setting_names_its_flag_with_a_true_number(tmp_path, cfg, message) -> None:
    path = _csv(tmp_path, [60, 80, 100, 200])  # context 28, horizon 3: 320 windows
    with pytest.raises(SgemUserError, match=message):
        series_task({"path": str(path), "horizon": 3, **cfg}, seed=0)


def test_too_few_windows_names_a_horizon_and_its_window_count(tmp_path) -> None:
    path = _csv(tmp_path, [12, 12])
    with pytest.raises(
        SgemUserError,
        match=r"^8 windows with an observed 8-step target \(1 for validation\) are too few for 3 "
        r"clusters with a validation window each; use a shorter horizon \(--horizon 3 gives 18 "
        r"windows\), or give more or longer series$",
    ):
        series_task({"path": str(path), "horizon": 8}, seed=0)


# -- predict ---------------------------------------------------------------------------------


def test_a_file_with_gaps_fits_and_every_series_is_forecast(gappy_run, gappy_csv, capsys) -> None:
    model = sgem.load(gappy_run)
    state = model.preprocessor.state()[0]
    assert state["missing"] == "impute" and state["pad_short"] is True
    out = gappy_csv.parent / "fc.csv"
    assert main(["predict", str(gappy_run), str(gappy_csv), "--out", str(out)]) == 0
    assert "padded 1 of 8 series" in capsys.readouterr().out
    fc = pd.read_csv(out, parse_dates=["ds"])
    assert sorted(fc["unique_id"].unique()) == [f"s{i}" for i in range(8)]
    assert np.isfinite(fc[["forecast", "q0.1", "q0.9"]].to_numpy()).all()
    short = fc[fc["unique_id"] == "s6"]  # 15 values from 2021-01-01: the next day is the 16th
    assert short["ds"].tolist() == list(pd.date_range("2021-01-16", periods=7, freq="D"))
    # s7's last two values are empty: its forecast starts after them (its grid's end)
    assert fc[fc["unique_id"] == "s7"]["ds"].min() == pd.Timestamp("2021-01-01") + pd.Timedelta(
        days=190
    )


def test_one_value_per_series_is_dated_at_the_model_s_frequency(gappy_run) -> None:
    """One value gives no step to infer: the forecast is dated at the model's frequency
    (it was numbered 1..h)."""
    model = sgem.load(gappy_run)
    one = pd.DataFrame({"unique_id": ["a", "b"], "ds": ["2022-03-01"] * 2, "y": [5.0, 7.0]})
    fc = model.predict(one)
    days = list(pd.date_range("2022-03-02", periods=7, freq="D"))
    assert pd.to_datetime(fc[fc["unique_id"] == "a"]["ds"]).tolist() == days


def test_a_series_without_values_is_refused_by_name(gappy_run) -> None:
    model = sgem.load(gappy_run)
    with pytest.raises(SgemUserError, match=r"series 1 has no value .*; drop it"):
        model.forecast([np.ones(40), np.full(40, np.nan)])


def test_a_model_saved_before_gaps_were_filled_still_refuses_them(gappy_run, tmp_path) -> None:
    import shutil

    old = tmp_path / "old"
    shutil.copytree(gappy_run / "model", old)
    doc = json.loads((old / "model.json").read_text())
    for key in ("missing", "pad_short"):
        del doc["preprocessing"][key]
    (old / "model.json").write_text(json.dumps(doc))
    pre = sgem.load(old).preprocessor
    assert isinstance(pre, ForecastPreprocessor) and pre.missing == "error" and not pre.pad_short
    with pytest.raises(SgemUserError, match="has 10 values, but the model reads a context of 28"):
        pre.windows([np.ones(10)])
    with pytest.raises(SgemUserError, match="fill the gaps first"):
        pre.windows([np.r_[np.ones(40), np.nan]])


def _long(tmp_path, ds) -> str:
    n = len(ds)
    frame = pd.DataFrame({"unique_id": "a", "ds": ds, "y": np.arange(n, dtype=float)})
    frame.to_csv(tmp_path / "t.csv", index=False)
    return str(tmp_path / "t.csv")


def test_day_first_dates_are_read_day_first_where_that_is_the_denser_grid(tmp_path) -> None:
    """01/02/2012 ... read month first made a monthly file 1-12 January of every year,
    laid daily and 96 % filled in."""
    from sgem.data.files import read_long_series

    months = pd.date_range("2012-01-01", periods=48, freq="MS")
    data = read_long_series(_long(tmp_path, months.strftime("%d/%m/%Y")))
    assert data.freq == "MS" and len(data.series["a"]) == 48
    assert not np.isnan(data.series["a"]).any()
    # a day above 12 settles it either way; US order stays US order
    days = pd.date_range("2020-01-01", periods=40, freq="D")
    assert read_long_series(_long(tmp_path, days.strftime("%m/%d/%Y"))).freq == "D"
    assert read_long_series(_long(tmp_path, days.strftime("%d.%m.%Y"))).freq == "D"


def test_iso_dates_mixed_with_times_and_utc_offsets_are_read(tmp_path) -> None:
    from sgem.data.files import read_long_series

    mixed = ["2012-01-01", "2012-01-02 00:00:00", *[f"2012-01-{d:02d}" for d in range(3, 20)]]
    assert read_long_series(_long(tmp_path, mixed)).freq == "D"
    hours = pd.date_range("2021-03-27 20:00", periods=12, freq="h", tz="Europe/Berlin")
    data = read_long_series(_long(tmp_path, [t.isoformat() for t in hours]))  # DST change
    assert data.freq == "h" and not np.isnan(data.series["a"]).any()


def test_times_shared_by_series_are_read_once_and_alike() -> None:
    """Each distinct time is read once (series share them); the column reads as it does
    value by value: day-first order, UTC offsets, one bad value named."""
    from sgem.data.series_times import read_times
    from sgem.errors import SgemUserError

    months = pd.date_range("2012-01-01", periods=24, freq="MS")
    shared = pd.Series(list(months.strftime("%d/%m/%Y")) * 3)
    read = read_times(shared, "ds")
    assert len(read) == 72 and (read.to_numpy() == np.tile(months.to_numpy(), 3)).all()
    hours = pd.date_range("2021-03-27 20:00", periods=12, freq="h", tz="Europe/Berlin")
    utc = read_times(pd.Series([t.isoformat() for t in hours] * 2), "ds")
    assert (utc.to_numpy() == np.tile(hours.tz_convert(None).to_numpy(), 2)).all()
    with pytest.raises(SgemUserError, match="'soon'"):
        read_times(pd.Series(["2020-01-01", "soon", "2020-01-01"]), "ds")


def test_a_value_that_is_not_a_date_is_named(tmp_path) -> None:
    """The refusal shows a value that fails, not the first row (a valid date)."""
    from sgem.data.files import read_long_series
    from sgem.errors import SgemUserError

    ds = [f"2012-01-{d:02d}" for d in range(1, 20)]
    ds[5] = "not a date"
    with pytest.raises(SgemUserError, match=r"not dates \(e.g. 'not a date'\)"):
        read_long_series(_long(tmp_path, ds))


def test_trading_days_with_holidays_missing_are_business_days_not_daily(tmp_path) -> None:
    """A stock's closes: business days, a few holidays missing. They are on the daily grid
    too, which filled in every weekend (223 of 726 values) and forecast Saturdays; the
    business-day grid fills the holidays only. Daily data missing a few days (some at a
    weekend) stays daily."""
    from sgem.data.files import read_long_series

    days = pd.bdate_range("2022-01-03", "2023-12-29")
    holidays = days[np.random.default_rng(0).choice(len(days), 17, replace=False)]
    trading = days[~days.isin(holidays)]
    data = read_long_series(_long(tmp_path, trading.strftime("%Y-%m-%d")))
    assert data.freq == "B" and len(data.series["a"]) == len(days)
    assert int(np.isnan(data.series["a"]).sum()) == 17
    calendar = pd.date_range("2022-01-01", periods=300, freq="D")
    gappy = calendar[~calendar.isin(calendar[[10, 57, 120, 121, 200]])]  # (day 120: a Sunday)
    assert read_long_series(_long(tmp_path, gappy.strftime("%Y-%m-%d"))).freq == "D"


def test_a_value_written_as_a_missing_token_is_missing_and_other_text_is_refused(
    tmp_path,
) -> None:
    """FRED's CSVs write "." for a missing value: read as missing (as a table's numeric
    columns read "NA", "?", "-"); a word that is not a missing token is still refused."""
    from sgem.data.files import read_long_series

    path = tmp_path / "gdp.csv"
    quarters = pd.date_range("2020-01-01", periods=6, freq="QS")
    values = ["100.5", ".", "101.2", "NA", " - ", "103"]
    pd.DataFrame({"DATE": quarters, "GDP": values}).to_csv(path, index=False)
    data = read_long_series(path, id_col=None, time_col="DATE", value_col="GDP")
    assert np.isnan(data.series["0"]).tolist() == [False, True, False, True, True, False]
    values[4] = "high"
    pd.DataFrame({"DATE": quarters, "GDP": values}).to_csv(path, index=False)
    refused = r"^value column 'GDP' holds text in 1 rows \(rows 4, e.g. 'high'\); write numbers"
    with pytest.raises(SgemUserError, match=refused):
        read_long_series(path, id_col=None, time_col="DATE", value_col="GDP")
