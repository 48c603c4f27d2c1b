"""Table cifar_main: SGEM against the image baselines on a two-source image mixture.

Per seed: one task (mixture draw, split and clustering depend on the seed), then SGEM
(search + cluster-gated final MoE) and the baselines under one protocol
(`sgem.baselines.BaselineSetup`: the same candidate training, the same final retraining on
train + validation, test once): Random-MoE, DARTS x K, the DARTS oracle MoE (uses source
labels) and, with --decomposition, the decomposition ablation (Table decomp). For every
method the same experts are also trained under a learnable gate (`sgem.moe.learnable_gate`)
unless --no-learnable-gate. Reports cluster-gate test accuracy mean +- std over seeds,
source recovery (Hungarian agreement of the routing with the majority-source partition),
learnable-gate accuracy and wall clock; JSON + markdown to
benchmarks/results/images_main_<tag>.{json,md} after every method (--resume skips what is
saved), and the cluster-representatives figure of each SGEM run.

Scales (configs/images-<scale>.yaml; the JSON records the effective configuration):
  smoke    a few minutes on 2 CPU cores: 600 images, 16 x 16, M = 8 (a wiring check)
  offline  CIFAR-10 subset + MNIST from the shared data directory, downsampled to 16 x 16,
           small cells and budgets sized for a shared 2-core CPU
  paper    CIFAR-100 + SVHN (--data-dir with cifar-100-python/ and train_32x32.mat),
           42,000 images, M = 30, K = 2, init_channels 16, final retrain 100 epochs SGD
           lr 0.05 / momentum 0.9 / Nesterov / wd 3e-4 / cosine / batch 128 / clip 5;
           for a GPU (device auto)

    python benchmarks/images_main.py --scale smoke --seeds 0
    python benchmarks/images_main.py --scale offline --seeds 0 1 2
    python benchmarks/images_main.py --scale paper --data-dir ~/data --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from sgem import experiment
from sgem.baselines import BaselineSetup, get_baseline
from sgem.baselines.darts import DartsConfig, DartsOracleMoE, DartsXK
from sgem.baselines.decomposition import decomposition_settings
from sgem.data.images import build_image_task, downsample
from sgem.data.task import ClusteredTask
from sgem.moe.expert_fit import steps_for_epochs
from sgem.moe.learnable_gate import train_learnable_gate_moe
from sgem.pipeline import build_space
from sgem.report_images import plot_cluster_representatives
from sgem.search.config import SearchConfig
from sgem.space import Arch
from sgem.train import TrainConfig, Trainer, resolve_device

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
METHODS = ["random_moe", "darts_x_k", "sgem", "darts_oracle"]
SAVE_MODELS: Path | None = None  # --save-models
LABELS = {
    "random_moe": "Random-MoE",
    "darts_x_k": "DARTS×K (same arch)",
    "sgem": "**SGEM (ours)**",
    "darts_oracle": "DARTS oracle MoE *(uses source labels)*",
    "decomp_random_split_full_arch": "(i) random split, full-mix arch",
    "decomp_oracle_split_full_arch": "(i)/(ii) oracle split, full-mix arch",
    "decomp_oracle_split_source0_arch": "(ii) oracle split, source-0 arch",
    "decomp_oracle_split_source1_arch": "(ii) oracle split, source-1 arch",
}


# -- configuration ------------------------------------------------------------------------
def load_scale(scale: str) -> dict:
    path = CONFIGS / f"images-{scale}.yaml"
    if not path.exists():
        raise SystemExit(f"no configuration for scale {scale!r}: {path} is missing")
    return yaml.safe_load(path.read_text())


def search_config(cfg: dict) -> SearchConfig:
    return SearchConfig.from_dict(copy.deepcopy(cfg["search"]))


def darts_config(cfg: dict, train: TrainConfig) -> DartsConfig:
    d = dict(cfg["darts"])
    weights = dataclasses.replace(
        train,
        epochs=int(d.pop("epochs")),
        batch_size=int(d.pop("batch_size", train.minibatch)),
        lr=float(d.pop("lr", 0.025)),
        nesterov=False,
    )
    return DartsConfig(weights=weights, **d)


# -- methods --------------------------------------------------------------------------------
def run_sgem(task: ClusteredTask, cfg: dict, setup: BaselineSetup, seed: int) -> dict:
    result = experiment.run_sgem(
        task,
        setup.space,
        search_config(cfg),
        seed,
        final_epochs=setup.final_epochs,
        device=setup.device,
    )
    if SAVE_MODELS is not None:
        result.save(SAVE_MODELS / f"sgem-seed{seed}", task, setup.space)
    return result.row(task)


def run_method(method: str, task: ClusteredTask, cfg: dict, setup: BaselineSetup, seed: int):
    if method == "sgem":
        return run_sgem(task, cfg, setup, seed)
    dcfg = darts_config(cfg, setup.train)
    if method == "darts_x_k":
        return DartsXK(dcfg).fit_evaluate(task, setup, seed)
    if method == "darts_oracle":
        return DartsOracleMoE(dcfg).fit_evaluate(task, setup, seed)
    if method.startswith("decomp_"):
        for row in decomposition_settings(task, dcfg):
            if row.name == method:
                return row.fit_evaluate(task, setup, seed)
        raise SystemExit(f"unknown decomposition setting {method!r}")
    return get_baseline(method).fit_evaluate(task, setup, seed)


def learnable_gate(task: ClusteredTask, setup: BaselineSetup, row: dict, seed: int) -> dict:
    """The method's experts (its architectures) retrained jointly under a learnable gate."""
    trainer = Trainer(task, setup.space, setup.train, device=setup.device)
    n = len(task.train) + len(task.val)
    steps = (
        setup.final_steps
        if setup.final_epochs is None
        else steps_for_epochs(n, setup.final_epochs, setup.train.minibatch)
    )
    archs = [Arch.from_key(k) for k in row["architectures"]]
    _, report = train_learnable_gate_moe(task, trainer, archs, seed=seed, steps=steps)
    return report.to_json()


# -- summary --------------------------------------------------------------------------------
def _stats(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "n": len(values),
    }


def summarise(rows: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        lg = [r.get("learnable_gate") or {} for r in mine]
        out[method] = {
            "seeds": [r["seed"] for r in mine],
            "test_accuracy": _stats([r["test_accuracy"] for r in mine]),
            "oracle_match": _stats([r.get("oracle_match") for r in mine]),
            "learnable_gate_accuracy": _stats([g.get("test_accuracy") for g in lg]),
            "seconds": _stats([r["seconds"] for r in mine]),
            "learnable_gate_seconds": _stats([g.get("seconds") for g in lg]),
        }
    return out


def paired_differences(rows: list[dict], method: str = "sgem") -> dict[str, dict]:
    """Per-seed cluster-gate accuracy of `method` minus each other method's, on the same
    task: the comparison the seed-to-seed task variance does not blur."""
    by_seed = {(r["seed"], r["method"]): r["test_accuracy"] for r in rows}
    out: dict[str, dict] = {}
    for other in dict.fromkeys(r["method"] for r in rows):
        if other == method:
            continue
        diffs = [
            by_seed[(s, method)] - by_seed[(s, other)]
            for s in sorted({r["seed"] for r in rows})
            if (s, method) in by_seed and (s, other) in by_seed
        ]
        if diffs:
            out[other] = {**_stats(diffs), "wins": sum(d > 0 for d in diffs), "diffs": diffs}
    return out


def markdown(summary: dict, meta: dict, rows: list[dict]) -> str:
    def fmt(entry: dict, key: str, digits: int = 4) -> str:
        v = entry.get(key)
        return "n/a" if v is None else f"{v['mean']:.{digits}f} ± {v['std']:.{digits}f}"

    def pct(entry: dict, key: str) -> str:
        v = entry.get(key)
        return "n/a" if v is None else f"{100 * v['mean']:.0f}% ± {100 * v['std']:.0f}%"

    lines = [
        f"# Table cifar_main ({meta['scale']} scale, seeds {meta['seeds']})",
        "",
        f"Task: {meta['task_summary']}",
        "",
        f"Device: {meta['device']}, torch threads {meta['torch_threads']}; total wall clock "
        f"{meta['wall_seconds']:.0f} s.",
        "",
        "| method | test acc. (cluster gate) | source recovery | test acc. (learnable gate) "
        "| wall clock (s) |",
        "|---|---|---|---|---|",
    ]
    for method, e in summary.items():
        secs = e["seconds"]["mean"]
        if e.get("learnable_gate_seconds"):
            secs_txt = f"{secs:.0f} + {e['learnable_gate_seconds']['mean']:.0f}"
        else:
            secs_txt = f"{secs:.0f}"
        lines.append(
            f"| {LABELS.get(method, method)} | {fmt(e, 'test_accuracy')} | "
            f"{pct(e, 'oracle_match')} | {fmt(e, 'learnable_gate_accuracy')} | {secs_txt} |"
        )
    lines += [
        "",
        "Mean ± std over seeds. Source recovery: Hungarian agreement of the cluster routing "
        "with the majority-source partition (100% by construction for the oracle rows). "
        "Wall clock per method and seed: search + cluster-gated final MoE (+ the learnable-"
        "gate MoE).",
    ]
    paired = paired_differences(rows)
    if paired:
        lines += [
            "",
            "Paired per seed (same task): SGEM cluster-gate accuracy minus the method's — "
            + "; ".join(
                f"{LABELS.get(m, m).replace('*', '')}: {100 * v['mean']:+.1f} ± "
                f"{100 * v['std']:.1f} points, SGEM ahead on {v['wins']}/{v['n']} seeds"
                for m, v in paired.items()
            )
            + ".",
        ]
    if any(m.startswith("decomp_") for m in summary):
        lines += [
            "",
            "Decomposition rows (Table decomp): every expert uses one DARTS cell, searched on "
            "the full mixture or on one source's clusters; '(i) random split' uses the same "
            "split, cell and seeds as DARTS×K.",
        ]
    return "\n".join(lines) + "\n"


def combine(tags: list[str], out_dir: Path, tag: str) -> Path:
    """Merge the rows of several result files (e.g. seeds run in parallel processes) into
    one table; wall clock is the sum of the parts' (they may have overlapped in time)."""
    parts = []
    for part in tags:
        path = out_dir / f"images_main_{part}.json"
        if not path.exists():
            raise SystemExit(f"--combine: {path} does not exist (run that tag first)")
        parts.append(json.loads(path.read_text()))
    rows = [r for part in parts for r in part["rows"]]
    keys = [(r["seed"], r["method"]) for r in rows]
    if len(set(keys)) != len(keys):
        raise SystemExit("--combine: the parts share (seed, method) rows; combine disjoint seeds")
    meta = dict(parts[0]["meta"])
    meta.update(
        tag=tag,
        seeds=sorted({r["seed"] for r in rows}),
        wall_seconds=round(sum(p["meta"]["wall_seconds"] for p in parts), 1),
        combined_from=tags,
        tasks={k: v for p in parts for k, v in p["meta"].get("tasks", {}).items()},
    )
    summary = summarise(rows)
    json_path = out_dir / f"images_main_{tag}.json"
    json_path.write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
    md_path = out_dir / f"images_main_{tag}.md"
    md_path.write_text(markdown(summary, meta, rows))
    return md_path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", choices=["smoke", "offline", "paper"], default="smoke")
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--methods", nargs="+", default=None)
    p.add_argument("--decomposition", action="store_true", help="add the Table decomp rows")
    p.add_argument("--no-learnable-gate", action="store_true")
    p.add_argument("--data-dir", default=None, help="CIFAR-100 / SVHN directory (paper)")
    p.add_argument("--device", default=None, help="cpu, cuda or auto (default: the config's)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument(
        "--baseline-budget",
        type=int,
        default=None,
        help="candidate trainings per searching baseline (default: the config's), e.g. "
        "SGEM's count for a budget-matched Random-MoE",
    )
    p.add_argument("--tag", default=None, help="file name suffix (default: the scale)")
    p.add_argument("--resume", action="store_true", help="skip (seed, method) already saved")
    p.add_argument(
        "--combine",
        nargs="+",
        default=None,
        metavar="TAG",
        help="run nothing: merge the rows of images_main_<TAG>.json files (e.g. seeds run in "
        "parallel processes) into images_main_<--tag>.{json,md}",
    )
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument(
        "--save-models",
        default=None,
        metavar="DIR",
        help="also save each SGEM model as DIR/sgem-seedN (load with sgem.load)",
    )
    args = p.parse_args()
    global SAVE_MODELS
    SAVE_MODELS = Path(args.save_models) if args.save_models else None

    cfg = load_scale(args.scale)
    if args.data_dir:
        cfg["task"]["directory"] = args.data_dir
    if args.device:
        cfg["device"] = args.device
    if args.threads:
        cfg["torch_threads"] = args.threads
    if args.baseline_budget is not None:
        cfg["baseline_budget"] = args.baseline_budget
    seeds = args.seeds if args.seeds is not None else cfg["seeds"]
    methods = list(args.methods or METHODS)
    if args.decomposition:
        methods += [m for m in LABELS if m.startswith("decomp_") and m not in methods]
    torch.set_num_threads(int(cfg.get("torch_threads", 1)))
    device = str(resolve_device(cfg.get("device", "cpu")))
    tag = args.tag or args.scale
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.combine:
        print(combine(args.combine, out_dir, tag).read_text())
        return
    json_path, md_path = out_dir / f"images_main_{tag}.json", out_dir / f"images_main_{tag}.md"
    rows: list[dict] = []
    earlier_seconds = 0.0  # wall clock of the runs a --resume continues
    tasks: dict[str, str] = {}
    if args.resume and json_path.exists():
        saved = json.loads(json_path.read_text())
        rows = saved["rows"]
        earlier_seconds = float(saved["meta"].get("wall_seconds", 0.0))
        tasks.update(saved["meta"].get("tasks", {}))
    done = {(r["seed"], r["method"]) for r in rows}
    if cfg["space"]["kind"] != "darts":
        raise SystemExit("images_main.py runs the DARTS image space (space.kind: darts)")
    space = build_space(cfg["space"])
    scfg = search_config(cfg)
    task_summary = ""
    t_start = time.perf_counter()

    def save() -> dict:
        summary = summarise(rows)
        meta = {
            "scale": args.scale,
            "tag": tag,
            "seeds": seeds,
            "methods": methods,
            "config": cfg,
            "device": device,
            "torch_threads": torch.get_num_threads(),
            "task_summary": task_summary,
            "tasks": tasks,
            "wall_seconds": round(earlier_seconds + time.perf_counter() - t_start, 1),
            "machine": {
                "platform": platform.platform(),
                "python": platform.python_version(),
                "torch": torch.__version__,
            },
        }
        json_path.write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
        md_path.write_text(markdown(summary, meta, rows))
        return summary

    for seed in seeds:
        t0 = time.perf_counter()
        full = build_image_task(cfg["task"], seed)
        task = downsample(full, cfg["task"].get("image_size"))
        oracle = np.asarray(task.oracle_partition)
        per_source = np.bincount(oracle, minlength=2).tolist()
        task_summary = (
            f"{task.summary()}; images {task.input_shape}; mean purity "
            f"{task.meta['mean_purity']:.3f}; majority-source clusters {per_source}; "
            f"K = {scfg.n_experts}"
        )
        tasks[str(seed)] = task_summary
        print(f"seed {seed}: {task_summary} ({time.perf_counter() - t0:.0f} s)", flush=True)
        setup = BaselineSetup(
            space=space,
            train=scfg.train,
            n_experts=scfg.n_experts,
            budget=int(cfg["baseline_budget"]),
            final_steps=scfg.final_steps,
            final_epochs=cfg.get("final_epochs"),
            device=device,
        )
        for method in methods:
            if (seed, method) in done:
                continue
            t0 = time.perf_counter()
            row = run_method(method, task, cfg, setup, seed)
            row["seed"] = seed
            if not args.no_learnable_gate and method in cfg.get("learnable_gate", METHODS):
                row["learnable_gate"] = learnable_gate(task, setup, row, seed)
            rows.append(row)
            save()
            lg = (row.get("learnable_gate") or {}).get("test_accuracy")
            print(
                f"  {method:34s} acc {row['test_accuracy']:.4f}  recovery "
                f"{row.get('oracle_match')}  learnable gate {lg}  "
                f"{time.perf_counter() - t0:.0f} s",
                flush=True,
            )
            if method == "sgem":
                plot_cluster_representatives(
                    full,
                    np.asarray(row["assignment"]),
                    out_dir / f"images_reps_{tag}_seed{seed}.png",
                    clusters=range(min(15, task.n_clusters)),
                    expert_names=[f"E{k}" for k in range(scfg.n_experts)],
                    title=(
                        f"{task.name}, SGEM routing, seed {seed}, source recovery "
                        f"{row['oracle_match']:.0%}"
                    ),
                )
    save()
    print(md_path.read_text())


if __name__ == "__main__":
    main()
