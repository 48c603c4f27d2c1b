"""Is the forecast interval miscalibrated, or is the competition's future unlike the past?

sgem's 80 % interval is made to cover 80 % of the held-out windows at the end of every
training series (split-conformal). Where it covers more of the competition's future, either
that calibration is wrong or the future is easier than the windows before it. Side by side
in one run, per file, each method is fitted twice with the same budget and scored on:
- `last h`: the last h points of every training series, fitted on the rest (the question
  the held-out windows ask, one horizon earlier);
- `future`: the competition's test, fitted on the whole training series.
Where AutoETS's and AutoTheta's own intervals (which sgem's windows never saw) cover more of
the future than of the last h too, the shift is the data's; sgem's coverage on `last h`
says whether its calibration holds where the past is the question.

    python benchmarks/coverage_shift.py --files yearly quarterly other tourism --time-budget 120
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from sgem.bench.future_scores import (
    add_rows,
    competition_arguments,
    competition_file,
    method_rows,
    new_record,
    sgem_forecast,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "competition"


def last_h_split(train: pd.DataFrame, h: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(every training series without its last h points, those points)."""
    last = train.groupby("unique_id").cumcount(ascending=False) < h
    return train[~last], train[last]


def scored(name: str, split: str, train, test, h, args, season, freq) -> dict:
    """Each method's scores on `test` after fitting on `train` (sgem with the budget)."""
    run = Path(f"runs/coverage-shift-{name}-{split.replace(' ', '')}-seed{args.seed}")
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    train_path = run.parent / f"{run.name}-train.csv"
    train.to_csv(train_path, index=False)
    fc, fit_s, predict_s, shipped = sgem_forecast(
        train_path, h, args.time_budget, args.seed, run, season
    )
    rows = method_rows(train, test, h, season, freq, fc, seconds=fit_s + predict_s, saved=shipped)
    print(f"{name}, {split} (h={h}, budget {args.time_budget:.0f} s, saved: {shipped})")
    return rows


def main() -> None:
    args = competition_arguments(__doc__, DATA, 120.0, "benchmarks/results/coverage_shift.json")
    record = new_record(args.seed, args.time_budget, files={})
    for name in args.files:
        data = competition_file(name, args.data, Path("runs/competition-data"))
        train, test, h, freq, season = data.train, data.test, data.horizon, data.freq, data.season
        shift = {}
        for split, (fit_on, score_on) in {
            "last h": last_h_split(train, h),
            "future": (train, test),
        }.items():
            rows = scored(name, split, fit_on, score_on, h, args, season, freq)
            add_rows(record, "file", f"{name}: {split}", rows)
            shift[split] = {m: s["coverage_80"] for m, s in rows.items()}
        record["files"][name] = {
            "h": h,
            "season": season,
            "coverage_80": shift,
            "future_minus_last_h": {
                m: shift["future"][m] - shift["last h"][m] for m in shift["future"]
            },
        }
        print("  coverage shift (future - last h):", record["files"][name]["future_minus_last_h"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
