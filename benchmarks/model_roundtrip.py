"""Saved model round trip on the full presets: run, reload in a fresh process, re-score.

For each preset, `sgem run PRESET --seed S` writes a run directory with `model/`; a fresh
Python process then loads it with `sgem.load`, rebuilds the run's task from its config.yaml
and scores the test split with `model.evaluate(task.test)`. The scores must equal
result.json's exactly (CPU). Also checks that routing new samples reproduces the test
split's cluster ids where the raw inputs are at hand (toy: the features themselves).

    python benchmarks/model_roundtrip.py --presets toy ts-offline images-offline --seed 0

Prints and saves benchmarks/results/model_roundtrip.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
METRICS = ("test_accuracy", "test_nll", "test_crps", "test_crps_closed_form")

CHECK = """
import json, sys, yaml, numpy as np, sgem
from sgem.run.pipeline import build_task_from_config
run = sys.argv[1]
model = sgem.load(run)
cfg = yaml.safe_load(open(run + "/config.yaml"))["run"]
task = build_task_from_config(cfg["task"], cfg["seed"])
scores = model.evaluate(task.test)
out = {k: scores.get(k) for k in sys.argv[2].split(",")}
if task.input_shape == (2,):
    out["route_matches_test_clusters"] = bool(
        np.array_equal(model.route(task.test.x).cluster, task.test.cluster))
out["summary"] = model.summary()
print(json.dumps(out))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs="+", default=["toy", "ts-offline", "images-offline"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", default="/tmp/sgem-roundtrip", help="where the run dirs go")
    p.add_argument("--out", default=str(RESULTS / "model_roundtrip.json"))
    args = p.parse_args()
    rows = []
    for name in args.presets:
        run = Path(args.runs) / f"{name}-seed{args.seed}"
        start = time.perf_counter()
        subprocess.run(
            ["sgem", "run", name, "--seed", str(args.seed), "--out", str(run), "--quiet"],
            check=True,
        )
        seconds = time.perf_counter() - start
        result = json.loads((run / "result.json").read_text())
        check = subprocess.run(
            [sys.executable, "-c", CHECK, str(run), ",".join(METRICS)],
            capture_output=True,
            text=True,
            check=True,
        )
        reloaded = json.loads(check.stdout)
        same = {k: reloaded.get(k) == result.get(k) for k in METRICS if result.get(k) is not None}
        row = {
            "preset": name,
            "seed": args.seed,
            "run_seconds": round(seconds, 1),
            "result": {k: result.get(k) for k in METRICS},
            "reloaded": {k: reloaded.get(k) for k in METRICS},
            "identical": same,
            "all_identical": all(same.values()),
            "route_matches_test_clusters": reloaded.get("route_matches_test_clusters"),
        }
        rows.append(row)
        print(f"{name}: identical={row['all_identical']} {same}  ({seconds:.0f} s)")
        print(reloaded["summary"])
    out = {
        "rows": rows,
        "machine": {"python": platform.python_version(), "node": platform.node()},
        "command": " ".join(sys.argv),
    }
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
