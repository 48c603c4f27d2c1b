"""Toy-task ablations (paper appendix): full SGEM vs exploration off vs frozen routing vs
the scalar surrogate with load balancing (lambda = 1). Same seeds, same budget settings.

    python benchmarks/toy_ablations.py [--seeds 0 1 ...] [--variants full frozen ...] [--reuse]

With --reuse, a finished run directory of the same config is read back instead of rerun
(its own recorded wall clock is reported), e.g. the `full` variant from
benchmarks/toy_seeds.py's run directories copied into <rundirs>/full/.

Prints a per-seed line and a summary table (markdown), saves everything as JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

import yaml

from sgem.run.pipeline import run_experiment

VARIANTS: dict[str, dict] = {
    "full": {},
    "exploration off": {"search": {"explore": False, "jumps": False}},
    "frozen routing": {"search": {"freeze_routing": True}},
    "scalar surrogate + LB (λ=1)": {"search": {"scalar_surrogate": True, "lb_weight": 1.0}},
}


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-").lower()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--out", default="benchmarks/results/toy_ablations.json")
    p.add_argument("--rundirs", default="benchmarks/results/toy_ablations")
    p.add_argument("--reuse", action="store_true", help="read back finished run directories")
    args = p.parse_args()

    rows = []
    for name in args.variants:
        cfg_file = Path(args.rundirs) / f"{slug(name)}.yaml"
        cfg_file.parent.mkdir(parents=True, exist_ok=True)
        cfg_file.write_text(yaml.safe_dump(VARIANTS[name]))
        for seed in args.seeds:
            out = Path(args.rundirs) / slug(name) / f"seed{seed}"
            if not args.reuse:
                shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            res = run_experiment("toy", seed=seed, out=out, progress=False, config_file=cfg_file)
            seconds = res["wall_seconds"] if res.get("reused") else time.perf_counter() - t0
            row = {
                "variant": name,
                "seed": seed,
                "oracle_match": res["oracle_match"],
                "test_accuracy": res["test_accuracy"],
                "n_trained": res["n_trained"],
                "experts_used": len(set(res["routing"])),
                "seconds": round(seconds, 2),
                "reused": bool(res.get("reused")),
            }
            rows.append(row)
            print(
                f"{name:28s} seed {seed}  match {row['oracle_match']:.2f}  "
                f"acc {row['test_accuracy']:.4f}  experts used {row['experts_used']}  "
                f"trained {row['n_trained']}  {row['seconds']:.1f} s",
                flush=True,
            )

    summary = []
    lines = [
        "| variant | oracle match (mean ± std) | perfect match | test acc. (mean ± std) "
        "| trained | s / seed |",
        "|---|---|---|---|---|---|",
    ]
    for name in args.variants:
        rs = [r for r in rows if r["variant"] == name]
        match = [r["oracle_match"] for r in rs]
        acc = [r["test_accuracy"] for r in rs]
        sd = statistics.stdev if len(rs) > 1 else (lambda _: 0.0)
        s = {
            "variant": name,
            "seeds": [r["seed"] for r in rs],
            "match_mean": statistics.mean(match),
            "match_std": sd(match),
            "perfect_match": sum(m == 1.0 for m in match),
            "acc_mean": statistics.mean(acc),
            "acc_std": sd(acc),
            "trained_mean": statistics.mean(r["n_trained"] for r in rs),
            "seconds_mean": statistics.mean(r["seconds"] for r in rs),
        }
        summary.append(s)
        lines.append(
            f"| {name} | {s['match_mean']:.3f} ± {s['match_std']:.3f} | "
            f"{s['perfect_match']}/{len(rs)} | {s['acc_mean']:.4f} ± {s['acc_std']:.4f} | "
            f"{s['trained_mean']:.0f} | {s['seconds_mean']:.1f} |"
        )
    table = "\n".join(lines)
    print(table)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({"summary": summary, "rows": rows, "table": table}, indent=2)
    )
    Path(args.out).with_suffix(".md").write_text(table + "\n")


if __name__ == "__main__":
    main()
