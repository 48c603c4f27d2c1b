"""Emulate a per-expert cell choice under warm starts from two replayed final stages.

Why: with warm starts SGEM's partition beat the geometry split when both used the Geometry
baseline's cell, while SGEM's own per-region cells lost (ts_main_offline-es-warm*.json). A
candidate rule for the final model: per expert, keep its own cell or take a global champion
cell, whichever the warm tracking run on the region scores lower on validation. The two
replays (`ts_main_offline-es-warm.json`: SGEM's cells; `..._sgem-partition-geometry-cells.json`:
the same partition with the champion cell) hold, per expert, that validation NLL (the tracking
run, same region, same seed) and, per test window, the NLL of its expert. A cluster-gated MoE
scores each window with its own expert only, so the rule's test NLL per window is read off
exactly, with no training. The champion here is the Geometry baseline's cell (16 random cells
on all clusters), i.e. what a champion search of that budget inside SGEM would find.

    python benchmarks/cell_choice_emulation.py --out benchmarks/results/cell_choice_emulation.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from sgem.bench.stats import window_bootstrap
from sgem.bench.tasks import build_task

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--own", default=str(RESULTS / "ts_main_offline-es-warm.json"))
    p.add_argument(
        "--champion",
        default=str(RESULTS / "ts_main_offline-es-warm-sgem-partition-geometry-cells.json"),
    )
    p.add_argument("--out", default=str(RESULTS / "cell_choice_emulation.json"))
    args = p.parse_args()
    own_data = json.loads(Path(args.own).read_text())
    champ_rows = json.loads(Path(args.champion).read_text())["rows"]
    cfg = own_data["meta"]["config"]
    by = {(r["seed"], r["method"]): r for r in own_data["rows"]}
    out: dict = {"own": args.own, "champion": args.champion, "seeds": {}}
    diffs: dict[str, list[np.ndarray]] = {"vs_geometry": [], "vs_own": []}
    for champ in champ_rows:
        seed = champ["seed"]
        own, geo = by[(seed, "sgem")], by[(seed, "geometry")]
        assert own["assignment"] == champ["assignment"], "the two replays must share a partition"
        task = build_task(cfg["task"], seed)
        expert_of = np.asarray(own["assignment"])[task.test.cluster]
        a = np.asarray(own["test_nll_per_window"])
        b = np.asarray(champ["test_nll_per_window"])
        rule = a.copy()
        choice = []
        for k, (fa, fb) in enumerate(zip(own["final_length"], champ["final_length"], strict=True)):
            take = fa is not None and fb is not None and fb["best_val_nll"] < fa["best_val_nll"]
            choice.append("champion" if take else "own")
            if take:
                rule[expert_of == k] = b[expert_of == k]
        g = np.asarray(geo["test_nll_per_window"])
        diffs["vs_geometry"].append(rule - g)
        diffs["vs_own"].append(rule - a)
        out["seeds"][str(seed)] = {
            "choice": choice,
            "test_nll": {
                "rule": float(rule.mean()),
                "own_cells": float(a.mean()),
                "champion_cells": float(b.mean()),
                "geometry": float(g.mean()),
                "global_single": by[(seed, "global_single")]["test_nll"],
            },
        }
        print(
            seed, choice, {k: round(v, 4) for k, v in out["seeds"][str(seed)]["test_nll"].items()}
        )
    for name, d in diffs.items():
        mean, lo, hi = window_bootstrap(d)
        out[f"rule_{name}"] = {"mean": mean, "ci95": [lo, hi]}
        print(f"rule {name}: {mean:+.4f} [{lo:+.4f}, {hi:+.4f}]")
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
