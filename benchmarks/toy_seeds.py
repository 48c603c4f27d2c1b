"""Seeds 0..9 of `sgem run toy`: oracle match, RBF in the ring expert, test accuracy, time.

Each seed runs the real command in a fresh process (so the wall clock includes start-up),
into benchmarks/results/toy/seedN. Prints a table and saves it as JSON.

    python benchmarks/toy_seeds.py [--seeds 0 1 ...] [--executor inline [batched ...]]
        [--out benchmarks/results/toy_seeds.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

RING = 1  # oracle group of ring clusters in the toy task


def ring_expert(routing: list[int], oracle: list[int]) -> int:
    ring = [r for r, o in zip(routing, oracle, strict=True) if o == RING]
    return max(set(ring), key=ring.count)


def run_seed(seed: int, executor: str, rundir: Path, config: str | None) -> dict:
    """One `sgem run toy` in a fresh process; its row of the table."""
    shutil.rmtree(rundir, ignore_errors=True)
    cmd = ["sgem", "run", "toy", "--seed", str(seed), "--out", str(rundir), "--quiet"]
    cmd += ["--executor", executor] + (["--config", config] if config else [])
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    res = json.loads((rundir / "result.json").read_text())
    k_ring = ring_expert(res["routing"], res["oracle_partition"])
    return {
        "seed": seed,
        "executor": executor,
        "oracle_match": res["oracle_match"],
        "ring_expert_has_rbf": "rbf" in res["architectures"][k_ring]["ops"],
        "test_accuracy": res["test_accuracy"],
        "n_trained": res["n_trained"],
        "seconds": round(seconds, 2),
        "architectures": res["architecture_keys"],
    }


def summarise(rows: list[dict], seeds: list[int], executor: str) -> dict:
    return {
        "seeds": seeds,
        "executor": executor,
        "perfect_match": sum(r["oracle_match"] == 1.0 for r in rows),
        "rbf_in_ring_expert": sum(r["ring_expert_has_rbf"] for r in rows),
        "accuracy_at_least_0.95": sum(r["test_accuracy"] >= 0.95 for r in rows),
        "mean_test_accuracy": statistics.mean(r["test_accuracy"] for r in rows),
        "median_seconds": statistics.median(r["seconds"] for r in rows),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        },
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    p.add_argument("--out", default="benchmarks/results/toy_seeds.json")
    p.add_argument("--rundirs", default="benchmarks/results/toy")
    p.add_argument("--config", default=None, help="YAML overrides passed to sgem run")
    p.add_argument(
        "--executor",
        nargs="+",
        default=["inline"],
        help="passed to sgem run --executor; several are run seed by seed, interleaved, so "
        "their wall clocks see the same machine load (one summary per executor)",
    )
    args = p.parse_args()

    rows = []
    for seed in args.seeds:
        for executor in args.executor:
            sub = "" if len(args.executor) == 1 else executor
            row = run_seed(seed, executor, Path(args.rundirs) / sub / f"seed{seed}", args.config)
            rows.append(row)
            print(
                f"seed {seed:2d}  {executor:8s}  match {row['oracle_match']:.2f}  rbf-in-ring "
                f"{row['ring_expert_has_rbf']!s:5s}  test acc {row['test_accuracy']:.4f}  "
                f"trained {row['n_trained']:4d}  {row['seconds']:6.1f} s",
                flush=True,
            )
    summaries = [
        summarise([r for r in rows if r["executor"] == e], args.seeds, e) for e in args.executor
    ]
    print(json.dumps(summaries, indent=2))
    data: dict = {"rows": rows}
    if len(summaries) == 1:
        data["summary"] = summaries[0]
    else:
        data["summaries"] = summaries
        base = {r["seed"]: r["seconds"] for r in rows if r["executor"] == args.executor[0]}
        data["median_paired_ratio_vs_first"] = {
            e: statistics.median(base[r["seed"]] / r["seconds"] for r in rows if r["executor"] == e)
            for e in args.executor[1:]
        }
        print("median paired wall-clock ratio:", data["median_paired_ratio_vs_first"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()
