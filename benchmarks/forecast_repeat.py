"""A saved forecaster asked three times about the same series (the same quantiles twice,
then others): the seconds of each forecast, where its combination refits AutoETS / AutoTheta
on every series. Fits `sgem fit FILE --time-budget B` on a competition file, loads the model
in this process, then forecasts with `sgem.run.predict_io.predict_file` as `sgem predict`.

    python benchmarks/forecast_repeat.py [--files tourism_quarterly] [--time-budget 60]
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import sgem
from sgem.bench.future_scores import competition_arguments, competition_file, new_record
from sgem.run.predict_io import predict_file

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "competition"
ASKED = ((0.1, 0.5, 0.9), (0.1, 0.5, 0.9), (0.05, 0.5, 0.95))


def main() -> None:
    out = "benchmarks/results/forecast_repeat.json"
    args = competition_arguments(__doc__, DATA, 60.0, out)
    record = new_record(args.seed, args.time_budget)
    for name in args.files:
        data = competition_file(name, args.data, Path("runs/competition-data"))
        run = Path(f"runs/forecast-repeat-{name}-seed{args.seed}")
        shutil.rmtree(run, ignore_errors=True)
        sgem.fit(data.train_path, horizon=data.horizon, season=data.season, out=run,
                 time_budget=args.time_budget, seed=args.seed, progress=False)  # fmt: skip
        model = sgem.load(run)  # a fresh model, as a user's process holds it
        seconds, frames = [], []
        for qs in ASKED:
            start = time.perf_counter()
            frames.append(predict_file(model, data.train_path, quantiles=qs))
            seconds.append(round(time.perf_counter() - start, 2))
        same = frames[0].equals(frames[1])
        result = json.loads((run / "result.json").read_text())
        shipped = (result.get("leaderboard") or {}).get("shipped", {}).get("model")
        row = {"file": name, "series": int(data.train["unique_id"].nunique()),
               "saved": shipped, "first_s": seconds[0], "again_s": seconds[1],
               "other_quantiles_s": seconds[2], "same_forecast": same}  # fmt: skip
        record["rows"].append(row)
        print(json.dumps(row), flush=True)
    record["command"] = "python benchmarks/forecast_repeat.py " + " ".join(
        ["--files", *args.files, "--time-budget", f"{args.time_budget:g}"]
    )
    args.out.write_text(json.dumps(record, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
