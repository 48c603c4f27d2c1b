"""Calibration before / after on public data: 80 % interval coverage and ECE on the holdout.

Each data set is fitted with `sgem.fit` (a small search, seconds to a minute on 2 cores), and
the run's own calibration report is read back: the coverage of the central 80 % interval
(regression, forecasts; target 0.75-0.85) and the expected calibration error (15 bins) of
the probabilities (classification), raw and calibrated, on the holdout the run never used
to fit or choose; plus what the calibration's extra trainings cost.

    python benchmarks/calibration.py [--seeds 0 1 2] [--series m3_other]

Data: scikit-learn's bundled diabetes (regression) and breast_cancer (classification), and
the M3 "other" series of the shared data directory (long format, h = 8).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import sgem
from sgem.bench.machine import commit

#: a small search: a few seconds per table on one core
TABLE_CONFIG = {
    "search": {
        "n_iterations": 3,
        "n_init": 12,
        "pool_size": 30,
        "mc_masks": 4,
        "routing_steps": 10,
        "final_steps": 600,
        "train": {"steps": 150},
        "surrogate": {"epochs_first": 60, "epochs_refit": 20, "mc_samples": 4},
    },
    "torch_threads": 1,
}
#: the forecasting preset's protocol (validation-chosen length, warm starts), made small
SERIES_CONFIG = {
    "search": {
        "n_experts": 2,
        "n_iterations": 1,
        "n_init": 6,
        "pool_size": 20,
        "mc_masks": 3,
        "routing_steps": 5,
        "refit_budget": 1,
        "final_candidates": 1,
        "finalist_budget": 1,
        "champion_cells": 0,
        "final_steps": 150,
        "train": {"steps": 100, "early_stop_evals": None},
        "surrogate": {"epochs_first": 40, "epochs_refit": 10, "mc_samples": 3},
    },
    "space": {"ops": ["moving_average", "dilated_conv", "linear_trend", "skip"], "n_nodes": 2},
    "torch_threads": 1,
}


def _table(frame: pd.DataFrame, folder: Path, name: str) -> Path:
    path = folder / f"{name}.csv"
    frame.to_csv(path, index=False)
    return path


def _row(name: str, seed: int, result: dict, seconds: float) -> dict:
    cal = result["calibration"]
    hold, val = cal.get("holdout", {}), cal.get("validation", {})
    row = {"data": name, "seed": seed, "fit_seconds": round(seconds, 1)}
    row["calibration_seconds"] = cal.get("seconds")
    row["final_retrain_seconds"] = result.get("timing", {}).get("final_retrain")
    if "coverage_80" in hold:
        for split, d in (("validation", val), ("holdout", hold)):
            for kind in ("raw", "calibrated"):
                row[f"{split}_coverage_80_{kind}"] = d["coverage_80"][kind]["overall"]
        row["holdout_per_group_calibrated"] = {
            k: v for k, v in hold["coverage_80"]["calibrated"].items() if k != "overall"
        }
        row["test_rmse_target_units"] = result.get("test_rmse")
    if "ece_15" in hold:
        for split, d in (("validation", val), ("holdout", hold)):
            for kind in ("raw", "calibrated"):
                row[f"{split}_ece_15_{kind}"] = d["ece_15"][kind]
        row["temperature"] = cal["temperature"]
        row["test_accuracy"] = result.get("test_accuracy")
    return row


def _fit(path: Path, out: Path, seed: int, **options) -> tuple[dict, float]:
    t0 = time.perf_counter()
    model = sgem.fit(path, out=out, progress=False, seed=seed, **options)
    assert model.result is not None
    return model.result, time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--series", default="m3_other", help="a competition/*_train.csv stem")
    p.add_argument("--data-dir", default=os.environ.get("SGEM_DATA", "../shared/data"))
    p.add_argument("--out", default="benchmarks/results/calibration.json")
    args = p.parse_args()
    from sklearn.datasets import load_breast_cancer, load_diabetes

    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        diabetes = load_diabetes(as_frame=True).frame
        cancer = load_breast_cancer(as_frame=True).frame
        tables = {
            "diabetes": (_table(diabetes, folder, "diabetes"), "target"),
            "breast_cancer": (_table(cancer, folder, "breast_cancer"), "target"),
        }
        series = Path(args.data_dir) / "competition" / f"{args.series}_train.csv"
        for seed in args.seeds:
            for name, (path, target) in tables.items():
                result, secs = _fit(
                    path, folder / f"{name}-{seed}", seed, target=target, config=TABLE_CONFIG
                )
                rows.append(_row(name, seed, result, secs))
                print(json.dumps(rows[-1]), flush=True)
            if series.is_file():
                result, secs = _fit(
                    series, folder / f"series-{seed}", seed, horizon=8, config=SERIES_CONFIG
                )
                rows.append(_row(args.series, seed, result, secs))
                print(json.dumps(rows[-1]), flush=True)
    _print_table(rows)
    record = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": commit(short=False),
        "seeds": args.seeds,
        "note": "2 CPU cores shared with other work running beside it: seconds are indicative",
        "configs": {"tables": TABLE_CONFIG, "series": SERIES_CONFIG},
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1))
    print(f"saved {args.out}")


def _print_table(rows: list[dict]) -> None:
    print("\n(2 CPU cores shared with other work running beside it: seconds are indicative)")
    print(f"{'data':<14}{'seed':>5}  {'holdout 80% cov raw->cal':>26}  {'ECE raw->cal':>16}  cal s")
    for r in rows:
        cov = (
            f"{r['holdout_coverage_80_raw']:.3f} -> {r['holdout_coverage_80_calibrated']:.3f}"
            if "holdout_coverage_80_raw" in r
            else "-"
        )
        ece = (
            f"{r['holdout_ece_15_raw']:.3f} -> {r['holdout_ece_15_calibrated']:.3f}"
            if "holdout_ece_15_raw" in r
            else "-"
        )
        print(f"{r['data']:<14}{r['seed']:>5}  {cov:>26}  {ece:>16}  {r['calibration_seconds']}")
    for name in dict.fromkeys(r["data"] for r in rows):
        mine = [r for r in rows if r["data"] == name]
        for key in ("holdout_coverage_80_raw", "holdout_coverage_80_calibrated"):
            if key in mine[0]:
                print(f"  {name} mean {key}: {np.mean([r[key] for r in mine]):.3f}")
        for key in ("holdout_ece_15_raw", "holdout_ece_15_calibrated"):
            if key in mine[0]:
                print(f"  {name} mean {key}: {np.mean([r[key] for r in mine]):.3f}")


if __name__ == "__main__":
    main()
