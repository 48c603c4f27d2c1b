"""How much history should a combination's AutoETS / AutoTheta be refitted on? Each
classical member of a saved forecaster is refitted on every series' most recent points,
at the fit's validation and holdout windows and again at every forecast, so the history
it keeps sets both what it forecasts and how long `sgem predict` takes on long series.

For every `--tsf` collection, `--series` seeded series (each cut to its last `--length`
points) are forecast at `--origins` rolling origins (the file's `@horizon` apart, the
last one its end), by `sgem.moe.classical.ClassicalMember` with its history capped at
each of `--caps` points (more where the season asks for it: `HISTORY_SEASONS` seasons).
Members at a fit's season (`MODEL_SEASONALITIES`: daily 7). Scores: MASE at the file's
GluonTS season, as `many_series.py` scores it (the scale from each window's own history),
the Normal 80 % interval's coverage, the fits' seconds (one process, one after another).

    python benchmarks/classical_history.py \
        --tsf ../shared/data/timeseries/weather_australia_daily.tsf \
              ../shared/data/timeseries/air_quality_beijing_hourly.tsf \
              ../shared/data/timeseries/electricity_pjm_hourly.tsf \
        --series 30 --origins 4 --length 20000 --caps 2000 1000 500
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import numpy as np
from scipy import stats

import sgem.moe.classical as classical
from sgem.bench.machine import busiest, commit, load_average, machine_info
from sgem.data.tsf_reader import read_tsf
from sgem.forecast import MODEL_SEASONALITIES, mase_per_window, seasonality

RESULTS = Path(__file__).resolve().parent / "results"
MEMBERS = ("AutoETS", "AutoTheta")


def windows(path: Path, n_series: int, origins: int, length: int, seed: int):
    """(histories, futures, the members' season, MASE's season, horizon) of `n_series`
    seeded series of the file, each at `origins` rolling origins."""
    data = read_tsf(path)
    h = int(data.horizon or 1)
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(data.series), size=min(n_series, len(data.series)), replace=False)
    histories, futures = [], []
    for i in sorted(chosen.tolist()):
        series = np.asarray(data.series[i], dtype=np.float64)
        for k in range(origins):
            window = series[: len(series) - k * h][-(length + h) :]
            histories.append(window[:-h])
            futures.append(window[-h:])
    member_season = seasonality(data.frequency, MODEL_SEASONALITIES)  # (a fit's: daily 7)
    return histories, futures, member_season, seasonality(data.frequency), h


def mase(history: np.ndarray, future: np.ndarray, point: np.ndarray, season: int) -> float:
    """`sgem.forecast.mase_per_window` of one window, on its known history and future steps."""
    ok = np.isfinite(future)
    x = history[np.isfinite(history)]
    return float(mase_per_window(point[ok][None], future[ok][None], x[None], season)[0])


def scored(member: str, cap: int, histories, futures, season: int, mase_season: int, h: int):
    """One member's scores with its history capped at `cap` points."""
    classical.MAX_HISTORY = cap  # (read at each fit; one process, so no worker misses it)
    start = time.perf_counter()
    loc, scale = classical.ClassicalMember(member).forecast(histories, h, season, workers=1)
    seconds = time.perf_counter() - start
    z = float(stats.norm.ppf(0.9))
    covered = [
        np.mean(np.abs(y[np.isfinite(y)] - m[np.isfinite(y)]) <= z * s[np.isfinite(y)])
        for y, m, s in zip(futures, loc, scale, strict=True)
    ]
    errors = [mase(x, y, m, mase_season) for x, y, m in zip(histories, futures, loc, strict=True)]
    return {
        "member": member,
        "cap": cap,
        "mase": float(np.nanmean(errors)),
        "coverage_80": float(np.mean(covered)),
        "seconds": round(seconds, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tsf", type=Path, nargs="+", required=True)
    p.add_argument("--series", type=int, default=30)
    p.add_argument("--origins", type=int, default=4)
    p.add_argument("--length", type=int, default=20000)
    p.add_argument("--caps", type=int, nargs="+", default=[2000, 1000, 500])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "classical_history.json"))
    args = p.parse_args()
    record: dict = {
        "what": "AutoETS / AutoTheta refitted on each window's last CAP points (HISTORY_SEASONS "
        "seasons at least): MASE, Normal 80 % coverage, seconds (one process)",
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "machine": machine_info(),
        "load_before": load_average(),
        "running_before": busiest(),
        "seed": args.seed,
        "series": args.series,
        "origins": args.origins,
        "length": args.length,
        "history_seasons": classical.HISTORY_SEASONS,
        "rows": [],
    }
    for path in args.tsf:
        histories, futures, season, mase_season, h = windows(
            path, args.series, args.origins, args.length, args.seed
        )
        for cap in args.caps:
            for member in MEMBERS:
                row = {"data": path.stem, "season": season, "horizon": h, "windows": len(futures)}
                row |= scored(member, cap, histories, futures, season, mase_season, h)
                record["rows"].append(row)
                print(json.dumps(row), flush=True)
    record["load_after"] = load_average()
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
