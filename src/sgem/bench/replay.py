"""A saved forecasting table's final stage retrained under another final protocol.

The searches (SGEM's and the baselines') do not depend on how the final experts are
trained, so a saved row's partition and cells (`assignment`, `architectures`) are all it
takes to retrain that method's final MoE with another final length and compare it with the
saved one on the same test windows (`benchmarks/ts_refinal.py`).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..baselines.base import cluster_moe_result, make_trainer
from ..data.task import ClusteredTask
from ..errors import SgemUserError
from ..final.length import ValidationLength, resolve_length
from ..methods.budget import MethodBudget
from ..search.config import SearchConfig
from ..search.sgem import SearchResult
from ..search.store import ObservationStore
from ..space.arch import Arch
from .rows import sgem_row
from .stats import window_bootstrap


def differs_for_one_expert(old: str, new: str | ValidationLength) -> bool:
    """Whether a K = 1 MoE (a global network, which warm starts leave unchanged) trains
    differently under final length `new` than under `old`."""
    a, b = resolve_length(old), resolve_length(new)
    if a is None or b is None:
        return (a is None) != (b is None)
    return dataclasses.replace(a, warm_start=False) != dataclasses.replace(b, warm_start=False)


def replay_row(row: dict, task: ClusteredTask, setup: MethodBudget) -> dict:
    """The row's final MoE retrained with `setup.final_length` (same partition, cells)."""
    assignment = np.asarray(row["assignment"], dtype=np.int64)
    archs = [Arch.from_key(k) for k in row["architectures"]]
    out = cluster_moe_result(
        row["method"],
        task,
        setup,
        assignment,
        archs,
        row["n_trained"],
        time.perf_counter(),
    ).row(task)
    keep = ("oracle_match", "n_trained", "search_seconds", "uses_domain_labels")
    out |= {k: row[k] for k in keep if k in row}
    out["replayed_from"] = {"final_length": setup.final_length, "test_nll": row["test_nll"]}
    return out


def replay_sgem(row: dict, task: ClusteredTask, cfg: dict, setup: MethodBudget) -> dict:
    """SGEM's row through SGEM's own final stage (`sgem.bench.rows.sgem_row`: the champion cell
    where `cfg["search"]` asks for one, then the final MoE) on the saved partition and cells.

    The saved row keeps no candidate store, so the second look over several finalists
    (`final_check_partitions` > 0) cannot be replayed; with it off, the check judges each
    expert's own cell (and the champion) only, which needs no store: exactly what a fresh
    run does."""
    search_cfg = SearchConfig.from_dict(cfg["search"])
    if search_cfg.final_check_partitions > 0:
        raise SgemUserError(
            "replaying SGEM's second look needs the search's candidate store, which a "
            "ts_main row does not keep: pass --search-set final_check_partitions=0"
        )
    if "final_check" in row and "search_architectures" not in row:
        raise SgemUserError(
            f"seed {row.get('seed')}: this SGEM row went through a final check that may have "
            "changed its cells, and it predates `search_architectures` (the search's own "
            "cells): replay it from a ts_main run made with the current benchmarks/ts_main.py"
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
    if not isinstance(setup.final_length, str):
        raise SgemUserError("replay SGEM's final stage under a named final length (FINAL_LENGTHS)")
    t0 = time.perf_counter()
    trainer = make_trainer(task, setup, "sgem")
    out = sgem_row(task, cfg, setup, trainer, found)
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


def replay_saved_row(
    row: dict,
    task: ClusteredTask,
    cfg: dict,
    setup: MethodBudget,
    saved_length: str,
    sgem_final: bool = False,
) -> dict:
    """One saved row under `setup.final_length`: routed rows retrained (SGEM's through its
    own final stage where `sgem_final`), K = 1 rows only where more than warm starts change,
    rows without a partition (seasonal naive, the direct forecasters) copied as they are."""
    routed = bool(row.get("assignment")) and len(set(row["assignment"])) > 1
    one_expert = bool(row.get("assignment")) and not routed
    if routed and sgem_final and row["method"] == "sgem":
        return replay_sgem(row, task, {**cfg, "final_length": setup.final_length}, setup)
    if routed or (one_expert and differs_for_one_expert(saved_length, setup.final_length)):
        return replay_row(row, task, setup)
    return row
