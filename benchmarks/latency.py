"""Inference latency: `model.predict`, the exported ONNX graph under onnxruntime, and the
one-global-network reference through both paths; one row and 1024 rows.

Models: the toy (`sgem run toy`), a table with a categorical column and missing values and
a series forecaster (both `sgem.fit` with a seconds-long search and `combine=False`:
the MoE alone; a forecaster is otherwise saved combined with AutoETS / AutoTheta, which
ONNX export refuses), and the same table saved as a combination (`combined`: the MoE
beside logistic regression and gradient boosting, whose trees the graph walks too; and a
regression target on it, `combined_regression`: its mixture's quantiles by bisection). The
reference is the same saved model with ONE network on every cluster: the leaderboard's
global network where the saved model routes clusters to it (the toy), else the network of
the expert serving most clusters (same preprocessing, routing and calibration path).
Timing: torch and onnxruntime on 1 thread each (one request at a time); per case a
warm-up, then p50 / p99 over many repeats; rows/s = rows / p50. The ONNX time is the graph
run on prepared inputs (a service builds those arrays itself).

    python benchmarks/latency.py --seed 0         # prints, saves results/latency.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import shutil
import subprocess
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import sgem
from sgem.bench.machine import commit
from sgem.export import export_onnx
from sgem.export.feeds import OnnxRunner, onnx_feeds, parity
from sgem.moe.cluster_gated import ClusterGatedMoE
from sgem.moe.model import SgemModel

RESULTS = Path(__file__).resolve().parent / "results"
SEARCH = {  # a seconds-long search (tests/helpers.py TINY_SEARCH)
    "n_iterations": 2, "n_init": 8, "pool_size": 20, "mc_masks": 3, "routing_steps": 5,
    "acquisitions_per_expert": 1, "explore_every": 2, "refit_budget": 1,
    "final_candidates": 1, "finalist_budget": 1, "final_steps": 30, "train": {"steps": 20},
    "surrogate": {"epochs_first": 20, "epochs_refit": 5, "mc_samples": 3},
}  # fmt: skip


def _toy(runs: Path, seed: int):
    run = runs / f"toy-seed{seed}"
    shutil.rmtree(run, ignore_errors=True)  # a fresh run: never one of older code
    subprocess.run(["sgem", "run", "toy", "--seed", str(seed), "--out", str(run), "--quiet"],
                   check=True)  # fmt: skip
    rng = np.random.default_rng(seed)
    return sgem.load(run), lambda n: rng.normal(0, 3, (n, 2))


def _table(runs: Path, seed: int, combine: bool = False, target: str = "label"):
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(-3, 1, (300, 3)), rng.normal(3, 1, (300, 3))]
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(kind=rng.choice(list("uvw"), 600))
    frame["label"] = np.where(x[:, 0] + x[:, 1] + (frame["kind"] == "u") > 0, "yes", "no")
    frame["price"] = 10 + 2 * x[:, 0] + np.sin(2 * x[:, 1]) + rng.normal(0, 0.5, 600)
    frame.loc[::17, "a"] = np.nan
    run = runs / f"table{'-combined' if combine else ''}-{target}-seed{seed}"
    shutil.rmtree(run, ignore_errors=True)  # a fresh run: never one of older code
    data = frame.drop(columns={"label": "price", "price": "label"}[target])
    sgem.fit(data, target=target, out=run, progress=False, config={"search": SEARCH},
             seed=seed, combine=combine)  # fmt: skip
    rows = frame.drop(columns=["label", "price"])
    return sgem.load(run), lambda n: rows.sample(n, replace=True, random_state=seed)


def _series(runs: Path, seed: int):
    rng = np.random.default_rng(seed)
    series = [(1 + i) * (10 + np.sin(np.arange(260) * 2 * np.pi / 7)) + rng.normal(0, 0.2, 260)
              for i in range(6)]  # fmt: skip
    run = runs / f"series-seed{seed}"
    shutil.rmtree(run, ignore_errors=True)  # a fresh run: never one of older code
    long = pd.concat(
        pd.DataFrame({"unique_id": f"s{i}", "ds": pd.date_range("2020-01-01", periods=260),
                      "y": s}) for i, s in enumerate(series)
    )  # fmt: skip
    config = {
        "search": {**SEARCH, "n_experts": 2, "train": {"steps": 10, "batch_size": 32}},
        "task": {"n_windows": 300, "n_clusters": 4}, "space": {"channels": 4, "n_nodes": 2},
        "crps_samples": 10,
    }  # fmt: skip
    sgem.fit(long, horizon=7, out=run, progress=False, config=config, seed=seed, combine=False)
    return sgem.load(run), lambda n: [series[i % 6][-100:] for i in range(n)]


def reference(model: SgemModel) -> tuple[SgemModel, str]:
    """The saved model with one network on every cluster (see the module docstring)."""
    board = model.spec.info.get("leaderboard") or {}
    fallback = board.get("fallback_clusters") or []
    if fallback:
        k, what = model.assignment[fallback[0]], "the leaderboard's global network"
    else:
        k = int(np.bincount(model.assignment).argmax())
        what = f"expert {k}'s network (serves the most clusters)"
    spec = dataclasses.replace(model.spec, assignment=[0] * model.spec.n_clusters,
                               architectures=[model.spec.architectures[k]])  # fmt: skip
    moe = ClusterGatedMoE([model.moe.experts[k]], np.zeros(spec.n_clusters, dtype=int))
    ref = SgemModel(spec, moe, model.preprocessor, model.path)
    return ref, what


def _times(fn, repeats: int) -> dict:
    for _ in range(max(repeats // 10, 5)):
        fn()
    ts = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - start)
    ms = np.asarray(ts) * 1e3
    return {"p50_ms": float(np.median(ms)), "p99_ms": float(np.percentile(ms, 99))}


def measure(name: str, model: SgemModel, sample, out: Path, repeats: int):
    """(timing rows, {"reference": what it is, "parity_<network>": max |onnx - sgem|})."""
    ref, ref_what = reference(model)
    rows, facts = [], {"reference": ref_what}
    for label, m in (("sgem", model), ("reference", ref)):
        path = out / f"{name}-{label}.onnx"
        export_onnx(m, path)
        runner = OnnxRunner(path, threads=1)
        check = parity(m, path, sample(256))
        for n, reps in ((1, repeats), (1024, max(repeats // 20, 20))):
            x = sample(n)
            feeds = onnx_feeds(m, x)
            for path_name, fn in (("predict", partial(m.predict, x)),
                                  ("onnx", partial(runner.run, feeds))):  # fmt: skip
                t = _times(fn, reps)
                row = {"model": name, "network": label, "path": path_name, "rows": n, **t,
                       "rows_per_s": round(n / (t["p50_ms"] / 1e3)), "repeats": reps}  # fmt: skip
                rows.append(row)
                print(f"{name:6s} {label:9s} {path_name:7s} rows {n:4d}: p50 {t['p50_ms']:8.3f} "
                      f"ms  p99 {t['p99_ms']:8.3f} ms  {row['rows_per_s']:>9,} rows/s")  # fmt: skip
        facts[f"parity_{label}"] = max(check.values())
        print(f"  {name} {label}: max |onnx - sgem| on 256 rows {max(check.values()):.2e}")
    return rows, facts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=2000, help="one-row repeats")
    models = ["toy", "table", "series", "combined", "combined_regression"]
    p.add_argument("--models", nargs="+", default=models)
    p.add_argument("--runs", default="/tmp/sgem-latency", help="where the runs go")
    p.add_argument("--out", default=str(RESULTS / "latency.json"))
    args = p.parse_args()
    torch.set_num_threads(1)
    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    makers = {"toy": _toy, "table": _table, "series": _series}
    makers["combined"] = partial(_table, combine=True)
    makers["combined_regression"] = partial(_table, combine=True, target="price")
    rows, facts = [], {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the table contract's notes on sampled rows
        for name in args.models:
            model, sample = makers[name](runs, args.seed)
            timed, facts[name] = measure(name, model, sample, runs, args.repeats)
            rows += timed
    summary = {}
    for name in args.models:
        one = {(r["network"], r["path"]): r["p50_ms"] for r in rows
               if r["model"] == name and r["rows"] == 1}  # fmt: skip
        ratio = one[("sgem", "predict")] / one[("reference", "predict")]
        summary[name] = facts[name] | {
            "onnx_one_row_p50_ms": one[("sgem", "onnx")],
            "predict_one_row_over_reference": ratio,
        }
        print(f"{name}: ONNX one row p50 {one[('sgem', 'onnx')]:.3f} ms; predict one row "
              f"{ratio:.2f}x the reference's")  # fmt: skip
    doc = {
        "date": datetime.date.today().isoformat(),
        "commit": commit(short=False),
        "seed": args.seed,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "threads": "torch 1, onnxruntime intra-op 1",
        "summary": summary,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
