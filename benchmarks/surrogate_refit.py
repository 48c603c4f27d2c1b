"""How many warm-start epochs a surrogate refit needs: replay finished runs' observations.

For each run directory, the observations are replayed in the order the search made them:
before iteration t the surrogate is (re)fitted on everything from iterations < t, exactly as
the search does (first fit from scratch with `epochs_first`, then warm-started refits with
`epochs_refit`), and it predicts the per-cluster losses of iteration t's trainings, which
it has not seen. Reported per setting: Kendall tau and RMSE of those held-out predictions
(flattened over trainings x clusters, as the search's trace reports tau), and fit seconds.

    python benchmarks/surrogate_refit.py RUN_DIR [RUN_DIR ...] --refit 150 100 60 \\
        --out benchmarks/results/surrogate_refit.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import yaml

from sgem.search.store import read_completed
from sgem.space.registry import build_space
from sgem.surrogate.model import Surrogate, SurrogateConfig, kendall_tau


def replay(run_dir: Path, epochs_refit: int, epochs_first: int = 400, seed: int = 0) -> dict:
    config = yaml.safe_load((run_dir / "config.yaml").read_text())["run"]
    space = build_space(config["space"])
    obs = read_completed(run_dir / "store.sqlite")
    n_clusters = len(obs[0].mask)
    iterations = sorted({o.iteration for o in obs})
    sur_config = SurrogateConfig(epochs_first=epochs_first, epochs_refit=epochs_refit)
    sur = Surrogate(space, n_clusters, sur_config, seed=seed)
    taus, rmses, fit_s = [], [], 0.0
    for t in iterations[1:]:
        seen = [o for o in obs if o.iteration < t]
        new = [o for o in obs if o.iteration == t]
        start = time.perf_counter()
        sur.fit(
            [o.arch for o in seen],
            np.stack([o.mask for o in seen]).astype(float),
            np.stack([o.losses for o in seen]),
            seed=seed + t,
        )
        fit_s += time.perf_counter() - start
        pred = sur.predict([o.arch for o in new], np.stack([o.mask for o in new]).astype(float))
        truth = np.minimum(np.stack([o.losses for o in new]), sur.clip_value_)
        taus.append(kendall_tau(pred, truth))
        rmses.append(float(np.sqrt(np.mean((pred - truth) ** 2))))
    return {
        "run": str(run_dir),
        "epochs_refit": epochs_refit,
        "epochs_first": epochs_first,
        "fits": len(iterations) - 1,
        "mean_tau": float(np.nanmean(taus)),
        "mean_rmse": float(np.mean(rmses)),
        "fit_seconds": fit_s,
        "taus": taus,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="finished run directories")
    ap.add_argument("--refit", nargs="+", type=int, default=[150, 100, 60])
    ap.add_argument("--first", type=int, default=400, help="epochs of the first fit")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    for run in args.runs:
        for epochs in args.refit:
            row = replay(run, epochs, args.first)
            rows.append(row)
            print(
                f"{run.name:>12}  refit {epochs:4d}: tau {row['mean_tau']:.3f}  "
                f"rmse {row['mean_rmse']:.4f}  fits {row['fit_seconds']:.1f} s",
                flush=True,
            )
    summary = {}
    for epochs in args.refit:
        mine = [r for r in rows if r["epochs_refit"] == epochs]
        summary[str(epochs)] = {
            "mean_tau": float(np.mean([r["mean_tau"] for r in mine])),
            "mean_rmse": float(np.mean([r["mean_rmse"] for r in mine])),
            "fit_seconds": float(np.mean([r["fit_seconds"] for r in mine])),
        }
        print(f"refit {epochs}: {summary[str(epochs)]}")
    if args.out:
        doc = {
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
            "epochs_first": args.first,
            "summary": summary,
            "rows": rows,
        }
        args.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
