"""The forecasting table's methods: which run, how they are named, and their one protocol.

Every method runs as a method of `sgem.methods` (`fit_evaluate(task, budget)`) under the
`MethodBudget` of the run config (`baseline_setup`: SGEM's candidate training and final
steps, the config's budget and final length, the seed), and SGEM through `run_sgem`: one
search, then the final stage once per final length (the search does not depend on it),
each a row of `MethodResult.row`.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..data.task import ClusteredTask
from ..errors import SgemUserError
from ..methods.budget import MethodBudget, Shared
from ..methods.sgem import SgemMethod
from ..report.analysis import RunObservations
from ..search.config import SearchConfig
from ..space.arch import Arch

BASELINES = [
    "naive",
    "seasonal_naive",
    "dlinear",
    "global_single",
    "random_moe",
    "geometry",
    "bestarch_x_k",
    "nas_moe",
    "mole",
    "oracle",
]
#: external references from a well-kept library (statsforecast), run where installed; only
#: looked up here, imported when they run
EXTERNAL = ["auto_ets", "auto_theta"]
if importlib.util.find_spec("statsforecast") is not None:
    BASELINES += EXTERNAL
#: The table's blocks of methods, in order.
BLOCKS = [
    ("statistical / linear, no routing", ["naive", "seasonal_naive", "dlinear"]),
    ("statsforecast references, one local model per window", EXTERNAL),
    (
        "cluster gate, no domain labels",
        ["global_single", "random_moe", "geometry", "bestarch_x_k", "nas_moe", "sgem"],
    ),
    ("own learnable routing", ["mole"]),
    ("oracle, uses domain labels", ["oracle"]),
]
#: label-free baselines whose search spends `budget` candidate trainings: with --matched
#: each also runs at SGEM's own number of trainings on the seed, as `<method>@sgem`
SEARCHING = ["global_single", "random_moe", "geometry", "bestarch_x_k", "nas_moe"]
MATCHED = "@sgem"
#: The reference of the relative scores (per domain divided by its score).
REFERENCE = "seasonal_naive"
LABELS = {
    "naive": "Naive",
    "seasonal_naive": "Seasonal naive",
    "dlinear": "DLinear (Student-t)",
    "global_single": "Global single (K=1)",
    "random_moe": "Random-MoE",
    "geometry": "Geometry routing",
    "bestarch_x_k": "BestArch x K",
    "nas_moe": "NAS-MoE",
    "sgem": "SGEM",
    "mole": "MoLE",
    "oracle": "Per-domain specialists",
    "auto_ets": "AutoETS (statsforecast)",
    "auto_theta": "AutoTheta (statsforecast)",
}


def label(method: str) -> str:
    """A method's name in the tables (`<method>@sgem`: that baseline at SGEM's budget)."""
    if method.endswith(MATCHED):
        base = method.removesuffix(MATCHED)
        return f"{LABELS.get(base, base)} @ SGEM's trainings"
    return LABELS.get(method, method)


def baseline_setup(
    cfg: dict[str, Any],
    search_cfg: SearchConfig,
    space: Any,
    length: str,
    device: str,
    shared: Shared | None = None,
    seed: int = 0,
) -> MethodBudget:
    """The methods' budget of a run config: SGEM's candidate training and final steps, the
    config's budget, final length `length`, CRPS samples, device and seed; `shared`: the
    trainer and searches methods of one (task, seed) share."""
    return MethodBudget(
        seed=seed,
        space=space,
        train=search_cfg.train,
        n_experts=search_cfg.n_experts,
        trainings=cfg["budget"],
        final_steps=search_cfg.final_steps,
        final_epochs=cfg["final_epochs"],
        final_length=length,
        crps_samples=cfg["crps_samples"],
        device=device,
        shared=Shared() if shared is None else shared,
    )


def saved_champions(path: str | Path, budget: int) -> dict[int, tuple[Arch, int]]:
    """Per seed, the best-single-cell search's result recorded in a saved table at the same
    budget (its Global single rows, K = 1, name the cell and the trainings spent): loaded
    into a seed's baseline cache, BestArch x K and Geometry routing reuse that search instead
    of repeating it. The search is deterministic in (task, seed, budget), so the rows are
    the same as a fresh search's; only the seconds differ."""
    data = json.loads(Path(path).read_text())
    saved_budget = data["meta"]["config"].get("budget")
    if saved_budget != budget:
        raise SgemUserError(
            f"--champions-from {path}: its searches spent {saved_budget} trainings, this run "
            f"{budget}; pass a table run at --budget {budget}"
        )
    found = {
        int(r["seed"]): (Arch.from_key(r["architectures"][0]), int(r["n_trained"]))
        for r in data["rows"]
        if r["method"] == "global_single"
    }
    if not found:
        raise SgemUserError(
            f"--champions-from {path}: no global_single rows to take the cell from; pass a "
            "table that ran global_single"
        )
    return found


def run_sgem(
    task: ClusteredTask,
    cfg: dict[str, Any],
    budget: MethodBudget,
    lengths: list[str] | None = None,
) -> tuple[dict[str, dict], RunObservations]:
    """One SGEM search, then the final MoE for each final length (the search does not
    depend on it): {length: row} and the search's observations."""
    start = time.perf_counter()
    method = SgemMethod(SearchConfig.from_dict(cfg["search"]))
    trainer, found = method.search(task, budget)
    search_end = time.perf_counter()
    rows = {}
    for length in lengths or [cfg["final_length"]]:
        t0 = time.perf_counter()
        final = method.final(task, budget.replace(final_length=length), trainer, found)
        rows[length] = final.row(task)
        rows[length]["seconds"] = round(search_end - start + time.perf_counter() - t0, 3)
    store = found.store
    obs = RunObservations(
        list(store.archs),
        store.masks.astype(bool),
        store.losses,
        np.asarray(task.oracle_partition),
        list(task.meta["domain_names"]),
    )
    return rows, obs
