"""Does the cluster-gated MoE beat one global network where groups want different ops?

A tabular check: a mixture of G >= 3 groups of 2-D clouds whose labelling rules
want different operations (linear, ring, parabola; `sgem.data.mixtures`), searched by SGEM
with K = G experts (the `toy` preset's search), against Global single: the best of B random
cells trained on all clusters (K = 1), with B = SGEM's own number of candidate trainings on
that seed (matched budget) and, for reference, B = 16. Every final network goes through the
same protocol (`sgem.final.run_final`: retrained on train + validation, tested once).

Prints and saves per seed: test accuracy and NLL of each, SGEM's oracle match and
trainings, and the paired differences (SGEM minus Global single).

    python benchmarks/mixture_vs_global.py --groups 3 --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from sgem.baselines import get_baseline
from sgem.data.mixtures import make_mixture_task
from sgem.methods.budget import MethodBudget
from sgem.run.experiment import run_sgem
from sgem.run.pipeline import load_config
from sgem.search.config import SearchConfig
from sgem.space.registry import build_space


def one_seed(groups: int, seed: int, small_budget: int) -> list[dict]:
    cfg = load_config("toy")
    torch.set_num_threads(int(cfg["torch_threads"]))
    task = make_mixture_task(seed, n_groups=groups)
    search_cfg = SearchConfig.from_dict({**cfg["search"], "n_experts": groups})
    space = build_space(cfg["space"])
    t0 = time.perf_counter()
    sgem = run_sgem(task, space, search_cfg, seed)
    rows = [sgem.row(task) | {"budget": sgem.n_trained, "seconds": time.perf_counter() - t0}]
    for budget in (sgem.n_trained, small_budget):
        setup = MethodBudget(
            seed=seed,
            space=space,
            train=search_cfg.train,
            n_experts=1,
            trainings=budget,
            final_steps=search_cfg.final_steps,
        )
        t0 = time.perf_counter()
        row = get_baseline("global_single").fit_evaluate(task, setup).row(task)
        rows.append(row | {"budget": budget, "seconds": time.perf_counter() - t0})
    for row in rows:
        row.update(seed=seed, groups=groups, M=task.n_clusters)
        print(
            f"seed {seed} {row['method']:14s} budget {row['budget']:4d}  acc "
            f"{row['test_accuracy']:.4f}  NLL {row['test_nll']:.4f}  oracle "
            f"{row.get('oracle_match')}  {row['seconds']:.0f} s",
            flush=True,
        )
    return rows


def paired(rows: list[dict]) -> dict:
    """SGEM minus Global single (matched budget and the small one), per seed."""
    out = {}
    seeds = sorted({r["seed"] for r in rows})
    for label, pick in (("matched", 0), ("small", 1)):
        diffs = {"accuracy": [], "nll": []}
        for seed in seeds:
            mine = [r for r in rows if r["seed"] == seed]
            sgem = next(r for r in mine if r["method"] == "sgem")
            other = [r for r in mine if r["method"] == "global_single"][pick]
            diffs["accuracy"].append(sgem["test_accuracy"] - other["test_accuracy"])
            diffs["nll"].append(sgem["test_nll"] - other["test_nll"])
        out[label] = {
            "accuracy_diff": diffs["accuracy"],
            "nll_diff": diffs["nll"],
            "sgem_more_accurate_on": sum(d > 0 for d in diffs["accuracy"]),
            "sgem_lower_nll_on": sum(d < 0 for d in diffs["nll"]),
            "seeds": len(seeds),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=3)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--small-budget", type=int, default=16)
    p.add_argument("--out", default="benchmarks/results/mixture_vs_global.json")
    args = p.parse_args()
    if args.groups < 3:
        p.error("the check is about three or more groups: --groups >= 3")
    rows: list[dict] = []
    started = time.perf_counter()
    for seed in args.seeds:
        rows += one_seed(args.groups, seed, args.small_budget)
        result = {
            "groups": args.groups,
            "seeds": args.seeds,
            "rows": rows,
            "paired": paired(rows),
            "wall_seconds": round(time.perf_counter() - started, 1),
            "machine": {"platform": platform.platform(), "torch": torch.__version__},
        }
        Path(args.out).write_text(json.dumps(result, indent=1, default=_json))
    for label, entry in result["paired"].items():
        print(
            f"{label}: SGEM more accurate on {entry['sgem_more_accurate_on']}/{entry['seeds']}, "
            f"lower NLL on {entry['sgem_lower_nll_on']}/{entry['seeds']}; accuracy diff "
            f"{np.round(entry['accuracy_diff'], 4).tolist()}"
        )


def _json(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(type(value))


if __name__ == "__main__":
    main()
