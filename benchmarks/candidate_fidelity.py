"""Do candidate trainings rank cells the way the final model does?

Per seed, on the `ts-offline` task: the regions of the geometry partition (k-means of the
cluster centroids into K groups) and the region of all clusters; per region, `--archs`
random cells. Each (cell, region) pair is trained three ways:

- **short**: the candidate protocol of the earlier preset (100 Adam steps), the region's
  validation NLL after it;
- **early-stopped**: the candidate protocol `TrainConfig.early_stop_evals` (up to
  `--cap` steps, validation scored `--evals` times, the region's best evaluation, patience
  `--patience`);
- **final**: the final protocol of one expert (`final_length: validation`: the length chosen
  on validation, then retrained on the region's train + validation windows), scored on the
  region's TEST windows.

Reported: Spearman's rho within each region between each candidate score and the final
test NLL (the ranking the search needs), the steps the early-stopped candidates made and the
seconds per candidate of each protocol.

    python benchmarks/candidate_fidelity.py --seeds 0 --archs 6 --out results/x.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from sgem.baselines import geometry_partition
from sgem.final.length import ValidationLength, expert_length
from sgem.run.pipeline import build_space
from sgem.run.runconfig import RunConfig, build_task, load_run_config
from sgem.train.losses import per_sample_nll
from sgem.train.trainer import TrainConfig, Trainer


def region_mean(losses: np.ndarray, counts: np.ndarray, region: np.ndarray) -> float:
    w = counts * region
    return float(np.sum(w * losses) / w.sum())


def final_test_nll(trainer: Trainer, task, arch, region: np.ndarray, seed: int, base: int):
    """The final protocol of one expert on `region`: length chosen on validation, refit on
    train + validation, mean NLL on the region's test windows; and the chosen length."""

    def part(split):
        sel = region[split.cluster]
        return (
            torch.as_tensor(split.x[sel], dtype=torch.float32),
            torch.as_tensor(split.y[sel]),
        )

    (xt, yt), (xv, yv), (xs, ys) = part(task.train), part(task.val), part(task.test)
    if not (len(xt) and len(xv) and len(xs)):
        return None, None  # a region without windows in a split cannot be scored
    choice = expert_length(trainer, arch, xt, yt, xv, yv, seed, base, ValidationLength())
    model = trainer.fit(
        arch, torch.cat([xt, xv]), torch.cat([yt, yv]), seed=seed, steps=choice.refit_steps
    )
    out = trainer.predict(model, xs)
    return float(per_sample_nll(out, ys, task.loss).mean()), choice.refit_steps


def rho(a: list[float], b: list[float]) -> float | None:
    return round(float(spearmanr(a, b).statistic), 3) if len(a) >= 3 else None


def run_seed(
    seed: int, n_archs: int, cap: int, evals: int, patience: int, only: list[int] | None
) -> dict:
    cfg: RunConfig = load_run_config("ts-offline", seed=seed)
    task = build_task(cfg)
    space = build_space(cfg.space)
    base_train = dataclasses.replace(cfg.search.train, early_stop_evals=None, steps=100)
    stop_train = dataclasses.replace(
        base_train, steps=cap, early_stop_evals=evals, early_stop_patience=patience
    )
    short, stopped = Trainer(task, space, base_train), Trainer(task, space, stop_train)
    counts = np.bincount(task.val.cluster, minlength=task.n_clusters).astype(np.float64)
    k = cfg.search.n_experts
    geometry = geometry_partition(task, k, seed)
    regions = [geometry == e for e in range(k)] + [np.ones(task.n_clusters, bool)]
    rng = np.random.default_rng(seed)
    rows = []
    for r, region in enumerate(regions):
        archs = space.sample_many(n_archs, rng)  # drawn for every region: same cells per run
        if only is not None and r not in only:
            continue
        for i, arch in enumerate(archs):
            s = 1000 * seed + 100 * r + i
            t0 = time.perf_counter()
            a = region_mean(short.train(arch, region, s).losses, counts, region)
            t1 = time.perf_counter()
            b = region_mean(stopped.train(arch, region, s).losses, counts, region)
            t2 = time.perf_counter()
            final, refit = final_test_nll(short, task, arch, region, s, cfg.search.final_steps)
            if final is None:
                continue
            rows.append(
                {
                    "region": r,
                    "region_windows": int(task.cluster_sizes[region].sum()),
                    "arch": arch.key,
                    "short_val": a,
                    "early_stopped_val": b,
                    "final_test": final,
                    "final_refit_steps": refit,
                    "short_seconds": round(t1 - t0, 2),
                    "early_stopped_seconds": round(t2 - t1, 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    within = []
    for r in sorted({x["region"] for x in rows}):
        sub = [x for x in rows if x["region"] == r]
        fin = [x["final_test"] for x in sub]
        within.append(
            {
                "region": r,
                "short": rho([x["short_val"] for x in sub], fin),
                "early_stopped": rho([x["early_stopped_val"] for x in sub], fin),
            }
        )
    return {"seed": seed, "rows": rows, "within_region_spearman": within}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--archs", type=int, default=6, help="random cells per region")
    ap.add_argument("--cap", type=int, default=500, help="early-stopped candidates' max steps")
    ap.add_argument("--evals", type=int, default=10)
    ap.add_argument("--patience", type=int, default=3)
    ap.add_argument("--regions", type=int, nargs="*", help="only these region indices")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/candidate_fidelity.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    seeds = [
        run_seed(s, args.archs, args.cap, args.evals, args.patience, args.regions)
        for s in args.seeds
    ]
    summary = {
        kind: float(
            np.nanmean(
                [w[kind] for s in seeds for w in s["within_region_spearman"] if w[kind] is not None]
            )
        )
        for kind in ("short", "early_stopped")
    }
    out = {
        "benchmark": "candidate_fidelity",
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "mean_within_region_spearman": summary,
        "seeds": seeds,
        "seconds": round(time.perf_counter() - start, 1),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "train_defaults": dataclasses.asdict(TrainConfig()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(json.dumps(out["mean_within_region_spearman"]))


if __name__ == "__main__":
    main()
