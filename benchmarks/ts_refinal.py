"""Replay the final stage of a saved `ts_main` run with another final protocol.

The searches (SGEM's and the baselines') do not depend on how the final experts are
trained, so a saved row's partition and cells (`assignment`, `architectures`) are all it
takes to retrain that method's final MoE with another `--final-length` (e.g.
`validation-warm`: experts fine-tuned from a global network of their cell) and compare it
with the saved one on the same test windows. Rows without a partition (seasonal naive, the
direct forecasters) and K = 1 rows (Global single, which a warm start leaves unchanged) are
copied as they are; every other row is retrained and marked `replayed_from`. A K = 1 row is
retrained too when the new protocol differs in more than warm starts (e.g.
`validation-warm-norefit`: Global single keeps its tracked network); the direct
forecasters are always copied, so with a `-norefit` replay their rows keep the refit.

    python benchmarks/ts_refinal.py benchmarks/results/ts_main_offline-es.json \\
        --final-length validation-warm --tag offline-es-warm --seeds 0 --methods geometry
    # several processes, then: python benchmarks/ts_main.py --merge A.json B.json --tag T
    # and the paired new-minus-old differences per method (window bootstrap), into NEW.json:
    python benchmarks/ts_refinal.py OLD.json --compare NEW.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from sgem.bench.config import parse_value
from sgem.bench.machine import machine_info
from sgem.bench.methods import REFERENCE, baseline_setup
from sgem.bench.replay import protocol_comparison, replay_saved_row, with_cells_of
from sgem.bench.tables import write_table
from sgem.bench.tasks import build_task
from sgem.final.protocol import FINAL_LENGTHS
from sgem.search.config import SearchConfig
from sgem.space.registry import build_space


def compare(source: Path, new: Path) -> None:
    """Write `protocol_comparison` of `new` against `source` into `new` and print it."""
    data = json.loads(new.read_text())
    table = protocol_comparison(json.loads(source.read_text())["rows"], data["rows"])
    data["protocol_comparison"] = table
    new.write_text(json.dumps(data, indent=1))
    for method, e in table.items():
        w = e["window_nll_diff"]
        seeds = ", ".join(f"{s}: {e['old'][s]:.4f} -> {e['new'][s]:.4f}" for s in e["new"])
        print(
            f"{method:12s} {seeds}; window diff {w['mean']:+.4f} "
            f"[{w['ci95'][0]:+.4f}, {w['ci95'][1]:+.4f}]"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", help="a ts_main JSON whose rows hold assignment + architectures")
    p.add_argument("--final-length", choices=FINAL_LENGTHS, default="validation-warm")
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--methods", nargs="+", default=None)
    p.add_argument("--tag", default=None, help="output ts_main_<tag>.json (required to replay)")
    p.add_argument("--compare", default=None, metavar="NEW_JSON", help="only compare (above)")
    p.add_argument(
        "--cells-from",
        default=None,
        metavar="METHOD",
        help="a diagnosis: replay each row with METHOD's cells (same seed; one cell: K copies), "
        "as method '<method>+<METHOD>-cells' (partition effect with the cells held fixed)",
    )
    p.add_argument(
        "--search-set",
        nargs="+",
        default=None,
        metavar="KEY=VALUE",
        help="SGEM settings over the saved ones; with any, SGEM rows replay SGEM's own final "
        "stage (`sgem.bench.replay.replay_sgem`), e.g. champion_cells=16 final_check_partitions=0",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args()
    if args.compare:
        compare(Path(args.source), Path(args.compare))
        return
    if not args.tag:
        p.error("--tag is required to replay")
    torch.set_num_threads(args.threads)
    saved = json.loads(Path(args.source).read_text())
    cfg = saved["meta"]["config"]
    sgem_final = bool(args.search_set)
    for key, value in (item.split("=", 1) for item in args.search_set or []):
        cfg["search"][key] = parse_value(value)
    seeds = args.seeds or sorted({r["seed"] for r in saved["rows"]})
    methods = args.methods or list(dict.fromkeys(r["method"] for r in saved["rows"]))
    space = build_space(cfg["space"])
    search = SearchConfig.from_dict(cfg["search"])
    references = {int(k): v for k, v in saved.get("references", {}).items()}
    saved_length = saved["meta"].get("final_length") or cfg.get("final_length", "fixed")
    rows: list[dict] = []
    t_start = time.perf_counter()
    for seed in seeds:
        task = build_task(cfg["task"], seed)
        setup = baseline_setup(cfg, search, space, args.final_length, args.device, seed=seed)
        for row in saved["rows"]:
            if row["seed"] != seed or row["method"] not in methods:
                continue
            t0 = time.perf_counter()
            if args.cells_from and len(set(row.get("assignment") or [])) > 1:
                row = with_cells_of(row, saved["rows"], args.cells_from)
            new = replay_saved_row(row, task, cfg, setup, saved_length, sgem_final)
            rows.append(new)
            print(
                f"seed {seed} {row['method']:15s} NLL {row['test_nll']:.4f} -> "
                f"{new['test_nll']:.4f}  ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    meta = {
        **{k: v for k, v in saved["meta"].items() if k not in ("merged_from",)},
        "tag": args.tag,
        "seeds": seeds,
        "methods": methods,
        "final_length": args.final_length,
        "reference": REFERENCE,
        "replayed_from": args.source,
        "note": f"final stage replayed from {Path(args.source).name} with final_length "
        f"{args.final_length} (searches unchanged)",
        "wall_seconds": round(time.perf_counter() - t_start, 1),
        "device": args.device,
        "torch_threads": args.threads,
        "machine": machine_info(),
    }
    meta["config"] = {**cfg, "final_length": args.final_length}
    write_table(rows, references, meta, Path(args.out))


if __name__ == "__main__":
    main()
