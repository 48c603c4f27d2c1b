"""sgem against AutoETS and AutoTheta on forecasting-competition files, under the
competition's own split: fit on `*_train.csv`, forecast the next h points of every series,
score against `*_test.csv`. `tourism` (the shared tourism_monthly.tsf) is split as its
competition did: the last 24 months of every series are the test; `tourism_quarterly` and
`tourism_yearly`: its series summed over whole quarters / years, the last 8 / 4 the test;
`macro`: statsmodels' bundled US macro series (12 quarterly, 1959-2009), the last 8 the test.

Side by side in one run, per file: `sgem fit TRAIN --horizon H --season S --time-budget B`
(the saved model: searched MoE, selective routing or combination, as the leaderboard
chose), then statsforecast's AutoETS and AutoTheta fitted on each whole training series
with the same season S: the one the data's README gives each file (yearly 1, quarterly 4,
other 1, tourism 12, tourism_quarterly 4, tourism_yearly 1;
`sgem.bench.future_scores.SEASONS`), which MASE scales by too.
Scores: MASE (utilsforecast, in-sample seasonal naive scale), sMAPE,
wQL (mean over quantiles 0.1 ... 0.9 of 2 * sum of pinball losses / sum |y|, as GluonTS and
AutoGluon define it), 80 % interval coverage (between the 0.1 and 0.9 quantiles), and how
many series got a forecast.

    python benchmarks/competition.py --files yearly quarterly other tourism --time-budget 300
    python benchmarks/competition.py --files tourism_quarterly tourism_yearly --time-budget 120
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sgem.bench.future_scores import (
    add_rows,
    competition_arguments,
    competition_file,
    method_rows,
    new_record,
    sgem_forecast,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "competition"


def main() -> None:
    args = competition_arguments(__doc__, DATA, 300.0, "benchmarks/results/competition.json")
    record = new_record(args.seed, args.time_budget, files={})
    for name in args.files:
        data = competition_file(name, args.data, Path("runs/competition-data"))
        train, test, h, freq, season = data.train, data.test, data.horizon, data.freq, data.season
        train_path = data.train_path
        run = Path(f"runs/competition-{name}-seed{args.seed}")
        shutil.rmtree(run, ignore_errors=True)  # a fresh fit: never a run of older code
        fc, fit_s, predict_s, shipped = sgem_forecast(
            train_path, h, args.time_budget, args.seed, run, season
        )
        fc.to_csv(run / "competition_forecast.csv", index=False)
        rows = method_rows(
            train, test, h, season, freq, fc, seconds=fit_s + predict_s, fit_seconds=fit_s,
            predict_seconds=predict_s, saved=shipped,
        )  # fmt: skip
        best = {k: min(rows[r][k] for r in ("AutoETS", "AutoTheta")) for k in ("mase", "wql")}
        verdict = {k: rows["sgem"][k] <= best[k] for k in best}
        record["files"][name] = {"h": h, "freq": freq, "season": season, "rows": rows}
        record["files"][name]["sgem_at_most_best_reference"] = verdict
        print(f"{name} (h={h}, season={season}, budget {args.time_budget:.0f} s, saved: {shipped})")
        add_rows(record, "file", name, rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
