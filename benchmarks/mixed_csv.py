"""`sgem fit` on a CSV of three mixed structures (linear, ring, XOR; 6 classes; two noise
columns; the structure is not a column) beside the Python-API search on the same rows, and
how a budgeted fit uses its budget. Per seed, side by side: `sgem fit --experts 3`,
`--time-budget 3m` (K chosen within the budget), `--time-budget 3m --experts 2` (what that
fit ran before), and the API (`build_task` on the raw columns, M = 30, toy preset,
`SearchConfig(n_experts=3)`, `train_final_moe`); 1000 rows per structure, a fresh 500 to test.

Recovery, on the test points under the *searched* partition (cluster -> expert): experts
matched one-to-one to structures maximising matched points (Hungarian); `recovery` =
matched / all points; `recovered`: every structure has >= 90 % of its test points on its
matched expert; `separated` (for K above the number of structures, where one-to-one matching
cannot hold): no expert mixes structures - every expert's test points are >= 90 % one
structure, and every structure has >= 90 % of its points on experts it dominates (a
structure may own two experts). Accuracy: the saved model's (the API: the final MoE's) on
the test file.

    python benchmarks/mixed_csv.py --seeds 0 1 2 3 4        # -> results/mixed_csv.json
    python benchmarks/mixed_csv.py --kinds linear ring parabola xor --parts budget3m experts \
        --out benchmarks/results/mixed_csv_4.json            # four structures, K = 4 known

`--kinds` sets the structures (their number: the known K of the `experts` part and the API).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sgem.bench.structure_recovery import each_k, recovery, saved_fit, write_csv

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("linear", "ring", "xor")
#: part -> `sgem fit` flags ("experts": --experts as many as the structures; "api": the
#: Python-API search with that K)
FITS = {
    "experts": [],
    "budget3m": ["--time-budget", "3m"],
    "budget3m_k2": ["--time-budget", "3m", "--experts", "2"],
}
PARTS = (*FITS, "api")
SHOWN = ("K", "recovery", "per_structure", "accuracy", "wall_seconds", "saved_model", "error")


def user_fit(train: Path, test: Path, out: Path, seed: int, flags: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)  # a fresh fit: never a finished run resumed
    cmd = ["sgem", "fit", str(train), "--target", "label", "--seed", str(seed)]
    cmd += ["--out", str(out), "--quiet", *flags]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start  # the whole command, process start included
    if proc.returncode != 0:
        return {"command": " ".join(cmd), "error": (proc.stderr or proc.stdout)[-800:]}
    result = json.loads((out / "result.json").read_text())
    budget, board = result.get("time_budget") or {}, result.get("leaderboard") or {}
    return {  # saved_model: the MoE, or a combination (with the MoE's weight)
        "command": " ".join(cmd),
        **saved_fit(out, test),
        "wall_seconds": round(wall, 1),
        "budget_seconds": budget.get("budget_seconds"),
        "why_it_ended": budget.get("why_it_ended"),
        "n_iterations": budget.get("n_iterations"),
        "experts_auto": result.get("experts_auto"),
        "each_k": each_k(out, test),  # every K the fit tried, on the same test file
        "saved_model": board.get("shipped", {}).get("model"),
    }


def api_search(train: Path, test: Path, seed: int, n_experts: int) -> dict:
    """The Python API's search on the same rows: raw columns, M = 30, the toy preset."""
    import torch

    from sgem.data.build import build_task
    from sgem.final.moe_fit import train_final_moe
    from sgem.run.pipeline import build_space, load_config
    from sgem.search import SGEM, SearchConfig

    start = time.perf_counter()
    cfg = load_config("toy")
    torch.set_num_threads(int(cfg["torch_threads"]))
    tr, te = pd.read_csv(train), pd.read_csv(test)
    cols = ["x1", "x2", "noise1", "noise2"]
    test_split = (te[cols].to_numpy(np.float32), te["label"].to_numpy(), te["structure"].to_numpy())
    x, y = tr[cols].to_numpy(np.float32), tr["label"].to_numpy()
    task = build_task(x, y, n_clusters=30, test=test_split, seed=seed, name="mixed")
    search_cfg = SearchConfig.from_dict({**cfg["search"], "n_experts": n_experts})
    search = SGEM(build_space(cfg["space"]), search_cfg, seed=seed, progress=False)
    found = search.fit(task)
    a, archs = found.assignment, found.architectures
    _, report = train_final_moe(task, search.trainer_, a, archs, search_cfg.final_steps, seed)
    expert = np.asarray(a)[task.test.cluster]
    return {
        "K": len(set(found.assignment.tolist())),
        "M": int(task.n_clusters),
        **recovery(task.test.source, expert),
        "accuracy": round(float(report.to_json()["test_accuracy"]), 4),
        "wall_seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    p.add_argument("--kinds", nargs="+", default=list(KINDS), help="the mixed structures")
    p.add_argument("--runs", default="/tmp/sgem-mixed-csv", help="run directories")
    p.add_argument("--out", default=str(RESULTS / "mixed_csv.json"), help="the JSON")
    args = p.parse_args()
    runs, rows, kinds = Path(args.runs), [], tuple(args.kinds)
    for seed in args.seeds:
        train, test = write_csv(seed, runs / f"data-seed{seed}", kinds)
        row: dict = {"seed": seed}
        for part, flags in ((p, f) for p, f in FITS.items() if p in args.parts):
            flags = flags or ["--experts", str(len(kinds))]
            row[part] = user_fit(train, test, runs / f"{part}-seed{seed}", seed, flags)
        if "api" in args.parts:
            row["api"] = api_search(train, test, seed, len(kinds))
        rows.append(row)
        for part in args.parts:
            shown = [f"{k} {v}" for k, v in row[part].items() if k in SHOWN]
            print(f"seed {seed} {part:11s}", *shown, flush=True)
        save(rows, args)


def flat(rows: list[dict]) -> list[dict]:
    """One row per (seed, part) for RESULTS.md."""
    keys = ("K", "recovery", "recovered", "separated", "accuracy", "wall_seconds")
    parts = [(r["seed"], p, v) for r in rows for p, v in r.items() if p != "seed"]
    return [{"seed": s, "part": p, **{k: v.get(k) for k in keys}} for s, p, v in parts]


def save(rows: list[dict], args: argparse.Namespace) -> None:  # the JSON after every seed
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    summary = {
        part: {
            "recovered_seeds": sum(bool(r[part].get("recovered")) for r in rows),
            "separated_seeds": sum(bool(r[part].get("separated")) for r in rows),
            **{
                f"mean_{key}": round(float(np.mean([r[part].get(key, np.nan) for r in rows])), 4)
                for key in ("accuracy", "wall_seconds")
            },
        }
        for part in args.parts
    }
    doc = {
        "what": f"sgem fit on a CSV of {' / '.join(args.kinds)} structures vs the Python-API "
        "search",
        "kinds": args.kinds,
        "date": datetime.date.today().isoformat(),
        "commit": git.stdout.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "seeds": args.seeds,
        "summary": summary,
        "table": flat(rows),
        "runs": rows,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    print(json.dumps(summary), f"saved {args.out}")


if __name__ == "__main__":
    main()
