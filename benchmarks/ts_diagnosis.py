"""Why SGEM's forecasting MoE is not ahead of geometry routing.

Per seed, on a finished `sgem run ts-offline` (made here when missing):

(a) **Does the search rank like the final model?** For (architecture, region) pairs the
    search really trained on exactly a region of a finalist partition, the search-time
    validation NLL of the region (short candidate training on the training windows) against
    the test NLL of the same pair under the final protocol (retrained from scratch on the
    region's train + validation windows for `final_steps`, as every expert of the final MoE
    is). Spearman's rho and Kendall's tau, over all pairs and within regions.
(b) **The final models**, per domain: SGEM's partition with SGEM's cells; SGEM's partition
    with the best single cell x K; the geometry partition (k-means of the cluster
    centroids) with the best single cell x K.
(c) **What SGEM moves away from geometry**: the clusters whose expert differs from the
    geometry partition's (after the best relabelling), with size and majority domain.

    python benchmarks/ts_diagnosis.py --seeds 0 1 [--pairs 24] [--runs runs/ts-diagnosis]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from sgem.baselines import best_single_architecture, geometry_partition
from sgem.bench.stats import rank_agreement
from sgem.final import FinalProtocol, run_final
from sgem.methods.budget import MethodBudget
from sgem.run.pipeline import build_space, run_experiment
from sgem.run.runconfig import RunConfig, build_task
from sgem.run.rundir import RunDirectory
from sgem.search.exploration import align_labels
from sgem.search.store import read_completed
from sgem.space.arch import Arch
from sgem.train.losses import per_sample_nll
from sgem.train.trainer import Trainer


def region_test_nll(trainer: Trainer, task, arch: Arch, region: np.ndarray, seed: int, steps: int):
    """Test NLL of `arch` retrained on the region's train + validation windows (the final
    protocol of one expert), averaged over the region's test windows."""
    x = np.concatenate([task.train.x, task.val.x])
    y = np.concatenate([task.train.y, task.val.y])
    c = np.concatenate([task.train.cluster, task.val.cluster])
    sel, test = region[c], region[task.test.cluster]
    if not sel.any() or not test.any():
        return None
    model = trainer.fit(
        arch,
        torch.as_tensor(x[sel], dtype=torch.float32),
        torch.as_tensor(y[sel]),
        seed=seed,
        steps=steps,
    )
    out = trainer.predict(model, torch.as_tensor(task.test.x[test], dtype=torch.float32))
    return float(per_sample_nll(out, torch.as_tensor(task.test.y[test]), task.loss).mean())


def pick_pairs(observations, regions: list[np.ndarray], sizes: np.ndarray, per_region: int):
    """Per region, up to `per_region` distinct archs trained on exactly it, spread evenly
    over the range of their search-time losses (best, worst and between)."""
    pairs = []
    for r, region in enumerate(regions):
        seen, rows = set(), []
        for o in observations:
            if np.array_equal(o.mask, region) and o.arch not in seen:
                seen.add(o.arch)
                w = sizes[region]
                rows.append((float(np.sum(w * o.losses[region]) / w.sum()), o.arch))
        rows.sort(key=lambda t: t[0])
        if len(rows) > per_region:
            idx = np.unique(np.linspace(0, len(rows) - 1, per_region).round().astype(int))
            rows = [rows[i] for i in idx]
        pairs += [(r, loss, arch) for loss, arch in rows]
    return pairs


def diagnose(seed: int, runs: Path, per_region: int) -> dict:
    run_dir = runs / f"ts-offline-seed{seed}"
    result = run_experiment("ts-offline", seed=seed, out=run_dir, progress=False)
    cfg = RunConfig.from_dict(RunDirectory(run_dir).read_config()["run"])
    task = build_task(cfg)  # the run's own task (deterministic in its seed)
    space = build_space(cfg.space)
    search = cfg.search
    k = search.n_experts
    trainer = Trainer(task, space, search.train)
    observations = read_completed(run_dir / "store.sqlite", task.n_clusters)
    sizes = task.cluster_sizes.astype(np.float64)
    assignment = np.asarray(result["routing"])
    finalists = [np.asarray(f["partition"]) for f in result["selection"].get("finalists", [])]
    regions, keys = [], set()
    for partition in [assignment, *finalists]:
        for e in range(k):
            region = partition == e
            if region.any() and region.tobytes() not in keys:
                keys.add(region.tobytes())
                regions.append(region)

    # (a) search-time vs final-protocol ranking of (architecture, region) pairs
    pairs = pick_pairs(observations, regions, sizes, per_region)
    rows = []
    for r, search_loss, arch in pairs:
        final = region_test_nll(trainer, task, arch, regions[r], seed, search.final_steps)
        if final is not None:
            rows.append({"region": r, "arch": arch.key, "search_val": search_loss, "final": final})

    def agreement(sel: list[dict]) -> dict:
        return rank_agreement([x["search_val"] for x in sel], [x["final"] for x in sel])

    within = [agreement([x for x in rows if x["region"] == r]) for r in range(len(regions))]
    overall = agreement(rows)

    # (b) final models; (c) clusters moved away from geometry
    setup = MethodBudget(
        seed=seed,
        space=space,
        train=search.train,
        n_experts=k,
        trainings=16,
        final_steps=search.final_steps,
        crps_samples=cfg.crps_samples,
    )
    best, _ = best_single_architecture(task, setup)
    geometry = align_labels(geometry_partition(task, k, seed), assignment, k)
    sgem_archs = [Arch.from_json(a) for a in result["architectures"]]
    models = {}
    for name, partition, archs in (
        ("sgem partition + sgem cells", assignment, sgem_archs),
        ("sgem partition + best single x K", assignment, [best] * k),
        ("geometry partition + best single x K", geometry, [best] * k),
    ):
        protocol = FinalProtocol(search.final_steps, crps_samples=cfg.crps_samples)
        row = run_final(task, trainer, partition, archs, protocol, seed=seed, method=name)
        row = row.row(task)
        models[name] = {k: row.get(k) for k in ("test_nll", "test_crps", "per_domain_test_nll")}
    names = task.meta.get("domain_names")
    moved = [
        {
            "cluster": int(m),
            "size": int(sizes[m]),
            "majority_domain": names[int(task.oracle_partition[m])] if names else None,
            "sgem_expert": int(assignment[m]),
            "geometry_expert": int(geometry[m]),
        }
        for m in np.flatnonzero(assignment != geometry)
    ]
    return {
        "seed": seed,
        "run_dir": str(run_dir),
        "sgem_oracle_match": result.get("oracle_match"),
        "best_single_arch": best.key,
        "pairs": rows,
        "rank_agreement": {"overall": overall, "within_regions": within},
        "final_models": models,
        "moved_from_geometry": moved,
        "moved_share_of_windows": round(float(sum(x["size"] for x in moved) / sizes.sum()), 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--pairs", type=int, default=6, help="(arch, region) pairs per region")
    p.add_argument("--runs", default="runs/ts-diagnosis")
    p.add_argument("--out", default="benchmarks/results/ts_diagnosis.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    out = {"meta": {"machine": platform.platform(), "started": time.ctime()}, "seeds": []}
    for seed in args.seeds:
        t0 = time.perf_counter()
        res = diagnose(seed, Path(args.runs), args.pairs)
        res["seconds"] = round(time.perf_counter() - t0, 1)
        out["seeds"].append(res)
        ra = res["rank_agreement"]["overall"]
        print(
            f"seed {seed}: pairs {ra['n']}, search vs final rank: Spearman {ra['spearman']}, "
            f"Kendall {ra['kendall']}; moved from geometry: {len(res['moved_from_geometry'])} "
            f"clusters ({res['moved_share_of_windows']:.0%} of windows)",
            flush=True,
        )
        for name, m in res["final_models"].items():
            print(f"  {name:40s} test NLL {m['test_nll']:.4f}  CRPS {m['test_crps']:.4f}")
        Path(args.out).write_text(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
