"""A classifier's own probabilities on test rows no fit saw: raw, with the temperature only,
and calibrated (temperature and floor, `sgem.moe.calibration.fit_probability_calibration`),
side by side from the same fits. What `sgem fit --no-combination` and `sgem export` give:
the saved model's network outputs, without a combination's members.

Fits (`sgem.fit`, seeds as given): mixtures of two, three and four structures
(`sgem.bench.structure_recovery.write_csv`) with K known (part known_k), four structures
with `time_budget="3m"` (part budget3m: where one of 800 holdout rows had NLL 249 under
the MoE), and scikit-learn's bundled classification tables at `time_budget="2m"` (part
tables; 80 / 20 seeded splits, `sgem.bench.user_tables`).

    python benchmarks/probability_floor.py --seeds 0 1 2 3 4 --table-seeds 0 1 2
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
from pathlib import Path

import numpy as np

import sgem
from sgem.bench.machine import commit
from sgem.bench.probabilities import own_probabilities
from sgem.bench.structure_recovery import write_csv
from sgem.bench.user_tables import tables

RESULTS = Path(__file__).resolve().parent / "results"
MIXTURES = {
    "ring xor": ("ring", "xor"),
    "linear ring xor": ("linear", "ring", "xor"),
    "linear ring parabola xor": ("linear", "ring", "parabola", "xor"),
}
TABLES = ("breast_cancer", "digits", "wine", "iris")
PARTS = ("known_k", "budget3m", "tables")
KINDS = ("raw", "temperature_only", "calibrated")


def fitted(train: Path, test: Path, out: Path, target: str, seed: int, **options) -> dict:
    shutil.rmtree(out, ignore_errors=True)  # a fresh fit, never a finished run resumed
    sgem.fit(train, target=target, out=out, seed=seed, progress=False, **options)
    return own_probabilities(out, test, target)


def fits(args: argparse.Namespace, runs: Path):
    """(data, part, seed, scores) of every fit the arguments ask for."""
    jobs = []  # (data, part, seed, train, test, target, fit options)
    for seed in args.seeds:
        for name, kinds in MIXTURES.items():
            train, test = write_csv(seed, runs / f"{name.replace(' ', '-')}-{seed}", kinds)
            if "known_k" in args.parts:
                jobs.append(
                    (name, "known_k", seed, train, test, "label", {"n_experts": len(kinds)})
                )
            if "budget3m" in args.parts and len(kinds) == 4:
                jobs.append((name, "budget3m", seed, train, test, "label", {"time_budget": "3m"}))
    for seed in args.table_seeds if "tables" in args.parts else []:
        for name, (train, test) in tables(runs / "tables", seed, TABLES).items():
            jobs.append((name, "tables", seed, train, test, "target", {"time_budget": "2m"}))
    for name, part, seed, train, test, target, options in jobs:
        out = runs / f"{part}-{name.replace(' ', '-')}-{seed}"
        yield name, part, seed, fitted(train, test, out, target, seed, **options)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    p.add_argument("--table-seeds", type=int, nargs="*", default=[0, 1, 2])
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    p.add_argument("--runs", default="/tmp/sgem-probability-floor", help="run directories")
    p.add_argument("--out", default=str(RESULTS / "probability_floor.json"))
    args = p.parse_args()
    rows = []
    for data, part, seed, scores in fits(args, Path(args.runs)):
        rows.append({"data": data, "part": part, "seed": seed, **scores})
        shown = ", ".join(
            f"{k} {scores[k]['nll']} (worst {scores[k]['worst_row_nll']})" for k in KINDS
        )
        print(f"{data} {part} seed {seed}: accuracy {scores['accuracy']}, NLL {shown}", flush=True)
        save(rows, args)


def save(rows: list[dict], args: argparse.Namespace) -> None:
    """The JSON after every fit: every row, a flat table and the means per part."""
    table = [
        {
            "data": r["data"],
            "part": r["part"],
            "seed": r["seed"],
            "accuracy": r["accuracy"],
            **{f"nll_{k}": r[k]["nll"] for k in KINDS},
            **{f"worst_row_{k}": r[k]["worst_row_nll"] for k in KINDS},
            "ece_calibrated": r["calibrated"]["ece_15"],
            "floor": round(r["floor"], 4),
        }
        for r in rows
    ]
    summary = {
        part: {
            "fits": len(mine),
            **{
                f"mean_nll_{k}": round(float(np.mean([r[k]["nll"] for r in mine])), 4)
                for k in KINDS
            },
            **{
                f"mean_ece_{k}": round(float(np.mean([r[k]["ece_15"] for r in mine])), 4)
                for k in KINDS
            },
            "calibrated_better_than_temperature_only": sum(
                r["calibrated"]["nll"] < r["temperature_only"]["nll"] for r in mine
            ),
        }
        for part in args.parts
        if (mine := [r for r in rows if r["part"] == part])
    }
    doc = {
        "what": "a classifier's own probabilities on unseen test rows: raw, temperature only, "
        "calibrated (temperature and floor)",
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "command": "python benchmarks/probability_floor.py --seeds "
        + " ".join(map(str, args.seeds))
        + " --table-seeds "
        + " ".join(map(str, args.table_seeds))
        + " --parts "
        + " ".join(args.parts),
        "summary": summary,
        "table": table,
        "runs": rows,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
