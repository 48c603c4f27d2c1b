"""SGEM's row of a forecasting table: its final stage on a finished search, as the baselines'
rows are (`fit_evaluate`): scores, routing, cells and what the final stage chose.

One builder for every benchmark that scores SGEM (the table run and the replays), so a
replayed row and a fresh one carry the same fields.
"""

from __future__ import annotations

from typing import Any

from ..baselines.base import forecast_fields
from ..data.task import ClusteredTask
from ..final.protocol import FinalProtocol
from ..final.stage import run_final
from ..metrics import partition_match
from ..search.config import SearchConfig


def sgem_row(
    task: ClusteredTask, cfg: dict[str, Any], seed: int, trainer: Any, found: Any, length: str
) -> dict[str, Any]:
    """SGEM's final stage on a finished search (`sgem.final.run_final`: the champion cell and the
    second look where the config asks for them), as a table row."""
    search_cfg = SearchConfig.from_dict(cfg["search"])
    # what the search returned, before the final stage's choices (a replay starts here)
    searched = {"architectures": [a.key for a in found.architectures], "n_trained": found.n_trained}
    protocol = FinalProtocol.from_config(
        search_cfg, length, cfg["final_epochs"], cfg["crps_samples"]
    )
    # a tracked length: the champion cell and the finalists' second look where asked
    final = run_final(task, trainer, found, None, protocol, seed=seed)
    found = final.search
    moe = final.report.to_json()
    names = task.meta["domain_names"]
    row = {
        "method": "sgem",
        "test_nll": moe["test_nll"],
        "test_crps": moe["test_crps"],
        "test_crps_closed_form": moe["test_crps_closed_form"],
        "per_domain_test_nll": {names[int(d)]: v for d, v in moe["per_domain_test_nll"].items()},
        "assignment": found.assignment.tolist(),
        "oracle_match": None
        if task.oracle_partition is None
        else partition_match(found.assignment, task.oracle_partition),
        "architectures": [a.key for a in found.architectures],
        "n_trained": found.n_trained,
        "uses_domain_labels": False,
        "search_seconds": round(found.seconds, 3),
        "steps": moe["steps"],
        "search_architectures": searched["architectures"],
        "search_n_trained": searched["n_trained"],
    }
    check = found.selection.get("final_check")
    if check is not None:
        row["final_check"] = {
            "changed_partition": check["changed_partition"],
            "changed_architectures": check["changed_architectures"],
            "tracking_runs": check["tracking_runs"],
            "seconds": check["seconds"],
            "validation_nll": [c["validation_nll"] for c in check["contenders"]],
            # each expert's tracked cells (validation NLL at the chosen length) and its pick
            "regions": next(c["regions"] for c in check["contenders"] if c["chosen"]),
        }
    if moe.get("global_networks_test"):  # each cell's global network alone, a reference
        row["global_networks_test"] = moe["global_networks_test"]
    if "final_length" in moe:
        row["final_length"] = [
            None if f is None else {k: v for k, v in f.items() if k != "curve"}
            for f in moe["final_length"]
        ]
    return row | forecast_fields(task, moe.get("forecast"))
