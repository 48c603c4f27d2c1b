"""Probe: do experts warm-started from a global network beat experts trained from scratch?

Why: on ts-offline, Global single (one network on all windows) beats every routed MoE on
test NLL (ts_main_offline-es.md). If pooling is what the experts lack, an expert that starts
from the global solution and specialises on its region should win back the difference.

Per seed: the Geometry baseline's split and one cell (the best of `--budget` early-stopped
candidates on all clusters, as the baseline picks it). Three models, each tested on the
test windows WITHOUT the refit on train + validation (so validation is only used to stop):
- global: the cell trained on all training windows, early-stopped on all validation windows;
- scratch: per region, the cell trained from scratch on the region, early-stopped on it;
- warm: per region, the global network fine-tuned on the region, early-stopped on it.

    python benchmarks/warm_start.py --seeds 1 --out benchmarks/results/warm_start.json
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from sgem.baselines import best_single_architecture
from sgem.final.length import ValidationLength, track_validation
from sgem.methods.budget import MethodBudget
from sgem.run.pipeline import build_space
from sgem.run.runconfig import build_task, load_run_config
from sgem.search.geometry import geometry_partition
from sgem.train.losses import per_sample_nll
from sgem.train.trainer import Trainer, make_optimizer


def tensors(split, sel):
    return torch.as_tensor(split.x[sel], dtype=torch.float32), torch.as_tensor(split.y[sel])


def early_stopped(trainer: Trainer, model, xt, yt, xv, yv, seed: int, base: int, fresh=False):
    """Train `model` on (xt, yt), keep the state of the lowest validation NLL."""
    rule = ValidationLength()
    max_steps, every = rule.cap(base)
    gen = torch.Generator().manual_seed(seed)
    if fresh and hasattr(model, "data_init"):
        model.data_init(xt, gen)
    opt = make_optimizer(model.parameters(), trainer.config)
    bs = trainer.config.batch_size or len(xt)
    best = {"loss": float("inf"), "state": copy.deepcopy(model.state_dict())}

    def step(_i: int) -> None:
        idx = torch.randint(len(xt), (min(bs, len(xt)),), generator=gen)
        model.train()
        loss = per_sample_nll(model(xt[idx]), yt[idx], trainer.task.loss).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def val_loss() -> float:
        model.eval()
        with torch.no_grad():
            v = float(per_sample_nll(model(xv), yv, trainer.task.loss).double().mean())
        if v < best["loss"]:
            best["loss"], best["state"] = v, copy.deepcopy(model.state_dict())
        return v

    best_step, _, _, _ = track_validation(step, val_loss, max_steps, every, rule.patience)
    model.load_state_dict(best["state"])
    model.eval()
    return model, best_step


def test_nll(trainer: Trainer, model, xs, ys) -> np.ndarray:
    with torch.no_grad():
        nll = per_sample_nll(model(xs), ys, trainer.task.loss).double()
    return nll.reshape(len(xs), -1).mean(1).numpy()


def run_seed(seed: int, budget: int) -> dict:
    cfg = load_run_config("ts-offline", seed=seed)
    task, space = build_task(cfg), build_space(cfg.space)
    search = cfg.search
    trainer = Trainer(task, space, search.train)
    setup = MethodBudget(
        seed=seed, space=space, train=search.train, n_experts=search.n_experts, trainings=budget
    )
    arch, _ = best_single_architecture(task, setup)
    split = geometry_partition(task, search.n_experts, seed)
    base = search.final_steps
    every = np.ones(task.n_clusters, bool)
    torch.manual_seed(seed)
    glob = trainer.build(arch)
    xt, yt = tensors(task.train, every[task.train.cluster])
    xv, yv = tensors(task.val, every[task.val.cluster])
    glob, g_steps = early_stopped(trainer, glob, xt, yt, xv, yv, seed, base, fresh=True)
    xs, ys = tensors(task.test, every[task.test.cluster])
    per_window = {"global": test_nll(trainer, glob, xs, ys)}
    scratch = np.zeros(len(xs))
    warm = np.zeros(len(xs))
    steps: dict[str, list] = {"global": [g_steps], "scratch": [], "warm": []}
    for k in range(search.n_experts):
        region = split == k
        rt, rv, rs = (region[s.cluster] for s in (task.train, task.val, task.test))
        if not (rt.any() and rv.any() and rs.any()):
            continue
        (a, b), (c, d), (e, f) = (
            tensors(task.train, rt),
            tensors(task.val, rv),
            tensors(task.test, rs),
        )
        torch.manual_seed(seed + 1 + k)
        m0, s0 = early_stopped(
            trainer, trainer.build(arch), a, b, c, d, seed + 1 + k, base, fresh=True
        )
        m1, s1 = early_stopped(trainer, copy.deepcopy(glob), a, b, c, d, seed + 1 + k, base)
        scratch[rs] = test_nll(trainer, m0, e, f)
        warm[rs] = test_nll(trainer, m1, e, f)
        steps["scratch"].append(s0)
        steps["warm"].append(s1)
    per_window |= {"scratch": scratch, "warm": warm}
    out = {k: round(float(v.mean()), 4) for k, v in per_window.items()}
    d = warm - scratch
    rng = np.random.default_rng(0)
    boot = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)]
    return {
        "seed": seed,
        "arch": arch.key,
        "test_nll": out,
        "warm_minus_scratch": round(float(d.mean()), 4),
        "warm_minus_scratch_ci95": [round(float(np.quantile(boot, q)), 4) for q in (0.025, 0.975)],
        "steps": steps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/warm_start.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    rows = []
    for s in args.seeds:
        rows.append(run_seed(s, args.budget))
        print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "warm_start",
                "seeds": args.seeds,
                "budget": args.budget,
                "rows": rows,
                "seconds": round(time.perf_counter() - start, 1),
                "versions": {"python": platform.python_version(), "torch": torch.__version__},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
