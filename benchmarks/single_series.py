"""sgem on one series at a time, as a user with one meter, one station or one product
fits it, against AutoETS, AutoTheta and seasonal naive on the same history.

Series from the shared files (electricity and Beijing air quality, hourly: each series'
last year; Australian weather, daily; tourism, monthly), each fitted alone with
`sgem.fit(..., time_budget=B)`, its last h points held out as the future. Scores as in
competition.py (MASE with the GluonTS period of the frequency, wQL, 80 % coverage; points
missing in the future are not scored). The references get the season a user would give
statsforecast (`sgem.forecast.MODEL_SEASONALITIES`: a day's week) and their missing
values carried forward.

    python benchmarks/single_series.py --time-budget 60
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from sgem.bench.future_scores import (
    add_rows,
    classical_forecasts,
    new_record,
    scores,
    sgem_forecast,
)
from sgem.data.tsf_reader import read_tsf
from sgem.forecast import MODEL_SEASONALITIES, seasonality

NAMES = ("AutoETS", "AutoTheta", "SeasonalNaive")
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "timeseries"
#: file -> (pandas frequency, horizon, the series fitted, the most recent points kept)
FILES = {
    "electricity_pjm_hourly": ("h", 24, (0, 3), 8760),
    "air_quality_beijing_hourly": ("h", 24, (0, 31), 8760),
    "weather_australia_daily": ("D", 14, (0, 61), None),
    "tourism_monthly": ("MS", 12, (0, 183), None),
}


def one_series(file: str, index: int) -> tuple[pd.DataFrame, pd.DataFrame, str, int]:
    """(train, future) long frames of series `index` of `file`, and its frequency, horizon."""
    freq, h, _, keep = FILES[file]
    data = read_tsf(DATA / f"{file}.tsf")
    values = np.asarray(data.series[index], dtype=np.float64)
    start = pd.Timestamp(data.attributes[index]["start_timestamp"])
    frame = pd.DataFrame(
        {
            "unique_id": str(data.attributes[index].get("series_name", index)),
            "ds": pd.date_range(start, periods=len(values), freq=freq),
            "y": values,
        }
    )
    if keep:
        frame = frame.iloc[-keep:]
    frame = frame.iloc[: np.flatnonzero(frame["y"].notna())[-1] + 1]  # ends observed
    return frame.iloc[:-h], frame.iloc[-h:].dropna(), freq, h


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--time-budget", type=float, default=60.0, help="seconds per sgem fit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--files", nargs="+", default=list(FILES))
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/single_series.json"))
    args = p.parse_args()
    record = new_record(args.seed, args.time_budget)
    for file in args.files:
        for index in FILES[file][2]:
            train, future, freq, h = one_series(file, index)
            name = f"{file}[{index}]"
            run = Path(f"runs/single-series-{file}-{index}")
            shutil.rmtree(run, ignore_errors=True)
            run.mkdir(parents=True)
            train_path = run / "train.csv"
            train.to_csv(train_path, index=False)
            fc, fit_s, predict_s, shipped = sgem_forecast(
                train_path, h, args.time_budget, args.seed, run / "fit"
            )
            mase_season = seasonality(freq)
            rows = {"sgem": scores(train, future, fc, mase_season)}
            rows["sgem"] |= {"fit_seconds": fit_s, "predict_seconds": predict_s, "saved": shipped}
            model_season = seasonality(freq, MODEL_SEASONALITIES)
            refs = classical_forecasts(train, h, model_season, freq, NAMES)
            for ref, (frame, seconds) in refs.items():
                rows[ref] = scores(train, future, frame, mase_season) | {"seconds": seconds}
            print(f"{name} (h={h}, {len(train)} points, saved: {shipped})")
            add_rows(record, "data", name, rows)
    wins = {}
    for metric in ("mase", "wql"):
        by = {}
        for r in record["rows"]:
            by.setdefault(r["data"], {})[r["method"]] = r[metric]
        wins[metric] = sum(v["sgem"] <= min(v["AutoETS"], v["AutoTheta"]) for v in by.values())
    record["sgem_at_most_best_reference"] = {**wins, "series": len(by)}
    print(f"sgem at most the best of AutoETS / AutoTheta: {record['sgem_at_most_best_reference']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
