"""SGEM against the label-free baselines at a matched number of candidate trainings.

Both directions of a matched budget are two ts_main outputs that cannot be merged
(`--merge` refuses different configurations): the baselines at SGEM's budget
(`ts_main.py --budget N`: their best single cell is the best of N random cells on every
cluster) against SGEM's rows of the main table, or SGEM shrunk to the baselines' budget
(`--search-set n_init=8 n_iterations=2 ...`) against the main table's baselines. This pairs
one file's baseline rows with the other's SGEM rows on the same seeds and test windows: per
seed test NLL and wQL, on how many seeds SGEM is ahead, and the paired window bootstrap of
SGEM minus each baseline.

    python benchmarks/matched_budget.py benchmarks/results/ts_main_offline-b141-all.json \\
        --sgem benchmarks/results/ts_main_offline-seeds0-4.json \\
        --out benchmarks/results/matched_budget_offline-b141-all.json
    python benchmarks/matched_budget.py benchmarks/results/ts_main_offline-seeds0-4.json \\
        --sgem benchmarks/results/ts_main_offline-sgem16.json \\
        --methods geometry global_single random_moe \\
        --out benchmarks/results/matched_budget_offline-sgem16.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from sgem.bench.stats import window_bootstrap


def paired(base_rows: list[dict], sgem_rows: list[dict], method: str) -> dict | None:
    """SGEM's rows against one baseline's on the seeds both have (None: no such seed)."""
    sgem_by_seed = {r["seed"]: r for r in sgem_rows if r["method"] == "sgem"}
    pairs = [
        (r, sgem_by_seed[r["seed"]])
        for r in base_rows
        if r["method"] == method and r["seed"] in sgem_by_seed and "test_nll_per_window" in r
    ]
    if not pairs:
        return None
    diffs = [
        np.asarray(s["test_nll_per_window"]) - np.asarray(b["test_nll_per_window"])
        for b, s in pairs
    ]
    mean, lo, hi = window_bootstrap(diffs)
    return {
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
        "sgem_ahead_on": sum(s["test_nll"] < b["test_nll"] for b, s in pairs),
        "seeds": len(pairs),
        "window_nll_diff": {"mean": mean, "ci95": [lo, hi]},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("baselines", help="ts_main output with the baselines' rows")
    p.add_argument("--sgem", required=True, help="a ts_main output with SGEM's rows")
    p.add_argument(
        "--methods", nargs="+", default=None, help="baselines to pair (default: all but SGEM)"
    )
    p.add_argument("--out", required=True)
    args = p.parse_args()
    base = json.loads(Path(args.baselines).read_text())
    sgem_rows = json.loads(Path(args.sgem).read_text())["rows"]
    budget = base["meta"]["config"]["budget"]
    out: dict = {"baselines": args.baselines, "sgem": args.sgem, "budget": budget, "methods": {}}
    methods = args.methods or list(dict.fromkeys(r["method"] for r in base["rows"]))
    for method in (m for m in methods if m != "sgem"):
        entry = paired(base["rows"], sgem_rows, method)
        if entry is None:
            print(f"{method:15s} no seed in both files")
            continue
        out["methods"][method] = entry
        seeds = ", ".join(
            f"seed {k}: {v['baseline_nll']:.4f} vs SGEM {v['sgem_nll']:.4f}"
            for k, v in entry["per_seed"].items()
        )
        mean, (lo, hi) = entry["window_nll_diff"]["mean"], entry["window_nll_diff"]["ci95"]
        print(
            f"{method:15s} {seeds}; SGEM ahead on {entry['sgem_ahead_on']}/{entry['seeds']}, "
            f"minus it {mean:+.4f} [{lo:+.4f}, {hi:+.4f}]"
        )
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
