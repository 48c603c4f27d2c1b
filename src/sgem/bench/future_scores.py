"""Forecasts scored against a held-out future, as forecasting competitions score them: the
saved sgem model's and statsforecast's AutoETS / AutoTheta's on the same training series
(`benchmarks/competition.py`, `benchmarks/single_series.py`)."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: the quantile levels scored (the wQL's)
QUANTILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def scores(train: pd.DataFrame, test: pd.DataFrame, fc: pd.DataFrame, season: int) -> dict:
    """MASE, sMAPE, wQL and 80 % coverage of `fc` (unique_id, ds, point, q0.1 ...): MASE
    by utilsforecast (in-sample seasonal naive scale), wQL as GluonTS and AutoGluon define
    it (mean over the quantiles of 2 x the summed pinball loss / the summed |y|)."""
    from utilsforecast.losses import mase

    df = test.merge(fc, on=["unique_id", "ds"], how="inner")
    y = df["y"].to_numpy()
    point = df["point"].to_numpy()
    m = mase(df[["unique_id", "ds", "y", "point"]], ["point"], season, train)
    pinball = [
        2 * np.sum(np.maximum(q * (y - df[f"q{q:g}"]), (q - 1) * (y - df[f"q{q:g}"])))
        for q in QUANTILES
    ]
    return {
        "series_forecast": int(df["unique_id"].nunique()),
        "series": int(test["unique_id"].nunique()),
        "mase": float(m["point"].mean()),
        "smape": float(np.mean(200 * np.abs(y - point) / (np.abs(y) + np.abs(point) + 1e-12))),
        "wql": float(np.mean(pinball) / np.sum(np.abs(y))),
        "coverage_80": float(np.mean((y >= df["q0.1"]) & (y <= df["q0.9"]))),
    }


def new_record(seed: int, time_budget: float, **more) -> dict:
    """A future-scored benchmark's JSON record: when, at which commit, the seed, the budget
    of each sgem fit, the quantiles scored, `more`, and its (flat) rows."""
    from datetime import date

    from .machine import commit

    return {
        "date": date.today().isoformat(),
        "commit": commit() or "unknown",
        "seed": seed,
        "time_budget_s": time_budget,
        "quantiles": list(QUANTILES),
        **more,
        "rows": [],  # flat: one per series or file and method (RESULTS.md)
    }


def add_rows(record: dict, key: str, name: str, rows: dict[str, dict]) -> None:
    """Append one flat row per method of `rows` ({method: scores}) to `record["rows"]`,
    named by `key` = `name`, and print each method's scores."""
    for method, s in rows.items():
        record["rows"].append({key: name, "method": method, **s})
        seconds = s.get("seconds", s.get("fit_seconds"))
        print(
            f"  {method:13s} MASE {s['mase']:.3f}  sMAPE {s['smape']:.2f}  wQL {s['wql']:.4f}  "
            f"cov80 {s['coverage_80']:.3f}  series {s['series_forecast']}/{s['series']}"
            + (f"  {seconds:.1f} s" if seconds is not None else "")
        )


def sgem_forecast(
    train_path: Path,
    h: int,
    budget: float,
    seed: int,
    run: Path,
    season: int | None = None,
    **options,
) -> tuple:
    """(forecast frame, fit seconds, predict seconds, what was saved) of `sgem.fit` on
    `train_path` with a time budget (and `season`, as `sgem fit --season`; None: from the
    dates; `options`: more of `sgem.fit`'s), predicting the next `h` points of every series."""
    import sgem
    from sgem.run.predict_io import predict_file

    start = time.perf_counter()
    model = sgem.fit(
        train_path,
        horizon=h,
        time_budget=budget,
        seed=seed,
        out=run,
        progress=False,
        season=season,
        **options,
    )
    fit_seconds = time.perf_counter() - start
    frame = predict_file(model, train_path, quantiles=QUANTILES)
    frame = frame.rename(columns={"forecast": "point"})
    frame["ds"] = pd.to_datetime(frame["ds"])
    shipped = ((model.result or {}).get("leaderboard") or {}).get("shipped", {}).get("model")
    return frame, fit_seconds, time.perf_counter() - start - fit_seconds, shipped


def classical_forecasts(
    train: pd.DataFrame,
    h: int,
    season: int,
    freq: str,
    names: tuple[str, ...] = ("AutoETS", "AutoTheta"),
) -> dict:
    """{name: (forecast frame, seconds)} of statsforecast's models `names` (AutoETS,
    AutoTheta, SeasonalNaive) fitted on every whole training series (missing values
    carried forward: statsforecast refuses them), statsforecast's naive forecast where a
    model cannot fit a series (AutoETS refuses series of 3 points: "tiny datasets")."""
    from statsforecast import StatsForecast, models

    filled = train.groupby("unique_id")["y"].ffill()
    train = train.assign(y=filled.groupby(train["unique_id"]).bfill())
    levels = sorted({round(100 * abs(1 - 2 * q)) for q in QUANTILES if q != 0.5})
    out = {}
    for name in names:
        model = getattr(models, name)(season_length=season)
        start = time.perf_counter()
        fc = StatsForecast(
            models=[model], freq=freq, n_jobs=1, fallback_model=models.Naive()
        ).forecast(df=train, h=h, level=levels)
        seconds = time.perf_counter() - start
        frame = fc.reset_index() if "unique_id" not in fc.columns else fc
        frame = frame.rename(columns={name: "point"})
        for q in QUANTILES:
            level = round(100 * abs(1 - 2 * q))
            col = "point" if q == 0.5 else f"{name}-{'lo' if q < 0.5 else 'hi'}-{level}"
            frame[f"q{q:g}"] = frame[col]
        out[name] = (frame, seconds)
    return out


def method_rows(
    train: pd.DataFrame, test: pd.DataFrame, h: int, season: int, freq: str, fc, **sgem
) -> dict[str, dict]:
    """{method: scores on `test`}: sgem's forecast `fc` (its row also gets `sgem`'s items:
    seconds, what was saved) beside AutoETS / AutoTheta fitted on `train`."""
    rows = {"sgem": scores(train, test, fc, season) | sgem}
    for ref, (frame, seconds) in classical_forecasts(train, h, season, freq).items():
        rows[ref] = scores(train, test, frame, season) | {"seconds": seconds}
    return rows


#: the tourism collections made from the shared monthly file: (pandas period, horizon as
#: the tourism competition's track of that frequency had it)
TOURISM = {"tourism": ("MS", 24), "tourism_quarterly": ("QS", 8), "tourism_yearly": ("YS", 4)}


def competition_folder(name: str, data: Path, scratch: Path) -> Path:
    """The folder holding `m3_{name}_train.csv` and `m3_{name}_test.csv`: `data` (the shared
    competition files); for `tourism`, `scratch`, where the shared tourism_monthly.tsf beside
    `data` is split as the tourism competition's monthly track did: the last 24 points of
    every series are the test. `tourism_quarterly` / `tourism_yearly`: its series summed
    over whole quarters / calendar years (7-27 years, 30-111 quarters), their last 8 / 4
    points the test, as that competition's quarterly and yearly tracks held out (a stand-in
    for those collections: other series of the same kind, no choice in sgem made on them)."""
    if name == "macro":
        return _macro_folder(scratch)
    if name not in TOURISM:
        return data
    from ..data.tsf_reader import read_tsf

    freq, h = TOURISM[name]
    tourism = read_tsf(data.parent / "timeseries" / "tourism_monthly.tsf")
    frames = []
    for series, attrs, values in zip(
        tourism.names(), tourism.attributes, tourism.series, strict=True
    ):
        ds = pd.date_range(attrs["start_timestamp"], periods=len(values), freq="MS")
        y = pd.Series(np.asarray(values, dtype=float), index=ds)
        if freq != "MS":  # whole periods only: the first and last may be partial
            y = y.resample(freq).sum(min_count=12 if freq == "YS" else 3).dropna()
        frames.append(pd.DataFrame({"unique_id": series, "ds": y.index, "y": y.to_numpy()}))
    return _split_at_end(pd.concat(frames), h, name, scratch)


def _split_at_end(long: pd.DataFrame, h: int, name: str, scratch: Path) -> Path:
    """`scratch`, where `long`'s series are written as `m3_{name}_train.csv` and, their last
    `h` points, `m3_{name}_test.csv`."""
    last = long.groupby("unique_id").cumcount(ascending=False) < h
    scratch.mkdir(parents=True, exist_ok=True)
    long[~last].to_csv(scratch / f"m3_{name}_train.csv", index=False)
    long[last].to_csv(scratch / f"m3_{name}_test.csv", index=False)
    return scratch


def _macro_folder(scratch: Path) -> Path:
    """statsmodels' bundled US macro data (12 quarterly series, 1959-2009) in long format,
    the last 8 quarters of each the test (2007Q4-2009Q3): public series no choice in sgem
    was made on, whose future is a recession."""
    import statsmodels.api as sm

    d = sm.datasets.macrodata.load_pandas().data
    ds = pd.PeriodIndex.from_fields(
        year=d["year"].astype(int), quarter=d["quarter"].astype(int), freq="Q"
    ).to_timestamp()
    names = [c for c in d.columns if c not in ("year", "quarter")]
    long = pd.concat(
        pd.DataFrame({"unique_id": c, "ds": ds, "y": d[c].to_numpy(float)}) for c in names
    )
    return _split_at_end(long, 8, "macro", scratch)


#: each competition file's seasonal period as its data's README gives it (M3's "other"
#: series carry quarterly dates but no season); a file not named here: its dates' period
SEASONS = {"yearly": 1, "quarterly": 4, "other": 1, "tourism": 12, "tourism_quarterly": 4,
           "tourism_yearly": 1}  # fmt: skip


@dataclass
class CompetitionFile:
    """One competition file's training and test frames, read as the scripts score them."""

    name: str
    train_path: Path
    train: pd.DataFrame
    test: pd.DataFrame
    horizon: int
    freq: str | None
    season: int


def competition_file(name: str, data: Path, scratch: Path) -> CompetitionFile:
    """`m3_{name}_train.csv` / `_test.csv` (`competition_folder`), the horizon (the longest
    test), the frequency pandas infers from the first series and the file's seasonal period
    (`SEASONS`, else the frequency's)."""
    from ..forecast import seasonality

    folder = competition_folder(name, data, scratch)
    train_path = folder / f"m3_{name}_train.csv"
    train = pd.read_csv(train_path, parse_dates=["ds"])
    test = pd.read_csv(folder / f"m3_{name}_test.csv", parse_dates=["ds"])
    first = train[train["unique_id"] == train["unique_id"].iloc[0]]["ds"]
    freq = pd.infer_freq(first)
    horizon = int(test.groupby("unique_id").size().max())
    season = SEASONS.get(name) or seasonality(freq)
    return CompetitionFile(name, train_path, train, test, horizon, freq, season)


def competition_arguments(doc: str, data: Path, budget: float, out: str) -> argparse.Namespace:
    """The competition scripts' arguments: --files, --data (default `data`: the shared
    competition files), --time-budget (seconds per sgem fit), --seed and --out."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--files", nargs="+", default=["yearly", "quarterly", "other", "tourism"])
    p.add_argument("--data", type=Path, default=data)
    p.add_argument("--time-budget", type=float, default=budget, help="seconds per sgem fit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path(out))
    return p.parse_args()


__all__ = [
    "QUANTILES",
    "CompetitionFile",
    "add_rows",
    "classical_forecasts",
    "competition_arguments",
    "competition_file",
    "competition_folder",
    "method_rows",
    "new_record",
    "scores",
    "sgem_forecast",
]
