"""Time budgets kept: `sgem fit --time-budget B` on tables, series and images returns within
B + max(5 s, 2 %), measured as the wall clock of the whole command (process start included).

Each fit is a fresh `sgem fit` process (inline or process executor, `--experts auto`
included); the script prints each wall clock beside its budget and how the run says it
used the budget (result.json's `time_budget.why_it_ended`), and saves everything as JSON.
Data: scikit-learn's bundled breast_cancer / diabetes / digits (written as CSV and as an
image folder), the shared M3 and tourism series when ../shared is beside the checkout.

    python benchmarks/budgets.py                 # the full set (about 20 minutes)
    python benchmarks/budgets.py --only table    # a subset by name

On a GPU machine, `--device cuda` trains every fit there and then reloads each saved model
in a process that sees no GPU (CUDA_VISIBLE_DEVICES empty) and predicts with it:

    python benchmarks/budgets.py --device cuda --only breast_cancer-30s digits-60s \
        m3_other --out benchmarks/results/budgets_cuda.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from sgem.bench.budget_fits import FITS, run_fit, tolerance, write_data

RESULTS = Path(__file__).resolve().parent / "results"
SHARED = Path(os.environ.get("SGEM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--only", nargs="*", default=[""], help="run the fits whose name contains one of these"
    )
    p.add_argument("--device", default=None, help="sgem fit --device (cuda on a GPU machine)")
    p.add_argument("--runs", default="/tmp/sgem-budgets", help="where run directories go")
    p.add_argument("--out", default=str(RESULTS / "budgets.json"))
    args = p.parse_args()
    runs = Path(args.runs)
    paths = write_data(runs / "data", SHARED)
    rows = []
    for name, key, budget, executor, flags in FITS:
        if not any(part in name for part in args.only):
            continue
        if key not in paths:
            print(f"skip {name}: {key} not available (no ../shared beside the checkout)")
            continue
        row = run_fit(name, paths[key], budget, executor, flags, runs, args.device)
        rows.append(row)
        mark = "ok  " if row["within"] and row["returncode"] == 0 else "FAIL"
        said = row.get("why_it_ended") or row.get("error", "")
        print(
            f"{mark} {name:38s} budget {budget:5.0f} s  wall {row['wall_seconds']:7.1f} s  "
            f"(limit {budget + tolerance(budget):.0f} s)  {said}",
            flush=True,
        )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    doc = {
        "what": "sgem fit wall clock (whole command) against --time-budget",
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "seed": 0,
        "command": " ".join(["python benchmarks/budgets.py", *sys.argv[1:]]),
        "device": args.device or "cpu",
        "fits": rows,
        "all_within": all(r["within"] and r["returncode"] == 0 for r in rows),
    }
    if args.device is not None:
        import torch

        doc["machine"] += f", torch {torch.__version__}"
        if torch.cuda.is_available():
            doc["machine"] += f", {torch.cuda.get_device_name(0)}"
        doc["all_reload_without_gpu"] = all(r.get("reload_without_gpu", {}).get("ok") for r in rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(
        f"{sum(r['within'] and r['returncode'] == 0 for r in rows)} of {len(rows)} ended "
        f"without error within budget + max(5 s, 2 %); saved {args.out}"
    )
    sys.exit(0 if doc["all_within"] else 1)


if __name__ == "__main__":
    main()
