"""Can any calibration on the past reach 80 % coverage on a competition's future?

sgem makes its 80 % interval cover 80 % of held-out windows at the end of every training
series (split-conformal). That is the only evidence a fit has. Here, per competition file,
statsforecast's AutoTheta and seasonal naive (fast, and never seen by sgem) are fitted at four
origins of every series long enough for them: n - 3h, n - 2h, n - h (windows inside the
training series) and n (scored on the competition's future). At each origin:
- `coverage_raw`: how much of the next h points the model's own 80 % interval holds;
- `factor_needed`: the factor on the interval's half-widths that makes it hold 80 % there
  (the split-conformal quantile);
- `coverage_calibrated`: the coverage after widening or narrowing by the factor the origin
  before needed (what a calibration on the latest windows delivers one horizon later).
Where `coverage_calibrated` is near 0.8 at the past origins but not on the future, and the
factors needed at the past origins show no trend towards the future's, no calibration on the
past reaches 80 % on that future: the future is unlike every window before it.

    python benchmarks/coverage_origins.py --files yearly quarterly other tourism
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sgem.bench.future_scores import classical_forecasts, competition_file, new_record

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "competition"
METHODS = ("AutoTheta", "SeasonalNaive")
ORIGINS = (3, 2, 1, 0)  # n - k h; 0: the competition's future


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", nargs="+", default=["yearly", "quarterly", "other", "tourism"])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/coverage_origins.json"))
    return p.parse_args()


def origin_split(
    train: pd.DataFrame, test: pd.DataFrame, h: int, k: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(what is fitted at origin n - k h, the h points after it)."""
    if k == 0:
        return train, test
    back = train.groupby("unique_id").cumcount(ascending=False)
    return train[back >= k * h], train[(back < k * h) & (back >= (k - 1) * h)]


def needed_factor(frame: pd.DataFrame) -> np.ndarray:
    """Per point, the factor on the 80 % interval's half-width that just covers y."""
    m, lo, hi, y = (frame[c].to_numpy() for c in ("q0.5", "q0.1", "q0.9", "y"))
    below = (m - y) / np.maximum(m - lo, 1e-12)
    above = (y - m) / np.maximum(hi - m, 1e-12)
    return np.maximum(np.maximum(below, above), 0.0)


def main() -> None:
    args = arguments()
    record = new_record(0, 0.0, what=__doc__.split("\n")[0], files={})
    del record["seed"], record["time_budget_s"]  # no seed, no sgem fit
    for name in args.files:
        data = competition_file(name, args.data, Path("runs/competition-data"))
        h, season = data.horizon, data.season
        length = data.train.groupby("unique_id").size()
        # every origin must leave AutoTheta two seasons and a few points to fit on
        long = length[length >= max(ORIGINS) * h + 2 * max(season, 1) + 4].index
        train = data.train[data.train["unique_id"].isin(long)]
        test = data.test[data.test["unique_id"].isin(long)]
        print(f"{name}: {len(long)} of {len(length)} series long enough, h = {h}")
        record["files"][name] = {"h": h, "season": season, "series": len(long)}
        previous: dict[str, float] = {}
        for k in ORIGINS:
            fit_on, score_on = origin_split(train, test, h, k)
            start = time.perf_counter()
            forecasts = classical_forecasts(fit_on, h, season, data.freq, names=METHODS)
            for method, (frame, _) in forecasts.items():
                scored = score_on.merge(frame, on=["unique_id", "ds"])
                need = needed_factor(scored)
                factor = float(np.quantile(need, 0.8))
                row = {
                    "file": name,
                    "method": method,
                    "origin": "future" if k == 0 else f"n-{k}h",
                    "points": len(scored),
                    "coverage_raw": float(np.mean(need <= 1.0)),
                    "factor_needed": factor,
                    "coverage_calibrated": (
                        float(np.mean(need <= previous[method])) if method in previous else None
                    ),
                }
                previous[method] = factor
                record["rows"].append(row)
                calibrated = row["coverage_calibrated"]
                print(
                    f"  {row['origin']:7s} {method:13s} raw {row['coverage_raw']:.3f}  "
                    f"needed x{factor:.2f}  calibrated on the origin before "
                    + ("-" if calibrated is None else f"{calibrated:.3f}")
                )
            print(f"    ({time.perf_counter() - start:.1f} s)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record["command"] = "python benchmarks/coverage_origins.py --files " + " ".join(args.files)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
