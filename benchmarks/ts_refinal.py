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
import dataclasses
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from scaling import parse_value
from ts_main import (
    REFERENCE,
    baseline_setup,
    build_task,
    load_task_domains,
    sgem_row,
    window_bootstrap,
    write_table,
)

from sgem.baselines import BaselineSetup
from sgem.baselines.base import cluster_moe_result, make_trainer
from sgem.moe.final_length import FINAL_LENGTHS, resolve_length
from sgem.pipeline import build_space
from sgem.search.config import SearchConfig
from sgem.search.sgem import SearchResult
from sgem.space.arch import Arch
from sgem.store import ObservationStore


def differs_for_one_expert(old: str, new: str) -> bool:
    """Whether a K = 1 MoE (a global network, which warm starts leave unchanged) trains
    differently under final length `new` than under `old`."""
    a, b = resolve_length(old), resolve_length(new)
    if a is None or b is None:
        return (a is None) != (b is None)
    return dataclasses.replace(a, warm_start=False) != dataclasses.replace(b, warm_start=False)


def replay_row(row: dict, task, setup: BaselineSetup, seed: int) -> dict:
    """The row's final MoE retrained with `setup.final_length` (same partition, cells)."""
    assignment = np.asarray(row["assignment"], dtype=np.int64)
    archs = [Arch.from_key(k) for k in row["architectures"]]
    out = cluster_moe_result(
        row["method"],
        task,
        setup,
        assignment,
        archs,
        seed,
        row["n_trained"],
        time.perf_counter(),
    )
    keep = ("oracle_match", "n_trained", "search_seconds", "uses_domain_labels")
    out |= {k: row[k] for k in keep if k in row}
    out["seed"] = seed
    out["replayed_from"] = {"final_length": setup.final_length, "test_nll": row["test_nll"]}
    return out


def replay_sgem(row: dict, task, cfg: dict, setup: BaselineSetup, seed: int) -> dict:
    """SGEM's row through SGEM's own final stage (`ts_main.sgem_row`: the champion cell
    where `cfg["search"]` asks for one, then the final MoE) on the saved partition and cells.

    The saved row keeps no candidate store, so the second look over several finalists
    (`final_check_partitions` > 0) cannot be replayed; with it off, the check judges each
    expert's own cell (and the champion) only, which needs no store: exactly what a fresh
    run does."""
    search_cfg = SearchConfig.from_dict(cfg["search"])
    if search_cfg.final_check_partitions > 0:
        raise SystemExit(
            "replaying SGEM's second look needs the search's candidate store, which a "
            "ts_main row does not keep: pass --search-set final_check_partitions=0"
        )
    if "final_check" in row and "search_architectures" not in row:
        raise SystemExit(
            f"seed {seed}: this SGEM row went through a final check that may have changed its "
            "cells, and it predates `search_architectures` (the search's own cells): replay "
            "it from a ts_main run made with the current benchmarks/ts_main.py"
        )
    assignment = np.asarray(row["assignment"], dtype=np.int64)
    archs = [Arch.from_key(k) for k in row.get("search_architectures", row["architectures"])]
    found = SearchResult(
        assignment=assignment,
        architectures=archs,
        routing=np.eye(len(archs))[assignment],
        trace=[],
        store=ObservationStore(task.n_clusters),
        oracle_match=row.get("oracle_match"),
        n_trained=row.get("search_n_trained", row["n_trained"]),
        seconds=row.get("search_seconds", 0.0),
    )
    t0 = time.perf_counter()
    trainer = make_trainer(task, setup, "sgem")
    out = sgem_row(task, cfg, seed, trainer, found, setup.final_length)
    out["seed"] = seed
    out["seconds"] = round(row.get("search_seconds", 0.0) + time.perf_counter() - t0, 3)
    out["replayed_from"] = {
        "final_length": setup.final_length,
        "test_nll": row["test_nll"],
        "sgem_final_stage": True,
    }
    return out


def with_cells_of(row: dict, rows: list[dict], method: str) -> dict:
    """`row` with the cells of `method`'s row of the same seed (K copies of a single one)."""
    donor = next(r for r in rows if r["seed"] == row["seed"] and r["method"] == method)
    cells = donor["architectures"]
    k = len(row["architectures"])
    cells = cells * k if len(cells) == 1 else cells
    return {**row, "architectures": cells[:k], "method": f"{row['method']}+{method}-cells"}


def protocol_comparison(old_rows: list[dict], new_rows: list[dict]) -> dict:
    """Per method replayed: new minus old test NLL per seed, their mean, and a paired
    seed-stratified window bootstrap (negative: the new protocol is better)."""
    old = {(r["seed"], r["method"]): r for r in old_rows}
    out: dict = {}
    for method in dict.fromkeys(r["method"] for r in new_rows if "replayed_from" in r):
        source = method.split("+")[0]  # a --cells-from row compares with its own method's
        pairs = [
            (r, old[(r["seed"], source)])
            for r in new_rows
            if r["method"] == method and "replayed_from" in r and (r["seed"], source) in old
        ]
        diffs = [
            np.asarray(n["test_nll_per_window"]) - np.asarray(o["test_nll_per_window"])
            for n, o in pairs
        ]
        mean, lo, hi = window_bootstrap(diffs)
        out[method] = {
            "per_seed": {str(n["seed"]): n["test_nll"] - o["test_nll"] for n, o in pairs},
            "old": {str(o["seed"]): o["test_nll"] for _, o in pairs},
            "new": {str(n["seed"]): n["test_nll"] for n, _ in pairs},
            "window_nll_diff": {"mean": mean, "ci95": [lo, hi]},
        }
    return out


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
        "stage (`replay_sgem`), e.g. champion_cells=16 final_check_partitions=0",
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
    domains = load_task_domains(cfg["task"])
    space = build_space(cfg["space"])
    search = SearchConfig.from_dict(cfg["search"])
    references = {int(k): v for k, v in saved.get("references", {}).items()}
    saved_length = saved["meta"].get("final_length") or cfg.get("final_length", "fixed")
    rows: list[dict] = []
    t_start = time.perf_counter()
    for seed in seeds:
        task = build_task(cfg["task"], domains, seed)
        setup = baseline_setup(cfg, search, space, args.final_length, args.device)
        for row in saved["rows"]:
            if row["seed"] != seed or row["method"] not in methods:
                continue
            t0 = time.perf_counter()
            routed = bool(row.get("assignment")) and len(set(row["assignment"])) > 1
            one_expert = bool(row.get("assignment")) and not routed
            if routed and args.cells_from:
                row = with_cells_of(row, saved["rows"], args.cells_from)
            if routed and sgem_final and row["method"] == "sgem":
                new = replay_sgem(
                    row, task, {**cfg, "final_length": args.final_length}, setup, seed
                )
            elif routed or (one_expert and differs_for_one_expert(saved_length, args.final_length)):
                new = replay_row(row, task, setup, seed)
            else:
                new = row
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
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
    }
    meta["config"] = {**cfg, "final_length": args.final_length}
    write_table(rows, references, meta, Path(args.out))


if __name__ == "__main__":
    main()
