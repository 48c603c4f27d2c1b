"""Would a 50/50 mixture of the tracked and the refitted final MoE beat either alone?

Why: the refit on train + validation is where some networks lose what validation saw
(benchmarks/refit_diagnosis.py), and keeping the tracked network instead helps some methods
and seeds and hurts others (ts_main_offline-*-norefit.json). A mixture of the two
predictive distributions can never score a worse NLL than the mean of the two (-log of a
mean is at most the mean of -logs), and an ensemble usually does better than that. This
retrains a saved row's final MoE (its partition and cells, warm starts) both ways, with the
same tracking runs, and scores on the test windows: each alone and the mixture, per step
log(0.5 p_refit + 0.5 p_tracked). No training protocol changes; a probe for the next step.

    python benchmarks/refit_ensemble.py benchmarks/results/ts_main_offline-seeds0-4.json \\
        --method geometry --seeds 0 --out /tmp/refit_ensemble_s0.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import numpy as np
import torch

from sgem.baselines.base import make_trainer
from sgem.bench.methods import baseline_setup
from sgem.bench.stats import window_bootstrap
from sgem.bench.tasks import build_task
from sgem.final.moe_fit import train_final_moe
from sgem.forecast import split_params, student_t_nll
from sgem.run.pipeline import build_space
from sgem.search.config import SearchConfig
from sgem.space.arch import Arch


def step_log_density(moe, task, trainer) -> torch.Tensor:
    """log p(y) of every test window and forecast step, shape (windows, horizon)."""
    x = torch.as_tensor(task.test.x, dtype=torch.float32, device=trainer.device)
    c = torch.as_tensor(task.test.cluster, device=trainer.device)
    y = torch.as_tensor(task.test.y, device=trainer.device)
    with torch.no_grad():
        out = moe.eval()(x, c).float()
    loc, scale, df = split_params(out)
    return -student_t_nll(loc, scale, df, y.to(loc.dtype)).double()


def one_seed(row: dict, cfg: dict, seed: int) -> dict:
    task = build_task(cfg["task"], seed)
    search_cfg = SearchConfig.from_dict(cfg["search"])
    space = build_space(cfg["space"])
    assignment = np.asarray(row["assignment"], dtype=np.int64)
    archs = [Arch.from_key(k) for k in row["architectures"]]
    logp: dict[str, torch.Tensor] = {}
    reported: dict[str, float] = {}
    for length in ("validation-warm", "validation-warm-norefit"):
        setup = baseline_setup(cfg, search_cfg, space, length, "cpu", seed=seed)
        trainer = make_trainer(task, setup, row["method"])
        moe, report = train_final_moe(
            task,
            trainer,
            assignment,
            archs,
            steps=setup.final_steps,
            seed=seed,
            epochs=setup.final_epochs,
            crps_samples=setup.crps_samples,
            length=length,
        )
        logp[length] = step_log_density(moe, task, trainer)
        reported[length] = float(report.test_nll)
    refit, tracked = logp["validation-warm"], logp["validation-warm-norefit"]
    mixture = torch.logsumexp(torch.stack([refit, tracked]), dim=0) - math.log(2.0)
    per_window = {
        "refit": -refit.mean(-1),
        "tracked": -tracked.mean(-1),
        "mixture": -mixture.mean(-1),
    }
    out = {k: float(v.mean()) for k, v in per_window.items()}
    out["reported"] = reported
    out["seed"] = seed
    out["saved_row_test_nll"] = row["test_nll"]
    diff = (per_window["mixture"] - per_window["refit"]).numpy()
    mean, lo, hi = window_bootstrap([diff], seed=seed)
    out["mixture_minus_refit"] = {"mean": mean, "ci95": [lo, hi]}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", help="a ts_main JSON whose rows hold assignment + architectures")
    p.add_argument("--method", default="geometry")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    saved = json.loads(Path(args.source).read_text())
    cfg = saved["meta"]["config"]
    rows = {r["seed"]: r for r in saved["rows"] if r["method"] == args.method}
    t0 = time.perf_counter()
    results = []
    for seed in args.seeds:
        res = one_seed(rows[seed], cfg, seed)
        res["method"] = args.method
        results.append(res)
        m = res["mixture_minus_refit"]
        print(
            f"{args.method} seed {seed}: refit {res['refit']:.4f}  tracked {res['tracked']:.4f}"
            f"  mixture {res['mixture']:.4f}  (mixture - refit {m['mean']:+.4f} "
            f"[{m['ci95'][0]:+.4f}, {m['ci95'][1]:+.4f}]; "
            f"saved row {res['saved_row_test_nll']:.4f})",
            flush=True,
        )
        record = {  # saved after every seed: a stopped run keeps what it measured
            "source": args.source,
            "rows": results,
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "machine": {"platform": platform.platform(), "torch": torch.__version__},
        }
        Path(args.out).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
