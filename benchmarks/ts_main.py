"""Table ts_main: SGEM against the forecasting baselines on the four-domain mixture.

Per seed, one task (windows, split and clustering depend on the seed), then SGEM (search +
final MoE) and every baseline under the same protocol (`sgem.baselines.BaselineSetup`:
same candidate training, same final retraining on train + validation, test once). Reports
test NLL and sample CRPS mean +- std over seeds, domain recovery (Hungarian agreement of the
routing with the majority-domain partition) and wall clock; writes JSON and markdown to
benchmarks/results/ts_main_<scale>.{json,md}, plus the operation-effect table (Table
ts_ops) pooled over the SGEM runs' observations. Progress is saved after every method, so
an interrupted benchmark keeps what it finished (`--resume` skips it).

Scales:
  smoke    a few minutes on 2 CPU cores: 800 windows, M = 8, tiny search (a wiring check)
  offline  the `ts-offline` preset (4000 windows, M = 20, K = 4) on the offline stand-ins
  paper    the `ts-paper` preset: real Monash files (--data-dir), 40,000 windows, M = 30,
           final retrain 50 epochs; for a GPU (--device cuda)
Any scale can be shrunk with --n-windows / --n-clusters / --iterations / --budget /
--steps / --final-steps; the JSON records the exact effective configuration.

    python benchmarks/ts_main.py --scale smoke --seeds 0
    python benchmarks/ts_main.py --scale offline --seeds 0 1 2 3 4
    python benchmarks/ts_main.py --scale paper --data-dir ~/monash --device cuda
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from sgem.analysis import RunObservations, format_op_table, op_effects
from sgem.baselines import BaselineSetup, get_baseline
from sgem.metrics import partition_match
from sgem.moe.cluster_gated import train_final_moe
from sgem.pipeline import build_space, build_task_from_config, load_config, merge
from sgem.search.config import SearchConfig
from sgem.search.sgem import SGEM
from sgem.train import resolve_device

BASELINES = [
    "naive",
    "seasonal_naive",
    "dlinear",
    "global_single",
    "random_moe",
    "geometry",
    "bestarch_x_k",
    "nas_moe",
    "mole",
    "oracle",
]
BLOCKS = [
    ("statistical / linear, no routing", ["naive", "seasonal_naive", "dlinear"]),
    (
        "cluster gate, no domain labels",
        ["global_single", "random_moe", "geometry", "bestarch_x_k", "nas_moe", "sgem"],
    ),
    ("own learnable routing", ["mole"]),
    ("oracle, uses domain labels", ["oracle"]),
]
LABELS = {
    "naive": "Naive",
    "seasonal_naive": "Seasonal naive",
    "dlinear": "DLinear (Student-t)",
    "global_single": "Global single (K=1)",
    "random_moe": "Random-MoE",
    "geometry": "Geometry routing",
    "bestarch_x_k": "BestArch x K",
    "nas_moe": "NAS-MoE",
    "sgem": "SGEM",
    "mole": "MoLE",
    "oracle": "Per-domain specialists",
}

SMOKE_OVERRIDES = {
    "task": {"n_windows": 800, "n_clusters": 8},
    "space": {"channels": 8},
    "search": {
        "n_iterations": 2,
        "n_init": 8,
        "pool_size": 30,
        "mc_masks": 4,
        "routing_steps": 10,
        "explore_every": 2,
        "refit_budget": 2,
        "final_candidates": 1,
        "finalist_budget": 1,
        "final_steps": 100,
        "train": {"steps": 30},
        "surrogate": {"epochs_first": 60, "epochs_refit": 20, "mc_samples": 5},
    },
    "crps_samples": 50,
}
DEFAULT_BUDGET = {"smoke": 4, "offline": 16, "paper": 60}


def scale_config(args: argparse.Namespace) -> dict:
    """The effective run config (pipeline format) of a scale plus command-line overrides."""
    if args.scale == "paper":
        cfg = load_config("ts-paper")
        if args.data_dir:
            cfg["task"]["directory"] = args.data_dir
    else:
        cfg = load_config("ts-offline")
        if args.scale == "smoke":
            cfg = merge(cfg, SMOKE_OVERRIDES)
    if args.n_windows:
        cfg["task"]["n_windows"] = args.n_windows
    if args.n_clusters:
        cfg["task"]["n_clusters"] = args.n_clusters
    if args.iterations:
        cfg["search"]["n_iterations"] = args.iterations
    if args.n_init:
        cfg["search"]["n_init"] = args.n_init
    if args.steps:
        cfg["search"]["train"]["steps"] = args.steps
    if args.final_steps:
        cfg["search"]["final_steps"] = args.final_steps
        cfg["final_epochs"] = None
    if args.device:
        cfg["device"] = args.device
    cfg["budget"] = args.budget or DEFAULT_BUDGET[args.scale]
    return cfg


def run_sgem(task, cfg: dict, seed: int, device: str) -> tuple[dict, RunObservations]:
    start = time.perf_counter()
    space = build_space(cfg["space"])
    search_cfg = SearchConfig.from_dict(cfg["search"])
    search = SGEM(space, search_cfg, seed=seed, progress=False, device=device)
    found = search.fit(task)
    _, report = train_final_moe(
        task,
        search.trainer_,
        found.assignment,
        found.architectures,
        steps=search_cfg.final_steps,
        seed=seed,
        epochs=cfg["final_epochs"],
        crps_samples=cfg["crps_samples"],
    )
    moe = report.to_json()
    names = task.meta["domain_names"]
    row = {
        "method": "sgem",
        "test_nll": moe["test_nll"],
        "test_crps": moe["test_crps"],
        "test_crps_closed_form": moe["test_crps_closed_form"],
        "per_domain_test_nll": {names[int(d)]: v for d, v in moe["per_domain_test_nll"].items()},
        "assignment": found.assignment.tolist(),
        "oracle_match": partition_match(found.assignment, task.oracle_partition),
        "architectures": [a.key for a in found.architectures],
        "n_trained": found.n_trained,
        "uses_domain_labels": False,
        "search_seconds": round(found.seconds, 3),
        "seconds": round(time.perf_counter() - start, 3),
    }
    store = found.store
    obs = RunObservations(
        list(store.archs),
        store.masks.astype(bool),
        store.losses,
        np.asarray(task.oracle_partition),
        list(names),
    )
    return row, obs


def summarise(rows: list[dict]) -> dict:
    """Per method: mean and std over seeds of every score."""
    out: dict[str, dict] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        entry: dict = {"seeds": [r["seed"] for r in mine]}
        for key in ("test_nll", "test_crps", "test_crps_closed_form", "oracle_match", "seconds"):
            values = [r[key] for r in mine if r.get(key) is not None]
            if values:
                entry[key] = {
                    "mean": statistics.fmean(values),
                    "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                }
        domains = mine[0].get("per_domain_test_nll") or {}
        entry["per_domain_test_nll"] = {
            d: statistics.fmean(r["per_domain_test_nll"][d] for r in mine) for d in domains
        }
        entry["n_trained"] = statistics.fmean(r.get("n_trained") or 0 for r in mine)
        out[method] = entry
    return out


def markdown(summary: dict, meta: dict) -> str:
    def fmt(entry: dict, key: str, digits: int = 3) -> str:
        v = entry.get(key)
        return "n/a" if v is None else f"{v['mean']:.{digits}f} ± {v['std']:.{digits}f}"

    n_seeds = len(meta["seeds"])
    cfg = meta["config"]
    search, train = cfg["search"], cfg["search"]["train"]
    lines = [
        f"# Table ts_main ({meta['tag']}: {meta['scale']} scale, {n_seeds} seed(s): "
        f"{meta['seeds']})",
        "",
        f"Task (last seed): {meta['task_summary']}",
        "",
        f"Scale: {cfg['task']['n_windows']} windows (L = {cfg['task']['context']}, H = "
        f"{cfg['task']['horizon']}), M = {cfg['task']['n_clusters']} requested, K = "
        f"{search['n_experts']}; candidate training {train['steps']} Adam steps of "
        f"{train['batch_size']} windows (lr {train['lr']}); SGEM {search['n_iterations']} EM "
        f"iterations, {search['n_init']} initial observations; baselines "
        f"{cfg['budget']} candidate trainings each; final retraining "
        + (
            f"{cfg['final_epochs']} epochs"
            if cfg.get("final_epochs")
            else f"{search['final_steps']} steps"
        )
        + f" per expert on train + validation. Device {meta['device']}, "
        f"{meta['torch_threads']} torch thread(s); benchmark wall clock "
        f"{meta['wall_seconds'] / 60:.1f} min.",
        "",
        "| method | test NLL | test CRPS | domain recovery | trainings | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for title, methods in BLOCKS:
        present = [m for m in methods if m in summary]
        if not present:
            continue
        lines.append(f"| *{title}* | | | | | |")
        for m in present:
            e = summary[m]
            lines.append(
                f"| {LABELS.get(m, m)} | {fmt(e, 'test_nll')} | {fmt(e, 'test_crps')} | "
                f"{fmt(e, 'oracle_match', 2)} | {e['n_trained']:.0f} | "
                f"{e['seconds']['mean']:.0f} |"
            )
    lines += [
        "",
        "NLL: mean Student-t negative log-likelihood per forecast step; CRPS: sample-based "
        f"({meta['config']['crps_samples']} samples per step); both in the per-window scaled "
        "units, lower is better. Domain recovery: Hungarian agreement of the cluster routing "
        "with the majority-domain partition. Trainings: candidate trainings spent on search.",
    ]
    if summary:
        domains = next(iter(summary.values()))["per_domain_test_nll"]
        if domains:
            lines += ["", "Per-domain test NLL (mean over seeds):", ""]
            lines.append("| method | " + " | ".join(domains) + " |")
            lines.append("|---|" + "---|" * len(domains))
            for m, e in summary.items():
                cells = " | ".join(
                    f"{e['per_domain_test_nll'].get(d, float('nan')):.3f}" for d in domains
                )
                lines.append(f"| {LABELS.get(m, m)} | {cells} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", choices=["smoke", "offline", "paper"], default="smoke")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--methods", nargs="+", default=["sgem", *BASELINES])
    p.add_argument("--data-dir", default=None, help="directory of the Monash .tsf files (paper)")
    p.add_argument("--device", default=None, help="cpu, cuda or auto (default: the preset's)")
    p.add_argument("--n-windows", type=int, default=None)
    p.add_argument("--n-clusters", type=int, default=None)
    p.add_argument("--iterations", type=int, default=None, help="SGEM EM iterations")
    p.add_argument("--n-init", type=int, default=None, help="SGEM initial observations")
    p.add_argument("--steps", type=int, default=None, help="candidate training steps")
    p.add_argument("--final-steps", type=int, default=None, help="final retraining steps")
    p.add_argument("--budget", type=int, default=None, help="baseline candidate trainings")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--tag", default=None, help="file name suffix (default: the scale)")
    p.add_argument("--resume", action="store_true", help="skip (seed, method) already saved")
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--render", default=None, help="only re-render the markdown of this JSON")
    args = p.parse_args()
    if args.render:
        data = json.loads(Path(args.render).read_text())
        md = Path(args.render).with_suffix(".md")
        md.write_text(markdown(data["summary"], data["meta"]))
        if "op_effects" in data:
            tag = data["meta"]["tag"]
            md.with_name(f"ts_ops_{tag}.md").write_text(
                f"# Table ts_ops ({tag}): operation effects from the SGEM runs' observations\n\n"
                + format_op_table(data["op_effects"])
                + "\n"
            )
        print(md.read_text())
        return

    torch.set_num_threads(args.threads)
    cfg = scale_config(args)
    device = str(resolve_device(cfg.get("device", "cpu")))
    tag = args.tag or args.scale
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / f"ts_main_{tag}.json", out_dir / f"ts_main_{tag}.md"
    ops_path = out_dir / f"ts_ops_{tag}.md"
    rows: list[dict] = []
    if args.resume and json_path.exists():
        rows = json.loads(json_path.read_text())["rows"]
    done = {(r["seed"], r["method"]) for r in rows}
    search_cfg = SearchConfig.from_dict(cfg["search"])
    space = build_space(cfg["space"])
    observations: list[RunObservations] = []
    task_summary = ""
    t_start = time.perf_counter()

    def save() -> dict:
        summary = summarise(rows)
        meta = {
            "scale": args.scale,
            "tag": tag,
            "seeds": args.seeds,
            "methods": args.methods,
            "config": cfg,
            "device": device,
            "torch_threads": args.threads,
            "task_summary": task_summary,
            "wall_seconds": round(time.perf_counter() - t_start, 1),
            "machine": {
                "platform": platform.platform(),
                "python": platform.python_version(),
                "torch": torch.__version__,
            },
        }
        json_path.write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
        md_path.write_text(markdown(summary, meta))
        return summary

    for seed in args.seeds:
        task = build_task_from_config(cfg["task"], seed)
        task_summary = (
            f"{task.summary()}; domains {task.meta['domain_names']}; mean purity "
            f"{task.meta['mean_purity']:.3f}; K = {search_cfg.n_experts}"
        )
        print(f"seed {seed}: {task_summary}", flush=True)
        setup = BaselineSetup(
            space=space,
            train=search_cfg.train,
            n_experts=search_cfg.n_experts,
            budget=cfg["budget"],
            final_steps=search_cfg.final_steps,
            final_epochs=cfg["final_epochs"],
            crps_samples=cfg["crps_samples"],
            device=device,
        )
        for method in args.methods:
            if (seed, method) in done:
                continue
            t0 = time.perf_counter()
            if method == "sgem":
                row, obs = run_sgem(task, cfg, seed, device)
                observations.append(obs)
            else:
                row = get_baseline(method).fit_evaluate(task, setup, seed)
            row["seed"] = seed
            rows.append(row)
            save()
            print(
                f"  {method:15s} NLL {row['test_nll']:.4f}  CRPS {row['test_crps']:.4f}  "
                f"recovery {row.get('oracle_match')}  {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
    summary = save()
    if observations:
        table = op_effects(observations, ops=list(cfg["space"]["ops"]), n_bootstrap=1000)
        ops_path.write_text(
            f"# Table ts_ops ({tag}): operation effects from the SGEM runs' observations\n\n"
            + format_op_table(table)
            + "\n"
        )
        data = json.loads(json_path.read_text())
        data["op_effects"] = table
        json_path.write_text(json.dumps(data, indent=1))
    print(md_path.read_text())
    for m, e in summary.items():
        print(m, e.get("test_nll"))


if __name__ == "__main__":
    main()
