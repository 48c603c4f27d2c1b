"""One forecasting table run (Table ts_main): every method on every seed, saved as it goes.

Per seed, one task (`sgem.bench.tasks.build_task`), then SGEM and every baseline under the
same protocol (`sgem.bench.methods`); the table is written after every method
(`sgem.bench.tables.write_table`), so an interrupted run keeps what it finished and
`resume` skips it. With several final lengths, each method searches once per seed and
trains its final model once per length, one table per length.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..baselines import get_baseline
from ..baselines.base import remember_best_single
from ..errors import SgemUserError
from ..methods.budget import Shared
from ..report.analysis import RunObservations
from ..search.config import SearchConfig
from ..space.registry import build_space
from ..train import resolve_device
from .machine import machine_info
from .methods import MATCHED, REFERENCE, SEARCHING, baseline_setup, run_sgem, saved_champions
from .tables import write_op_effects, write_table
from .tasks import build_task, task_summary


@dataclass(frozen=True)
class TableRun:
    """What to run beside the scale's config: seeds, methods and where the table goes."""

    scale: str
    seeds: list[int]
    methods: list[str]
    matched: bool = False  # also the searching baselines at SGEM's trainings (<m>@sgem)
    threads: int = 1
    tag: str | None = None  # file name suffix (default: the scale)
    resume: bool = False  # skip (seed, method) already saved
    out: Path = field(default_factory=lambda: Path("benchmarks/results"))
    note: str | None = None
    champions_from: str | None = None  # a saved table whose Global single searches to reuse


def _print(text: str) -> None:
    print(text, flush=True)


def _report(method: str, length: str, row: dict, t0: float, say: Callable[[str], Any]) -> None:
    say(
        f"  {method:15s} [{length}] NLL {row['test_nll']:.4f}  CRPS {row['test_crps']:.4f}  "
        f"MASE rel {row.get('rel_mase')}  wQL rel {row.get('rel_wql')}  "
        f"recovery {row.get('oracle_match')}  steps {row.get('steps')}  "
        f"{time.perf_counter() - t0:.0f} s"
    )


def run_table(
    cfg: dict[str, Any], run: TableRun, say: Callable[[str], Any] | None = None
) -> dict[str, dict]:
    """Run the table of run config `cfg` (`sgem.bench.config.scale_config`); returns
    {final length: summary} and leaves ts_main_<tag>.{json,md} in `run.out`. `say` prints
    the progress (default: stdout, flushed)."""
    if say is None:
        say = _print
    if run.matched and "sgem" not in run.methods:
        raise SgemUserError(
            "--matched runs the baselines at SGEM's number of trainings: add sgem to --methods"
        )
    torch.set_num_threads(run.threads)
    device = str(resolve_device(cfg.get("device", "cpu")))
    tag = run.tag or run.scale
    out_dir = Path(run.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    lengths = list(cfg["final_length"])
    tags = {L: tag if len(lengths) == 1 else f"{tag}-{L}" for L in lengths}
    cfgs = {L: {**cfg, "final_length": L} for L in lengths}
    rows: dict[str, list[dict]] = {L: [] for L in lengths}
    references: dict = {}
    for L in lengths:
        path = out_dir / f"ts_main_{tags[L]}.json"
        if run.resume and path.exists():
            saved = json.loads(path.read_text())
            rows[L] = saved["rows"]
            references |= {int(k): v for k, v in saved.get("references", {}).items()}
    done = {L: {(r["seed"], r["method"]) for r in rows[L]} for L in lengths}
    champions = saved_champions(run.champions_from, cfg["budget"]) if run.champions_from else {}
    search_cfg = SearchConfig.from_dict(cfg["search"])
    space = build_space(cfg["space"])
    observations: list[RunObservations] = []
    state: dict[str, Any] = {"summary": "", "meta": {}}
    t_start = time.perf_counter()

    def save(length: str) -> dict:
        task_meta = state["meta"]
        meta = {
            "scale": run.scale,
            "tag": tags[length],
            "seeds": run.seeds,
            "methods": run.methods,
            "config": cfgs[length],
            "device": device,
            "torch_threads": run.threads,
            "task_summary": state["summary"],
            "domains": list(task_meta.get("domain_names", [])),
            # the task's own, from the files' frequencies (sgem.data.timeseries)
            "frequencies": task_meta.get("frequencies"),
            "mase_seasons": task_meta.get("seasonality"),
            "final_length": length,
            "run_with_lengths": lengths,
            "reference": REFERENCE,
            "note": run.note,
            "wall_seconds": round(time.perf_counter() - t_start, 1),
            "machine": machine_info(),
        }
        return write_table(rows[length], references, meta, out_dir)

    for seed in run.seeds:
        task = build_task(cfg["task"], seed)
        state["summary"], state["meta"] = task_summary(task, search_cfg.n_experts), task.meta
        say(f"seed {seed}: {state['summary']}")
        shared = Shared()  # the trainer and the searches that do not depend on the length
        if seed in champions:
            remember_best_single(shared.cache, task, seed, cfg["budget"], champions[seed])
        setups = {
            L: baseline_setup(cfg, search_cfg, space, L, device, shared, seed) for L in lengths
        }
        if seed not in references:  # the relative scores' reference (cheap, no training)
            ref = get_baseline(REFERENCE).fit_evaluate(task, setups[lengths[0]]).row(task)
            references[seed] = {
                k: ref.get(k) for k in ("per_domain_test_mase", "per_domain_test_wql")
            }
        for method in run.methods:
            todo = [L for L in lengths if (seed, method) not in done[L]]
            if not todo:
                continue
            t0 = time.perf_counter()
            if method == "sgem":
                found_rows, obs = run_sgem(task, cfgs[todo[0]], setups[todo[0]], todo)
                observations.append(obs)
                for L in todo:
                    found_rows[L]["seed"] = seed
                    rows[L].append(found_rows[L])
                    save(L)
                    _report(method, L, found_rows[L], t0, say)
                continue
            for L in todo:
                t0 = time.perf_counter()
                row = get_baseline(method).fit_evaluate(task, setups[L]).row(task)
                rows[L].append(row)
                save(L)
                _report(method, L, row, t0, say)
        for L in lengths if run.matched else []:
            mine = next(r for r in rows[L] if r["seed"] == seed and r["method"] == "sgem")
            budget = int(mine["n_trained"])
            matched = setups[L].replace(trainings=budget)
            for method in [m for m in run.methods if m in SEARCHING]:
                if (seed, method + MATCHED) in done[L]:
                    continue
                t0 = time.perf_counter()
                row = get_baseline(method).fit_evaluate(task, matched).row(task)
                row.update(method=method + MATCHED, budget=budget)
                rows[L].append(row)
                save(L)
                _report(method + MATCHED, L, row, t0, say)
    summaries = {}
    for L in lengths:
        summaries[L] = save(L)
        if observations:
            write_op_effects(observations, list(cfg["space"]["ops"]), out_dir, tags[L])
        say((out_dir / f"ts_main_{tags[L]}.md").read_text())
        for m, e in summaries[L].items():
            say(f"{m} {e.get('test_nll')}")
    return summaries
