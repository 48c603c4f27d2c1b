"""Wall clock of the champion cell's trainings here (one after another) and on the
processes executor's workers, side by side on one task; checks both pick the same cell.

The champion (`sgem.final.champion`) trains `--cells` random cells on every cluster; with
an executor they train as independent jobs on its workers. Runs alternate which path goes
first, so the load of a shared machine hits both alike; the load is saved with each run.

    python benchmarks/champion_speed.py --preset ts-offline --cells 8 --repeats 2 \\
        --workers 2 --out benchmarks/results/champion_speed.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from sgem.bench.machine import busiest, load_average
from sgem.execution.executors import ProcessExecutor
from sgem.final.champion import champion_cell
from sgem.run.runconfig import build_space, build_task, load_run_config
from sgem.train.trainer import Trainer


def timed(task, trainer, space, cells: int, seed: int, workers: int) -> dict:
    """One champion search, here (workers = 0) or on `workers` worker processes."""
    executor = ProcessExecutor(task, space, trainer.config, workers=workers) if workers else None
    load = load_average()
    start = time.perf_counter()
    try:
        cell, report = champion_cell(task, trainer, space, cells, seed, executor)
    finally:
        if executor is not None:
            executor.close()
    return {
        "path": f"processes x{workers}" if workers else "here",
        "wall_s": round(time.perf_counter() - start, 2),
        "cell": cell.key,
        "scores": report["scores"],
        "load_before": load,
        "load_after": load_average(),
        "others": busiest(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--preset", default="ts-offline")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cells", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default="benchmarks/results/champion_speed.json")
    args = p.parse_args()
    torch.set_num_threads(1)  # what a worker uses: the comparison is about parallel jobs
    cfg = load_run_config(args.preset, seed=args.seed)
    task = build_task(cfg)
    space = build_space(cfg.space)
    trainer = Trainer(task, space, cfg.search.train)
    runs = []
    for r in range(args.repeats):
        order = [0, args.workers] if r % 2 == 0 else [args.workers, 0]
        for workers in order:
            runs.append(timed(task, trainer, space, args.cells, args.seed, workers))
            print(f"{runs[-1]['path']:14s} {runs[-1]['wall_s']:8.1f} s  {runs[-1]['cell']}")
    here = [x["wall_s"] for x in runs if x["path"] == "here"]
    there = [x["wall_s"] for x in runs if x["path"] != "here"]
    summary = {
        "here_s": here,
        "workers_s": there,
        "speedup_per_repeat": [round(a / b, 2) for a, b in zip(here, there, strict=True)],
        "same_cell": len({x["cell"] for x in runs}) == 1,
    }
    print(summary)
    out = {
        "preset": args.preset,
        "seed": args.seed,
        "cells": args.cells,
        "workers": args.workers,
        "torch_threads": 1,
        "task": task.summary(),
        "runs": runs,
        "summary": summary,
        "machine": {"platform": platform.platform(), "torch": torch.__version__},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
