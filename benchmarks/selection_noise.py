"""How far can validation separate SGEM's final choices? The noise floor of 600 windows.

Why: on ts-offline SGEM is ahead of the Geometry baseline (at its own 16 trainings) on
3 of 5 seeds, and a rule that shrinks SGEM's last choices toward the baseline's (keep the
champion cell unless a region's own cell is better by more than `z` paired standard errors,
the one-standard-error rule of CART and glmnet) was a candidate fix. Before building it,
this reads what the saved runs already hold:

1. per seed, SGEM's and the Geometry baseline's final-protocol validation NLL (each
   expert's warm tracking run at its chosen length, weighted by its validation windows)
   against their test NLL, with the paired test difference's standard error over windows:
   does validation prefer the method test prefers, and are the misses within noise?
2. per region (from two replays of one partition, SGEM's own cells and the champion cell,
   `cell_choice_emulation.py`'s inputs): the own-minus-champion margin on validation and on
   test, and the test margin's paired standard error. The runs keep only the validation
   mean, so the rule's standard error is estimated from the test windows of the same region
   (the split is random and stratified, so validation and test windows are exchangeable and
   of equal size); then the test NLL a `z`-SE rule would have reached, read off exactly
   (each window is scored by its own expert only), for z in `--z`.
3. per region of the geometry partition, the same for two champion cells: the Geometry
   baseline's winner of 16 random cells and its winner of ~141 (`--large`, the
   matched-budget run): would offering an expert more than one champion, each judged on the
   region's validation windows, pick the better one?

    python benchmarks/selection_noise.py --out benchmarks/results/selection_noise.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from sgem.bench.stats import paired_se, seed_margins, sign_agreement
from sgem.bench.tasks import build_task

RESULTS = Path(__file__).resolve().parent / "results"


def print_regions(title: str, found: dict, extra) -> None:
    """A region table's lines: both margins and `extra(region)`, then the sign agreement."""
    print(title)
    for r in found["regions"]:
        print(
            f"  seed {r['seed']} expert {r['expert']}: validation {r['val_margin']:+.4f}  "
            f"test {r['test_margin']:+.4f}  {extra(r)}"
        )
    print(f"sign agreement validation vs test: {found['sign_agreement']}")


def region_level(own_path: Path, champion_path: Path, zs: list[float]) -> dict:
    """Own cell vs champion cell per region (module docstring, item 2)."""
    own = json.loads(own_path.read_text())
    champion_rows = json.loads(champion_path.read_text())["rows"]
    cfg = own["meta"]["config"]
    by = {(r["seed"], r["method"]): r for r in own["rows"]}
    regions, rules = [], {str(z): [] for z in zs}
    for champ in champion_rows:
        seed = champ["seed"]
        mine = by[(seed, "sgem")]
        assert mine["assignment"] == champ["assignment"], "the two replays must share a partition"
        task = build_task(cfg["task"], seed)
        expert_of = np.asarray(mine["assignment"])[task.test.cluster]
        a = np.asarray(mine["test_nll_per_window"])
        b = np.asarray(champ["test_nll_per_window"])
        picks = {str(z): b.copy() for z in zs}
        for k, (fa, fb) in enumerate(zip(mine["final_length"], champ["final_length"], strict=True)):
            inside = expert_of == k
            if fa is None or fb is None or not inside.any():
                continue
            se = paired_se(a[inside], b[inside])
            val_margin = fa["best_val_nll"] - fb["best_val_nll"]
            regions.append(
                {
                    "seed": seed,
                    "expert": k,
                    "own_cell": mine["architectures"][k],
                    "test_windows": int(inside.sum()),
                    "val_margin": val_margin,
                    "test_margin": float((a[inside] - b[inside]).mean()),
                    "se_estimate": se,
                }
            )
            for z in zs:  # own cell only when better by more than z standard errors
                if val_margin < -z * se:
                    picks[str(z)][inside] = a[inside]
        for z in zs:
            rules[str(z)].append(float(picks[str(z)].mean()))
    return {
        "regions": regions,
        "sign_agreement": sign_agreement(regions),
        "test_nll_by_z": rules,
        "seeds": [c["seed"] for c in champion_rows],
    }


def cell_pairs(small_path: Path, large_path: Path, method: str = "geometry") -> dict:
    """Per region, the large-budget winner minus the small-budget winner on validation and
    test, and the test NLL of choosing per region on validation (module docstring, item 3)."""
    small_data = json.loads(small_path.read_text())
    small = {r["seed"]: r for r in small_data["rows"] if r["method"] == method}
    large = {
        r["seed"]: r for r in json.loads(large_path.read_text())["rows"] if r["method"] == method
    }
    cfg = small_data["meta"]["config"]
    regions, seeds = [], {}
    for seed in sorted(set(small) & set(large)):
        a, b = small[seed], large[seed]
        assert a["assignment"] == b["assignment"], "both budgets route by the same geometry"
        task = build_task(cfg["task"], seed)
        expert_of = np.asarray(a["assignment"])[task.test.cluster]
        p, q = np.asarray(a["test_nll_per_window"]), np.asarray(b["test_nll_per_window"])
        choice = p.copy()
        for k, (fa, fb) in enumerate(zip(a["final_length"], b["final_length"], strict=True)):
            inside = expert_of == k
            if fa is None or fb is None or not inside.any():
                continue
            val_margin = fb["best_val_nll"] - fa["best_val_nll"]
            if val_margin < 0:
                choice[inside] = q[inside]
            regions.append(
                {
                    "seed": seed,
                    "expert": k,
                    "val_windows": fa["n_val"],
                    "val_margin": val_margin,
                    "test_margin": float((q[inside] - p[inside]).mean()),
                }
            )
        seeds[str(seed)] = {
            "small": float(p.mean()),
            "large": float(q.mean()),
            "per_region_choice": float(choice.mean()),
        }
    return {"regions": regions, "sign_agreement": sign_agreement(regions), "seeds": seeds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", default=str(RESULTS / "ts_main_offline-seeds0-4.json"))
    p.add_argument("--own", default=str(RESULTS / "ts_main_offline-es-warm.json"))
    p.add_argument(
        "--champion",
        default=str(RESULTS / "ts_main_offline-es-warm-sgem-partition-geometry-cells.json"),
    )
    p.add_argument("--large", default=str(RESULTS / "ts_main_offline-b141.json"))
    p.add_argument("--z", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    p.add_argument("--out", default=str(RESULTS / "selection_noise.json"))
    args = p.parse_args()
    rows = json.loads(Path(args.runs).read_text())["rows"]
    seeds = seed_margins(rows, "sgem", "geometry")
    print("SGEM minus Geometry (16 trainings), final protocol:")
    for s in seeds:
        print(
            f"  seed {s['seed']}: validation {s['val_margin']:+.4f}  test {s['test_margin']:+.4f}"
            f" (paired SE over windows {s['test_se']:.4f})"
        )
    regions = region_level(Path(args.own), Path(args.champion), args.z)
    print_regions(
        "own cell minus champion cell, per region (SE estimated on the test windows):",
        regions,
        lambda r: f"SE {r['se_estimate']:.4f}  ({r['test_windows']})",
    )
    for z, nll in regions["test_nll_by_z"].items():
        print(f"  z = {z}: test NLL per seed {[round(v, 4) for v in nll]}")
    pairs = cell_pairs(Path(args.runs), Path(args.large))
    print_regions(
        "Geometry's 141-cell winner minus its 16-cell winner, per region:",
        pairs,
        lambda r: f"({r['val_windows']} validation windows)",
    )
    for seed, v in pairs["seeds"].items():
        print(f"  seed {seed}: " + "  ".join(f"{k} {x:.4f}" for k, x in v.items()))
    out = {
        "runs": args.runs,
        "seed_level": seeds,
        "region_level": regions,
        "z": args.z,
        "champion_pairs": pairs,
    }
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
