"""One image table run (Table cifar_main): every method on every seed, saved as it goes.

The table is written after every method, so an interrupted run keeps what it finished and
`resume` skips it; each SGEM run also draws its cluster representatives
(`images_reps_<tag>_seed<seed>.png`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..data.images import build_image_task, downsample
from ..errors import SgemUserError
from ..methods.budget import MethodBudget
from ..report.image_figures import plot_cluster_representatives
from ..space.registry import build_space
from ..train import resolve_device
from .images import METHODS, learnable_gate, run_method, search_config
from .images_tables import markdown, summarise
from .machine import machine_info


@dataclass(frozen=True)
class ImagesRun:
    """What to run beside the scale's config: seeds, methods and where the table goes."""

    scale: str
    seeds: list[int]
    methods: list[str]
    learnable_gate: bool = True  # also each method's experts under a learnable gate
    tag: str | None = None  # file name suffix (default: the scale)
    resume: bool = False  # skip (seed, method) already saved
    out: Path = field(default_factory=lambda: Path("benchmarks/results"))
    save_models: Path | None = None  # also save each SGEM model as <dir>/sgem-seedN


def _print(text: str) -> None:
    print(text, flush=True)


def run_images(
    cfg: dict[str, Any], run: ImagesRun, say: Callable[[str], Any] | None = None
) -> Path:
    """Run the image table of run config `cfg` (`sgem.bench.images.load_scale`); returns
    the markdown file written beside images_main_<tag>.json in `run.out`."""
    say = say or _print
    if cfg["space"]["kind"] != "darts":
        raise SgemUserError("the image benchmark runs the DARTS image space (space.kind: darts)")
    torch.set_num_threads(int(cfg.get("torch_threads", 1)))
    device = str(resolve_device(cfg.get("device", "cpu")))
    tag = run.tag or run.scale
    out_dir = Path(run.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / f"images_main_{tag}.json", out_dir / f"images_main_{tag}.md"
    rows: list[dict] = []
    earlier_seconds = 0.0  # wall clock of the runs a resume continues
    tasks: dict[str, str] = {}
    if run.resume and json_path.exists():
        saved = json.loads(json_path.read_text())
        rows = saved["rows"]
        earlier_seconds = float(saved["meta"].get("wall_seconds", 0.0))
        tasks.update(saved["meta"].get("tasks", {}))
    done = {(r["seed"], r["method"]) for r in rows}
    space = build_space(cfg["space"])
    scfg = search_config(cfg)
    task_summary = ""
    t_start = time.perf_counter()

    def save() -> dict:
        summary = summarise(rows)
        meta = {
            "scale": run.scale,
            "tag": tag,
            "seeds": run.seeds,
            "methods": run.methods,
            "config": cfg,
            "device": device,
            "torch_threads": torch.get_num_threads(),
            "task_summary": task_summary,
            "tasks": tasks,
            "wall_seconds": round(earlier_seconds + time.perf_counter() - t_start, 1),
            "machine": machine_info(),
        }
        json_path.write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
        md_path.write_text(markdown(summary, meta, rows))
        return summary

    for seed in run.seeds:
        t0 = time.perf_counter()
        full = build_image_task(cfg["task"], seed)
        task = downsample(full, cfg["task"].get("image_size"))
        per_source = np.bincount(np.asarray(task.oracle_partition), minlength=2).tolist()
        task_summary = (
            f"{task.summary()}; images {task.input_shape}; mean purity "
            f"{task.meta['mean_purity']:.3f}; majority-source clusters {per_source}; "
            f"K = {scfg.n_experts}"
        )
        tasks[str(seed)] = task_summary
        say(f"seed {seed}: {task_summary} ({time.perf_counter() - t0:.0f} s)")
        setup = MethodBudget(
            seed=seed,
            space=space,
            train=scfg.train,
            n_experts=scfg.n_experts,
            trainings=int(cfg["baseline_budget"]),
            final_steps=scfg.final_steps,
            final_epochs=cfg.get("final_epochs"),
            device=device,
        )
        for method in run.methods:
            if (seed, method) in done:
                continue
            t0 = time.perf_counter()
            row = run_method(method, task, cfg, setup, run.save_models)
            if run.learnable_gate and method in cfg.get("learnable_gate", METHODS):
                row["learnable_gate"] = learnable_gate(task, setup, row)
            rows.append(row)
            save()
            lg = (row.get("learnable_gate") or {}).get("test_accuracy")
            say(
                f"  {method:34s} acc {row['test_accuracy']:.4f}  recovery "
                f"{row.get('oracle_match')}  learnable gate {lg}  "
                f"{time.perf_counter() - t0:.0f} s"
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
    return md_path
