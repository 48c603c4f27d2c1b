"""How many series of a forecasting collection are trained on and forecast, and how well.

Fits a long-format training file as `sgem fit FILE --horizon H --time-budget B` does, then
forecasts it as `sgem predict` does, and reports: series in the file, series with a window in
the training split (the task rebuilt from the run's config), series forecast, and the sMAPE
and MASE (in-sample seasonal naive, season 1) of the point forecast against the held-out
file, beside the naive forecast (the last value).

    python benchmarks/series_coverage.py ../shared/data/competition/m3_yearly_train.csv \
        --test ../shared/data/competition/m3_yearly_test.csv --horizon 6 --time-budget 60
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

import sgem
from sgem.data.user_tasks import series_task
from sgem.run.pipeline import read_config_file
from sgem.run.predict_io import predict_file


def smape(y: np.ndarray, f: np.ndarray) -> float:
    return float(np.mean(200 * np.abs(y - f) / np.maximum(np.abs(y) + np.abs(f), 1e-12)))


def scores(train: pd.DataFrame, test: pd.DataFrame, fc: pd.DataFrame, h: int) -> dict:
    """sMAPE and MASE of `fc` and of the naive forecast over the series `fc` forecast."""
    rows = {"sgem": [], "naive": []}
    for uid, truth in test.groupby("unique_id", sort=False):
        if uid not in fc.groups:
            continue
        history = train.get_group(uid)["y"].to_numpy()
        y = truth["y"].to_numpy()[:h]
        scale = np.mean(np.abs(np.diff(history))) or 1.0
        for name, f in (
            ("sgem", fc.get_group(uid)["forecast"].to_numpy()[:h]),
            ("naive", np.full(h, history[-1])),
        ):
            rows[name].append((smape(y, f), float(np.mean(np.abs(y - f)) / scale)))
    return {
        k: {"smape": float(np.mean([r[0] for r in v])), "mase": float(np.mean([r[1] for r in v]))}
        for k, v in rows.items()
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("train")
    p.add_argument("--test", default=None)
    p.add_argument("--horizon", type=int, required=True)
    p.add_argument("--time-budget", default="60")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run", default=None, help="run directory (default runs/coverage-NAME)")
    p.add_argument("--out", default=None, help="JSON (default benchmarks/results/...)")
    args = p.parse_args()
    name = Path(args.train).stem
    run = Path(args.run or f"runs/coverage-{name}-seed{args.seed}")
    start = time.perf_counter()
    model = sgem.fit(
        args.train,
        horizon=args.horizon,
        time_budget=args.time_budget,
        out=run,
        seed=args.seed,
        progress=False,
    )
    fit_seconds = time.perf_counter() - start
    task_cfg = read_config_file(run / "config.yaml")["run"]["task"]
    task = series_task(task_cfg, args.seed)
    train = pd.read_csv(args.train)
    fc = predict_file(model, args.train)
    record = {
        "train": args.train,
        "horizon": args.horizon,
        "time_budget": args.time_budget,
        "fit_seconds": round(fit_seconds, 1),
        "context": int(model.preprocessor.context),
        "series": int(train["unique_id"].nunique()),
        "series_trained": len(np.unique(task.meta["windows"]["train"].series)),
        "series_forecast": int(fc["unique_id"].nunique()),
    }
    if args.test:
        test = pd.read_csv(args.test)
        record["scores"] = scores(
            train.groupby("unique_id"), test, fc.groupby("unique_id"), args.horizon
        )
    print(json.dumps(record, indent=1))
    out = Path(args.out or f"benchmarks/results/series_coverage_{name}.json")
    out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
