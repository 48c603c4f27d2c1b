"""What a resume costs a budgeted table fit killed just after its scikit-learn references:
`sgem fit --time-budget B` on a table large enough for the references to take seconds, SIGKILLed
`--delay` seconds after its clock's `scikit_learn_references` stage ends, then `sgem resume`d.
Measured: the references' seconds in the first attempt and again in the resumed one (kept in
the run directory, they are read instead of fitted again), the clock's total against the
budget, and the saved model's holdout score.

The table is synthetic and seeded: `--rows` rows of 20 features, 3 classes from three
structures (linear, ring, XOR) in three regions.

    python benchmarks/resume_references.py --rows 60000 --time-budget 90
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sgem.run.crash_drill import attempt, clock_state

HERE = Path(__file__).resolve().parent
STAGE = "scikit_learn_references"


def table(rows: int, seed: int) -> pd.DataFrame:
    """Three regions, each with its own rule for its classes, and 17 noise features."""
    rng = np.random.default_rng(seed)
    region = rng.integers(0, 3, rows)
    x = rng.normal(size=(rows, 20))
    x[:, 2] += 6.0 * region
    a, b = x[:, 0], x[:, 1]
    rules = [(a + 0.5 * b > 0), (a**2 + b**2 > 1.4), (a * b > 0)]
    label = np.choose(region, rules).astype(int) + np.where(region == 2, 1, 0)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(20)])
    frame["label"] = label
    return frame


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--time-budget", type=float, default=90.0)
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(HERE / "results" / "resume_references.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data, run = root / "table.csv", root / "run"
        table(args.rows, args.seed).to_csv(data, index=False)
        fit = ["sgem", "fit", str(data), "--target", "label", "--out", str(run),
               "--time-budget", f"{args.time_budget:g}s", "--seed", str(args.seed),
               "--executor", "inline", "--quiet"]  # fmt: skip
        first = attempt(fit, run, args.delay, after_stage=STAGE)
        if not first.killed:
            raise RuntimeError(f"the fit ended before its kill:\n{first.stderr}")
        spent_at_kill, stages_at_kill = clock_state(run)
        resume = ["sgem", "resume", str(run), "--executor", "inline", "--quiet"]
        second = attempt(resume, run, np.inf)
        if second.returncode != 0:
            raise RuntimeError(f"the resume failed:\n{second.stderr}")
        _, stages = clock_state(run)
        result = json.loads((run / "result.json").read_text())
    first_refs = stages_at_kill.get(STAGE, 0.0)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=HERE).stdout.strip()  # fmt: skip
    total = float(result["clock"]["wall_seconds"])
    doc = {
        "date": time.strftime("%Y-%m-%d"), "commit": commit, "seed": args.seed,
        "rows": args.rows, "time_budget_s": args.time_budget, "kill_delay_s": args.delay,
        "killed_in": first.stage, "clock_at_kill_s": round(spent_at_kill or 0.0, 2),
        "references_first_attempt_s": round(first_refs, 2),
        "references_on_resume_s": round(stages.get(STAGE, 0.0) - first_refs, 2),
        "clock_total_s": round(total, 2),
        "within_budget": total <= args.time_budget + max(5.0, 0.02 * args.time_budget),
        "process_s": round(first.seconds + second.seconds, 1),
        "saved_model": result["leaderboard"]["shipped"]["model"],
        "holdout_accuracy": result["leaderboard"]["shipped"]["holdout"].get("accuracy"),
    }  # fmt: skip
    print(json.dumps(doc, indent=1))
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print("saved", args.out)


if __name__ == "__main__":
    main()
