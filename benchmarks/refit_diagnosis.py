"""Why does the best of more cells test worse? Validation, tracking and refit of global networks.

Why: on ts-offline the Geometry baseline with the best of ~141 random cells tests worse than
with the best of 16 on 5/5 seeds (benchmarks/results/matched_budget_offline-b141-all.json),
although the 141-cell stream starts with the same 16 cells and the global network of the
141-cell winner validates better on 4 of them. Either validation does not predict test for
the tracked network itself (selection noise), or the refit on train + validation (the
tracked length scaled to the larger set, `sgem.final.length`) is where the two cells
part. Per seed and cell (the winners of both budgets, read from two ts_main outputs), this
trains the cell's global network as the warm-start protocol does and reports: the tracking
run's validation NLL, the TRACKED network's test NLL (trained on train only, so validation
and test are exchangeable for it), and the REFITTED network's test NLL.

With --experts, the same one level down, for every expert of the method's partition (as
`final.moe_fit.train_final_moe` trains it): the expert's tracking run (fine-tuning the
global network's tracked state on the region's training windows, validation NLL on the
region's validation windows) and the test NLL on the region's test windows of (a) that
tracked expert, (b) the final expert (fine-tuning the global network REFITTED on train +
validation for the scaled length: the protocol) and (c) the same length fine-tuned on
train + validation from the global network's TRACKED state instead (an alternative refit).

    python benchmarks/refit_diagnosis.py --seeds 1 2 --out benchmarks/results/refit_diagnosis.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from sgem.bench.config import scale_defaults
from sgem.bench.tasks import build_task
from sgem.final.expert_fit import ExpertFit, ExpertJob, WarmStart, fit_expert
from sgem.final.length import resolve_length
from sgem.final.reference import score_networks
from sgem.final.warm_start import global_starts
from sgem.random_streams import expert_seed
from sgem.search.config import SearchConfig
from sgem.space.arch import Arch
from sgem.space.registry import build_space
from sgem.train.losses import per_sample_nll
from sgem.train.trainer import Trainer

RESULTS = Path(__file__).resolve().parent / "results"


def winners(path: Path, method: str) -> dict[int, dict]:
    rows = json.loads(path.read_text())["rows"]
    return {r["seed"]: r for r in rows if r["method"] == method}


def region_test_nll(task, trainer, net, region: np.ndarray) -> float:
    """Mean NLL of `net` on the test windows of the clusters in `region`."""
    inside = region[task.test.cluster]
    x = torch.as_tensor(task.test.x[inside], dtype=torch.float32)
    y = torch.as_tensor(task.test.y[inside])
    net.eval()
    with torch.no_grad():
        return float(per_sample_nll(trainer.predict(net, x), y, task.loss).double().mean())


def network(trainer, arch: Arch, state: dict) -> torch.nn.Module:
    """A network of `arch` with these weights (`ExpertFit.materialise` builds it)."""
    return ExpertFit(0, None, state=state).materialise(trainer, arch)[0]


def expert_rows(task, trainer, arch, start: WarmStart, assignment, seed, steps, epochs, rule):
    """Per expert region: tracked expert, final expert, and the final length fine-tuned from
    the global network's tracked state (module docstring)."""
    out = []
    for k in sorted(set(assignment.tolist())):
        region = assignment == k
        if region.all() or not region[task.test.cluster].any():
            continue
        job = ExpertJob(
            k,
            arch,
            region,
            expert_seed(seed, k),
            steps,
            epochs,
            rule,
            init=start,
            keep_track_state=True,
        )
        fit = fit_expert(task, trainer, job)
        if fit.length is None:
            continue
        tracked = network(trainer, arch, fit.track_state)
        final = fit.materialise(trainer, arch)[0]
        from_tracked = WarmStart(start.track_state, start.track_state, start.length)
        again = dataclasses.replace(
            job, known_length=fit.length, init=from_tracked, keep_track_state=False
        )
        refit_alt = fit_expert(task, trainer, again).materialise(trainer, arch)[0]
        out.append(
            {
                "expert": k,
                "val_windows": fit.length["n_val"],
                "test_windows": int(region[task.test.cluster].sum()),
                "best_step": fit.length["best_step"],
                "refit_steps": fit.length["refit_steps"],
                "val_nll_tracked": fit.length["best_val_nll"],
                "test_nll_tracked": region_test_nll(task, trainer, tracked, region),
                "test_nll_final": region_test_nll(task, trainer, final, region),
                "test_nll_refit_from_tracked": region_test_nll(task, trainer, refit_alt, region),
            }
        )
    return out


def rounded(row: dict) -> dict:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--small", default=str(RESULTS / "ts_main_offline-seeds0-4.json"))
    p.add_argument("--large", default=str(RESULTS / "ts_main_offline-b141.json"))
    p.add_argument("--method", default="geometry")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--out", default=str(RESULTS / "refit_diagnosis.json"))
    p.add_argument("--experts", action="store_true", help="also every expert (module docstring)")
    args = p.parse_args()
    torch.set_num_threads(1)
    cfg = scale_defaults("offline")
    search_cfg = SearchConfig.from_dict(cfg["search"])
    space = build_space(cfg["space"])
    small, large = winners(Path(args.small), args.method), winners(Path(args.large), args.method)
    rule = resolve_length("validation-warm")
    out: dict = {"small": args.small, "large": args.large, "method": args.method, "rows": []}
    for seed in args.seeds:
        task = build_task(cfg["task"], seed)
        trainer = Trainer(task, space, search_cfg.train, "cpu")
        cells = {
            "small": Arch.from_key(small[seed]["architectures"][0]),
            "large": Arch.from_key(large[seed]["architectures"][0]),
        }
        t0 = time.perf_counter()
        starts = global_starts(
            task,
            trainer,
            list(cells.values()),
            seed,
            steps=search_cfg.final_steps,
            epochs=cfg["final_epochs"],
            rule=rule,
        )
        for which, arch in cells.items():
            start = starts[arch.key]
            nets = {
                "tracked": network(trainer, arch, start.track_state),
                "refit": network(trainer, arch, start.refit_state),
            }
            test = score_networks(task, trainer, nets, crps_samples=20, seed=seed)
            row = {
                "seed": seed,
                "budget": which,
                "cell": arch.key,
                "val_nll_tracked": start.length["best_val_nll"] if start.length else None,
                "best_step": start.length["best_step"] if start.length else None,
                "refit_steps": start.length["refit_steps"] if start.length else None,
                "test_nll_tracked": test["tracked"]["test_nll"],
                "test_nll_refit": test["refit"]["test_nll"],
            }
            if args.experts:
                which_row = small[seed] if which == "small" else large[seed]
                row["experts"] = expert_rows(
                    task,
                    trainer,
                    arch,
                    start,
                    np.asarray(which_row["assignment"]),
                    seed,
                    search_cfg.final_steps,
                    cfg["final_epochs"],
                    rule,
                )
            out["rows"].append(row)
            print(rounded({k: v for k, v in row.items() if k != "experts"}))
            for e in row.get("experts", []):
                print("   ", rounded(e))
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
    by = {(r["seed"], r["budget"]): r for r in out["rows"]}
    for key in ("val_nll_tracked", "test_nll_tracked", "test_nll_refit"):
        d = [by[(s, "large")][key] - by[(s, "small")][key] for s in args.seeds]
        print(f"large minus small, {key}: {np.round(d, 4).tolist()}")
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
