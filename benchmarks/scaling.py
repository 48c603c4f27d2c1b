"""Scaling benchmark: how SGEM's quality and cost grow with M and K.

Two task families, ~100 points per cluster:

* ``toy``: the paper's two-cloud toy (`sgem.make_toy_task`) with M in {20, 40, 80, 160}
  (n_per_cloud = 50 M), K = 2;
* ``mixture``: `sgem.data.mixtures.make_mixture_task` with K in {2, 4, 8} groups of 2-D
  clouds that want different operations (M = 20 K clusters), searched with K experts.

Per run: oracle match, test accuracy of the final cluster-gated MoE, trainings, wall clock
per phase (initialisation, EM iterations, finalisation, final MoE), peak memory (RSS high
water mark of the run's own process: every run is a fresh subprocess), machine load.
Results are appended to the JSON after every run, so a partial grid is saved as it goes
(and labelled `complete: false` until every requested run is in).

    python benchmarks/scaling.py --family toy --m 20 40 80 --seeds 0 1 2
    python benchmarks/scaling.py --family mixture --k 4 --seeds 0 1 2
    python benchmarks/scaling.py --plot  # plot + markdown table from every results/scaling*.json
    python benchmarks/scaling.py --one toy 80 0  # one run in this process (prints JSON)

Search settings: the `toy` preset's search section, with `--set key=value` overrides
(e.g. ``--set scale_with_m=false`` for the paper's fixed budgets).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from sgem.bench.config import parse_value
from sgem.bench.scaling import load_results, machine, one_run, plot

OUT = Path("benchmarks/results/scaling.json")


def run_grid(args, overrides: dict) -> None:
    path = Path(args.out)
    data = load_results(path)
    sizes = args.m if args.family == "toy" else args.k
    plan = [(s, seed) for s in sizes for seed in args.seeds]
    data.setdefault("requested", []).append(
        {"family": args.family, "sizes": sizes, "seeds": args.seeds, "overrides": overrides}
    )
    for size, seed in plan:
        cmd = [sys.executable, __file__, "--one", args.family, str(size), str(seed)]
        cmd += [f"--set={k}={v}" for k, v in overrides.items()]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            row = {"family": args.family, "size": size, "seed": seed, "error": proc.stderr[-500:]}
        else:
            row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["process_seconds"] = round(time.perf_counter() - t0, 2)
        row["label"] = args.label
        data = load_results(path)  # other invocations may have appended meanwhile
        data["runs"].append(row)
        data["machine"] = machine()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1))
        print(
            f"{args.family} size={size} seed={seed} match={row.get('oracle_match')} "
            f"acc={row.get('test_accuracy')} trained={row.get('n_trained')} "
            f"s={row['process_seconds']} load={os.getloadavg()[0]:.2f}",
            flush=True,
        )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--family", choices=("toy", "mixture"), default="toy")
    p.add_argument("--m", type=int, nargs="+", default=[20, 40, 80, 160])
    p.add_argument("--k", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--set", action="append", default=[], help="search override key=value")
    p.add_argument("--label", default="default")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--one", nargs=3, metavar=("FAMILY", "SIZE", "SEED"))
    p.add_argument("--trace", action="store_true", help="with --one: keep the full trace")
    p.add_argument("--plot", action="store_true")
    args = p.parse_args()
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = parse_value(value)
    if args.one:
        family, size, seed = args.one
        row = one_run(family, int(size), int(seed), overrides, args.trace)
        print(json.dumps(row))
        return
    if args.plot:
        print(plot(Path(args.out)))
        return
    run_grid(args, overrides)


if __name__ == "__main__":
    main()
