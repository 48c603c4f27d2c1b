"""Trained candidates per second: batched (one vectorised program) vs one-at-a-time.

Same jobs (architecture, cluster mask, seed), same process, same thread count; the jobs are
drawn like the search draws them (random cells, log-uniform mask sizes). Also reports the
largest relative difference of the per-cluster losses between the two paths.

    python benchmarks/batched_training.py [--jobs 64] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from sgem.data import make_toy_task
from sgem.execution.executors import job_seed
from sgem.search.masks import log_uniform_size_mask
from sgem.space import TabularSpace
from sgem.train import TrainConfig, Trainer
from sgem.train.batched import BatchedTabularTrainer


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/batched_training.json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    task = make_toy_task(args.seed)
    space = TabularSpace()
    trainer = Trainer(task, space, TrainConfig())
    rng = np.random.default_rng(args.seed)
    jobs = []
    for _ in range(args.jobs):
        arch, mask = space.sample(rng), log_uniform_size_mask(task.n_clusters, rng)
        jobs.append((arch, mask, job_seed(args.seed, arch, mask)))
    batched = BatchedTabularTrainer(trainer, max_batch=args.max_batch)
    trainer.train(*jobs[0])  # warm-up of both paths
    batched.train_many(jobs[:2])

    single_s, batched_s = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        ref = [trainer.train(a, m, s).losses for a, m, s in jobs]
        single_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = [o.losses for o in batched.train_many(jobs)]
        batched_s.append(time.perf_counter() - t0)

    no_dropout = [i for i, (a, _, _) in enumerate(jobs) if "dropout" not in a.ops]
    rel = [float(np.max(np.abs(ref[i] - got[i]) / (np.abs(ref[i]) + 1e-3))) for i in no_dropout]
    result = {
        "jobs": args.jobs,
        "threads": args.threads,
        "max_batch": args.max_batch,
        "steps_per_candidate": trainer.config.steps,
        "one_at_a_time_s": min(single_s),
        "batched_s": min(batched_s),
        "one_at_a_time_candidates_per_s": args.jobs / min(single_s),
        "batched_candidates_per_s": args.jobs / min(batched_s),
        "speedup": min(single_s) / min(batched_s),
        "max_rel_diff_no_dropout": max(rel),
        "median_rel_diff_no_dropout": float(np.median(rel)),
        "machine": {"platform": platform.platform(), "torch": str(torch.__version__)},
    }
    print(json.dumps(result, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
