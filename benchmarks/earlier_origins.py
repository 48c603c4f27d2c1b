"""Saved forecasters asked from earlier origins: does a difference between two models hold
across the year, or did one test period decide it?

Each series of a long-format training file (unique_id, ds, y) is cut `k * h` points before
its end for every `--origins` k; every saved model forecasts the next h points from there,
scored by MASE (utilsforecast, season `--season`) against the values the cut removed,
overall and per group of series (the id's last `_`-separated part: the shared weather
collection's MaxTemp / MinTemp / Rainfall). The models saw those values in training, so
this compares the models with each other, not with their own holdout scores.

    python benchmarks/earlier_origins.py --train runs/many-series/train.csv \
        --models after=runs/w120/run before=runs/w120-before/run --horizon 30 \
        --origins 1 3 6 9 12 --out benchmarks/results/weather_origins.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import pandas as pd

RESULTS = Path(__file__).resolve().parent / "results"


def score(model, history: pd.DataFrame, future: pd.DataFrame, season: int, path: Path) -> dict:
    """MASE of `model`'s forecast from `history` on `future`: overall and per id group."""
    from utilsforecast.losses import mase

    from sgem.run.predict_io import predict_file

    history.to_csv(path, index=False)
    fc = predict_file(model, path).rename(columns={"forecast": "p"})
    fc["ds"] = pd.to_datetime(fc["ds"])
    scored = future.merge(fc[["unique_id", "ds", "p"]], on=["unique_id", "ds"])
    m = mase(scored[["unique_id", "ds", "y", "p"]], ["p"], season, history.dropna(subset=["y"]))
    groups = m["unique_id"].astype(str).str.split("_").str[-1]
    return {"mase": float(m["p"].mean()), **m.groupby(groups)["p"].mean().round(4).to_dict()}


def main() -> None:
    import sgem
    from sgem.bench.machine import commit

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=Path, required=True, help="the long-format training file")
    p.add_argument("--models", nargs="+", required=True, help="NAME=RUN_OR_MODEL_DIR ...")
    p.add_argument("--horizon", type=int, required=True)
    p.add_argument("--season", type=int, default=1, help="MASE's season (1: the naive)")
    p.add_argument("--origins", type=int, nargs="+", default=[1, 3, 6, 9, 12])
    p.add_argument("--out", type=Path, default=RESULTS / "earlier_origins.json")
    args = p.parse_args()
    models = {}
    for spec in args.models:
        name, _, where = spec.partition("=")
        if not where:
            sys.exit(f"--models takes NAME=DIR, got {spec!r}")
        models[name] = sgem.load(where)
    train = pd.read_csv(args.train)
    train["ds"] = pd.to_datetime(train["ds"])
    back = train.groupby("unique_id").cumcount(ascending=False)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for k in args.origins:
            cut = k * args.horizon
            history = train[back >= cut]
            future = train[(back < cut) & (back >= cut - args.horizon)].dropna(subset=["y"])
            for name, model in models.items():
                s = score(model, history, future, args.season, Path(scratch) / "history.csv")
                row = {"origin": f"end - {cut}", "model": name, **s}
                rows.append(row)
                print(json.dumps(row), flush=True)
    record = {
        "date": pd.Timestamp.now().date().isoformat(),
        "commit": commit() or "unknown",
        "command": "python benchmarks/earlier_origins.py " + " ".join(sys.argv[1:]),
        "models": dict(spec.partition("=")[::2] for spec in args.models),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
