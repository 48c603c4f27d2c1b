"""SGEM against the label-free baselines run at SGEM's number of candidate trainings.

`ts_main.py --budget N` gives the baselines N trainings (their best single cell is the
best of N random cells on every cluster); its output cannot be merged with a table run
at another budget (`--merge` refuses different configurations), so this pairs its rows
with SGEM's rows of another ts_main output on the same seeds and test windows: per seed
test NLL and wQL, and the paired window bootstrap of SGEM minus each baseline.

    python benchmarks/matched_budget.py benchmarks/results/ts_main_offline-b141.json \\
        --sgem benchmarks/results/ts_main_offline-stop25.json \\
        --out benchmarks/results/matched_budget_offline-b141.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from ts_main import window_bootstrap


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("baselines", help="ts_main output of the baselines at the larger budget")
    p.add_argument("--sgem", required=True, help="a ts_main output with SGEM's rows")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    base = json.loads(Path(args.baselines).read_text())
    sgem_rows = {
        r["seed"]: r
        for r in json.loads(Path(args.sgem).read_text())["rows"]
        if r["method"] == "sgem"
    }
    budget = base["meta"]["config"]["budget"]
    out: dict = {"baselines": args.baselines, "sgem": args.sgem, "budget": budget, "methods": {}}
    for method in dict.fromkeys(r["method"] for r in base["rows"]):
        pairs = [
            (r, sgem_rows[r["seed"]])
            for r in base["rows"]
            if r["method"] == method and r["seed"] in sgem_rows and "test_nll_per_window" in r
        ]
        if not pairs:
            continue
        diffs = [
            np.asarray(s["test_nll_per_window"]) - np.asarray(b["test_nll_per_window"])
            for b, s in pairs
        ]
        mean, lo, hi = window_bootstrap(diffs)
        entry = {
            "per_seed": {
                str(b["seed"]): {
                    "baseline_nll": b["test_nll"],
                    "sgem_nll": s["test_nll"],
                    "baseline_wql": b.get("test_wql"),
                    "sgem_wql": s.get("test_wql"),
                    "baseline_trainings": b["n_trained"],
                    "sgem_trainings": s["n_trained"],
                }
                for b, s in pairs
            },
            "window_nll_diff": {"mean": mean, "ci95": [lo, hi]},
        }
        out["methods"][method] = entry
        seeds = ", ".join(
            f"seed {k}: {v['baseline_nll']:.4f} vs SGEM {v['sgem_nll']:.4f}"
            for k, v in entry["per_seed"].items()
        )
        print(f"{method:15s} {seeds}; SGEM minus it {mean:+.4f} [{lo:+.4f}, {hi:+.4f}]")
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
