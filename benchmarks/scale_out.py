"""Scale-out of the SGEM search on Ray: wall clock, speed-up and worker utilisation.

Where a candidate takes minutes on a GPU, what matters is whether the search keeps its
workers busy. Each candidate here is a latency model (`sgem.execution.latency.LatencyModel`: a fixed
sleep, then a deterministic synthetic loss vector: two groups of clusters preferring
different ops), run through the real search (real surrogate, E- and M-steps, exploration,
finalisation) on a local Ray with 1, 2, 4, 8 and 16 workers on a two-core machine: they
only sleep. The local Ray is given 16 logical CPUs and each task asks for 16 / W of them, so
exactly W run at once (with 2 logical CPUs and fractional tasks the same W would run, but
Ray keeps at most num_cpus idle workers alive: the others would be killed between batches
and restarted, importing torch again, mid-search). Two modes:

* default: the synchronous search (train the S-step's few candidates, refit, propose);
* batch+pipeline: `batch_size` q candidates per S-step, chosen jointly, and pipelined
  S-steps (batch t+1 proposed while batch t trains).

Worker utilisation = total training time / (workers x wall clock of the whole search,
initial design and finalisation included). Every run at a mode gives the same search
(checked: routing, architectures and trainings are equal at every worker count).

Why these sizes. The benchmark shrinks a candidate from minutes to 0.5 s (+-30%), so the
search's own work must shrink too, or it would weigh ~100x more than on a real cluster.
Two costs matter. Per step, the training left in the queue when a batch is collected
(~q x latency / W) must outlast the refit and proposal (~0.5 s here with a 60-epoch refit;
~0.9 s with the default 150 epochs on a shared core). Once per run, all workers wait
through the first surrogate fit and the first proposal (2.4 s with the default 400 epochs,
~1 s with 150), and through the small finalisation batches. Hence epochs 150 / 60 (both
~2.5x below the defaults; `--first-epochs`, `--refit-epochs`), q = 32 and eight iterations,
which keep the whole benchmark near 9 minutes (the 1-worker runs dominate: every training
there is sequential).

    python benchmarks/scale_out.py [--latency 0.5] [--jitter 0.3] [--batch 32] [--depth 1]
        [--iterations 8] [--first-epochs 150] [--refit-epochs 60] [--workers 1 2 4 8 16]
        [--out benchmarks/results/scale_out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from sgem.bench.scale_out import add_speedups, plot, search_config, table
from sgem.data import make_toy_task
from sgem.execution.executors import RayExecutor, TrainJob, collect, job_seed, submit
from sgem.execution.latency import LatencyModel
from sgem.search import SGEM, SearchConfig
from sgem.space import TabularSpace

ROOT = Path(__file__).resolve().parents[1]
CPUS = 16  # logical CPUs of the local Ray; W tasks of CPUS / W each run at once
OVERHEAD_PHASES = (
    "surrogate_fit",
    "e_step",
    "routing_m_step",
    "architecture_m_step",
    "acquisition",
    "exploration",
    "checkpoint",
)


def configured(mode: str, args: argparse.Namespace) -> SearchConfig:
    return search_config(
        mode, args.iterations, args.batch, args.depth, args.first_epochs, args.refit_epochs
    )


def _started(seconds: float) -> int:
    """Runs on a Ray worker: import what training imports, hold the slot, say who ran."""
    import sgem.execution.executors
    import sgem.execution.latency  # noqa: F401

    time.sleep(seconds)
    return os.getpid()


def warm_up(executor: RayExecutor, task, space: TabularSpace, workers: int) -> None:
    """Start W worker processes (imports done) and their trainers before the clock starts:
    on a real cluster workers live for the whole search, and start-up is not what is
    measured here."""
    import ray

    remote = ray.remote(num_cpus=CPUS / workers)(_started)
    for _ in range(20):
        if len(set(ray.get([remote.remote(1.0) for _ in range(workers)]))) == workers:
            break
    rng = np.random.default_rng(123)
    jobs = []
    for _ in range(workers):
        arch, mask = space.sample(rng), np.ones(task.n_clusters, dtype=bool)
        jobs.append(TrainJob(arch, mask, job_seed(0, arch, mask)))
    collect(submit(executor, jobs))


def run_one(task, space: TabularSpace, mode: str, workers: int, args) -> dict:
    cfg = configured(mode, args)
    executor = RayExecutor(
        task,
        space,
        cfg.train,
        num_cpus=CPUS / workers,
        trainer_factory=LatencyModel(args.latency, args.jitter),
    )
    try:
        warm_up(executor, task, space, workers)
        t0 = time.perf_counter()
        result = SGEM(space, cfg, seed=args.seed, progress=False).fit(task, executor=executor)
        wall = time.perf_counter() - t0
    finally:
        executor.close()
    busy = float(sum(o.seconds for o in result.store.observations))
    overhead = sum(result.timing.get(p, 0.0) for p in OVERHEAD_PHASES)
    row = {
        "mode": mode,
        "workers": workers,
        "wall_s": round(wall, 2),
        "busy_s": round(busy, 2),
        "utilisation": round(busy / (workers * wall), 3),
        "n_trained": result.n_trained,
        "oracle_match": result.oracle_match,
        "search_overhead_per_iteration_s": round(overhead / cfg.n_iterations, 3),
        "waiting_for_trainings_s": round(result.timing.get("candidate_training", 0.0), 2),
        "timing": result.timing,
        "search": {
            "routing": result.assignment.tolist(),
            "architectures": [a.key for a in result.architectures],
            "trained": [row["trained"] for row in result.trace],
        },
    }
    print(
        f"{mode:>15} W={workers:>2}  wall {wall:6.1f} s  util {row['utilisation']:.2f}  "
        f"trained {result.n_trained}  match {result.oracle_match}  "
        f"search overhead/iter {row['search_overhead_per_iteration_s']:.2f} s",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per candidate")
    parser.add_argument("--jitter", type=float, default=0.3, help="+- fraction per candidate")
    parser.add_argument("--depth", type=int, default=1, help="pipeline depth (batch mode)")
    parser.add_argument("--batch", type=int, default=32, help="batch_size q (batch mode)")
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--first-epochs", type=int, default=150, help="surrogate epochs_first")
    parser.add_argument("--refit-epochs", type=int, default=60, help="surrogate epochs_refit")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--modes", nargs="+", default=["default", "batch+pipeline"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/scale_out.json")
    args = parser.parse_args()
    import ray

    torch.set_num_threads(1)  # the search process: one core (the other is Ray's)
    ray.init(num_cpus=CPUS, include_dashboard=False, log_to_driver=False)
    task, space = make_toy_task(args.seed), TabularSpace()
    started = time.perf_counter()
    rows = []
    try:
        for mode in args.modes:
            for workers in sorted(args.workers, reverse=True):  # start all workers first
                rows.append(run_one(task, space, mode, workers, args))
    finally:
        ray.shutdown()
    same = add_speedups(rows, args.modes)
    print("\n" + table(rows))
    print(f"same search at every worker count: {same}")
    report = {
        "latency_s": args.latency,
        "jitter": args.jitter,
        "pipeline_depth": args.depth,
        "batch_size": args.batch,
        "iterations": args.iterations,
        "first_epochs": args.first_epochs,
        "refit_epochs": args.refit_epochs,
        "ray_cpus": CPUS,
        "cpu_count": os.cpu_count(),
        "load_average_after": [round(v, 2) for v in os.getloadavg()],
        "benchmark_seconds": round(time.perf_counter() - started, 1),
        "same_search_at_every_worker_count": same,
        "config": {m: configured(m, args).to_dict() for m in args.modes},
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str))
    plot(rows, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
