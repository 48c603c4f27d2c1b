"""`sgem fit --time-budget B` on thousands of short monthly series (hundreds of long hourly
or weekly ones, tens of thousands of short yearly ones), beside AutoETS and AutoTheta: does
the budget hold at this scale, is every series forecast, and how long does forecasting take
(the combination refits AutoETS / AutoTheta on every series)?

The series are synthetic and seeded (no shared file has thousands). Monthly: a level between
10 and 10 000, a yearly season of random strength and phase, a small drift and a random walk
in log space; 40-150 months of history each. Hourly (`--frequency hourly`, the shape of a
competition's hourly collection): 652-912 hours each, a daily and a weekly season, noise of
2-15 % of the level, a level shift in a third of the series. Weekly (`--frequency weekly`):
80-400 weeks each, a random walk with drift in log space and, in half of them, a yearly
cycle. Yearly (`--frequency yearly`): 13-59 years each, a random walk with drift. The
next `--horizon` points are held out as the future. Scored as competition.py
scores (MASE at the season, wQL, 80 % coverage). `--tsf FILE` scores a real collection
instead: every series of a Monash file (the shared daily weather and hourly air-quality
ones), its `@horizon` held out, gaps left for each method to fill as it does.

    python benchmarks/many_series.py --series 3000 --time-budget 120
    python benchmarks/many_series.py --frequency hourly --series 400 --horizon 48 \
        --time-budget 300 --out benchmarks/results/many_series_hourly.json
    python benchmarks/many_series.py --frequency weekly --series 300 --horizon 13 \
        --time-budget 300 --out benchmarks/results/many_series_weekly.json
    python benchmarks/many_series.py --frequency yearly --series 20000 --horizon 6 \
        --time-budget 300 --out benchmarks/results/many_series_yearly.json
    python benchmarks/many_series.py --tsf ../shared/data/timeseries/weather_australia_daily.tsf \
        --time-budget 300 --out benchmarks/results/many_series_weather.json
    python benchmarks/many_series.py --length 4000 --time-budget 300 \
        --tsf ../shared/data/timeseries/air_quality_beijing_hourly.tsf \
        --out benchmarks/results/many_series_air_quality.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sgem.bench.future_scores import add_rows, method_rows, new_record, sgem_forecast

RESULTS = Path(__file__).resolve().parent / "results"


def monthly(rng: np.random.Generator, horizon: int) -> tuple[np.ndarray, pd.DatetimeIndex]:
    """One monthly series: a yearly season, a small drift, a random walk in log space."""
    length = int(rng.integers(40, 151)) + horizon
    t = np.arange(length)
    season = rng.uniform(0, 0.3) * np.sin(2 * np.pi * t / 12 + rng.uniform(0, 2 * np.pi))
    walk = np.cumsum(rng.normal(0, rng.uniform(0.01, 0.05), length))
    y = 10 ** rng.uniform(1, 4) * np.exp(rng.normal(0, 0.01) * t + season + walk)
    return y, pd.date_range("2000-01-01", periods=length, freq="MS")


def hourly(rng: np.random.Generator, horizon: int) -> tuple[np.ndarray, pd.DatetimeIndex]:
    """One hourly series: a daily and a weekly season, noise, sometimes a level shift."""
    length = int(rng.integers(652, 913)) + horizon
    t = np.arange(length)
    level = 10 ** rng.uniform(1, 4)
    amplitude = level * rng.uniform(0, 0.4)
    y = level * (1 + rng.normal(0, 0.5) * t / length)
    y += amplitude * np.sin(2 * np.pi * t / 24 + rng.uniform(0, 2 * np.pi))
    y += 0.3 * amplitude * np.sin(2 * np.pi * t / 168 + rng.uniform(0, 2 * np.pi))
    y += level * rng.uniform(0.02, 0.15) * rng.standard_normal(length)
    if rng.random() < 0.3:  # a level shift somewhere in the middle half
        y[int(rng.integers(length // 4, 3 * length // 4)) :] += level * rng.normal(0, 0.4)
    start = pd.Timestamp("2017-01-01") + pd.Timedelta(hours=int(rng.integers(0, 500)))
    return np.maximum(y, 0.01 * level), pd.date_range(start, periods=length, freq="h")


def weekly(rng: np.random.Generator, horizon: int) -> tuple[np.ndarray, pd.DatetimeIndex]:
    """One weekly series: a yearly cycle of 52.18 weeks in half of them, a random walk in
    log space with a drift, multiplicative noise."""
    length = int(rng.integers(80, 401)) + horizon
    t = np.arange(length)
    amplitude = rng.uniform(0, 0.4) if rng.random() < 0.5 else 0.0
    season = amplitude * np.sin(2 * np.pi * t / (365.25 / 7) + rng.uniform(0, 2 * np.pi))
    walk = np.cumsum(rng.normal(rng.normal(0, 0.003), rng.uniform(0.005, 0.04), length))
    noise = 1 + rng.uniform(0.01, 0.1) * rng.standard_normal(length)
    y = 10 ** rng.uniform(0.5, 4) * np.exp(season + walk) * noise
    return y, pd.date_range("2010-01-03", periods=length, freq="W-SUN")


def yearly(rng: np.random.Generator, horizon: int) -> tuple[np.ndarray, pd.DatetimeIndex]:
    """One short yearly series (13-59 years, as most of a competition's yearly ones): a
    random walk with drift in log space."""
    length = int(rng.integers(13, 60)) + horizon
    walk = np.cumsum(rng.normal(rng.normal(0.03, 0.04), rng.uniform(0.02, 0.12), length))
    start = f"{int(rng.integers(1950, 1990))}-01-01"
    return 10 ** rng.uniform(2, 4) * np.exp(walk), pd.date_range(start, periods=length, freq="YS")


#: --frequency: (one series' maker, its season, its pandas frequency, its ids' prefix)
FREQUENCIES = {
    "monthly": (monthly, 12, "MS", "s"),
    "hourly": (hourly, 24, "h", "h"),
    "weekly": (weekly, 52, "W-SUN", "w"),
    "yearly": (yearly, 1, "YS", "y"),
}


def collection(frequency: str, n: int, horizon: int, seed: int):
    """(train, test) long frames of `n` seeded series; test: the last `horizon` of each."""
    make, *_, prefix = FREQUENCIES[frequency]
    rng = np.random.default_rng(seed)
    train, test = [], []
    for i in range(n):
        y, ds = make(rng, horizon)
        frame = pd.DataFrame({"unique_id": f"{prefix}{i}", "ds": ds, "y": y})
        train.append(frame.iloc[:-horizon])
        test.append(frame.iloc[-horizon:])
    return pd.concat(train, ignore_index=True), pd.concat(test, ignore_index=True)


def real_collection(path: Path, horizon: int | None, length: int | None):
    """(train, test, horizon, season, freq) of a Monash `.tsf` file's series (the shared
    weather and air-quality collections): each series' last `length` points (None: all), its
    last `horizon` (None: the file's `@horizon`) held out; missing test points are not
    scored."""
    from sgem.data.files_series import read_long_series
    from sgem.forecast import seasonality

    data = read_long_series(path)
    h = int(horizon or data.horizon or 0)
    if h <= 0 or data.freq is None:
        sys.exit(f"{path}: give --horizon (the file names none) and a file with dates")
    frames = []
    for name, values in data.series.items():
        ds = pd.date_range(data.start[name], periods=len(values), freq=data.freq)
        frames.append(
            pd.DataFrame({"unique_id": name, "ds": ds, "y": values}).iloc[-(length or 0) :]
        )
    long = pd.concat(frames, ignore_index=True)
    last = long.groupby("unique_id").cumcount(ascending=False) < h
    test = long[last].dropna(subset=["y"])
    return long[~last], test, h, seasonality(data.freq), data.freq


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--series", type=int, default=3000)
    p.add_argument("--horizon", type=int, help="default: 18; --tsf: the file's @horizon")
    p.add_argument("--time-budget", type=float, default=120.0, help="seconds of the sgem fit")
    p.add_argument("--frequency", choices=sorted(FREQUENCIES), default="monthly")
    p.add_argument("--tsf", type=Path, help="a real collection: every series of this file")
    p.add_argument("--length", type=int, help="--tsf: keep each series' last LENGTH points")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--forecast-budget", help="sgem fit --forecast-budget (default: the budget)")
    p.add_argument("--runs", type=Path, default=Path("runs/many-series"))
    p.add_argument("--out", type=Path, default=RESULTS / "many_series.json")
    args = p.parse_args()
    if args.tsf:
        train, test, args.horizon, season, freq = real_collection(
            args.tsf, args.horizon, args.length
        )
        args.series, args.frequency = train["unique_id"].nunique(), freq
    else:
        _, season, freq, _ = FREQUENCIES[args.frequency]
        args.horizon = args.horizon or 18
        train, test = collection(args.frequency, args.series, args.horizon, args.seed)
    shutil.rmtree(args.runs, ignore_errors=True)  # a fresh fit: never a run of older code
    args.runs.mkdir(parents=True)
    path = args.runs / "train.csv"
    train.to_csv(path, index=False)
    fc, fit_s, predict_s, shipped = sgem_forecast(
        path, args.horizon, args.time_budget, args.seed, args.runs / "run",
        forecast_budget=args.forecast_budget,
    )  # fmt: skip
    board = json.loads((args.runs / "run" / "result.json").read_text())["leaderboard"]
    rows = method_rows(
        train, test, args.horizon, season, freq, fc, fit_seconds=fit_s, predict_seconds=predict_s,
        saved=shipped, forecast_expected=board.get("forecast"),
    )  # fmt: skip
    limit = args.time_budget + max(5.0, 0.02 * args.time_budget)
    record = new_record(
        args.seed,
        args.time_budget,
        series=args.series,
        horizon=args.horizon,
        fit_within_budget=bool(fit_s <= limit),
        frequency=args.frequency,
        command="python benchmarks/many_series.py " + " ".join(sys.argv[1:]),
    )
    print(f"{args.series} series, h={args.horizon}: fit {fit_s:.1f} s of {args.time_budget:.0f}")
    print(f"  forecast {predict_s:.1f} s; saved: {shipped}")
    name = args.tsf.stem if args.tsf else f"{args.series} {args.frequency} series"
    add_rows(record, "data", name, rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
