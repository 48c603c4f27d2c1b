"""Wall clock of one preset on several executors, run side by side (interleaved) per seed.

Each run is a fresh `sgem run PRESET --seed S --executor E --workers W --quiet` process.
Executors alternate which goes first from seed to seed, so the load of a shared machine
hits them alike; the machine load and the busiest other processes are saved with each run.
Besides the wall clock and CPU time (user + sys of the child), each run's result.json gives
the per-phase time breakdown and the test scores, so one can check that every executor
found the same model (they must: the numbers do not depend on where candidates train).

    python benchmarks/executor_speed.py --preset ts-offline --seeds 0 \\
        --executors inline processes --workers 2 --out benchmarks/results/executors_ts.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from sgem.bench.machine import busiest, load_average

ROOT = Path(__file__).resolve().parents[1]


def run_once(preset: str, seed: int, executor: str, workers: int, rundir: Path) -> dict:
    shutil.rmtree(rundir, ignore_errors=True)
    cmd = ["sgem", "run", preset, "--seed", str(seed), "--out", str(rundir), "--quiet"]
    cmd += ["--executor", executor, "--workers", str(workers)]
    before_load, others = load_average(), busiest()
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    result = json.loads((rundir / "result.json").read_text())
    return {
        "seed": seed,
        "executor": executor,
        "workers": workers if executor != "inline" else None,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "timing": result.get("timing"),
        "test_nll": result.get("test_nll"),
        "test_accuracy": result.get("test_accuracy"),
        "n_trained": result.get("n_trained"),
        "architectures": result.get("architecture_keys") or result.get("architectures"),
        "routing": result.get("routing"),
        "load_before": before_load,
        "load_after": load_average(),
        "others": others,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--preset", default="ts-offline")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--executors", nargs="+", default=["inline", "processes"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default=None, help="JSON file (default: print only)")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sgem-executors-"))
    rows = []
    for i, seed in enumerate(args.seeds):
        order = args.executors if i % 2 == 0 else args.executors[::-1]
        for executor in order:
            row = run_once(args.preset, seed, executor, args.workers, work / f"{executor}-{seed}")
            rows.append(row)
            print(
                f"seed {seed} {executor:>9}: wall {row['wall_s']:7.1f} s  cpu {row['cpu_s']:7.1f} s"
                f"  test NLL {row['test_nll']:.4f}  trained {row['n_trained']}  "
                f"load {row['load_before'][0]:.1f}",
                flush=True,
            )
    first = args.executors[0]
    ratios = {}
    for executor in args.executors[1:]:
        per_seed = []
        for seed in args.seeds:
            a = next(r for r in rows if r["seed"] == seed and r["executor"] == first)
            b = next(r for r in rows if r["seed"] == seed and r["executor"] == executor)
            per_seed.append(
                {
                    "seed": seed,
                    "wall_ratio": round(b["wall_s"] / a["wall_s"], 3),
                    "same_model": a["test_nll"] == b["test_nll"] and a["routing"] == b["routing"],
                }
            )
        ratios[f"{executor}/{first}"] = per_seed
        print(f"{executor} / {first}: {per_seed}")
    doc = {
        "what": f"sgem run {args.preset}, fresh process per run, executors interleaved per seed",
        "commit": subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "ratios": ratios,
        "rows": rows,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
