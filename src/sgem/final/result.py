"""What one method produced on one task and seed: the final MoE, its scores, its row.

`MethodResult.row()` is the one result schema (result.json's core and a benchmark row
alike); `save()` writes the model directory `sgem.load` reads. Every method that routes by
clusters gets one from `sgem.final.run_final`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..data.task import ClusteredTask
from ..metrics import partition_match
from ..moe.artifact import save_final_moe
from ..moe.cluster_gated import ClusterGatedMoE, compact_assignment
from ..search.sgem import SearchResult
from ..space.arch import Arch, CellSpace
from .moe_fit import MoEReport


@dataclass
class MethodResult:
    """What one method produced on one task and seed."""

    method: str
    seed: int
    assignment: np.ndarray
    architectures: list[Arch]
    report: MoEReport
    moe: ClusterGatedMoE
    n_out: int
    n_trained: int
    seconds: float
    search: SearchResult | None = None
    uses_domain_labels: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self, task: ClusteredTask) -> dict:
        """The one result schema: result.json's core and a benchmark row alike."""
        scores = self.report.to_json()
        names = task.meta.get("domain_names")
        per_domain = {
            (names[int(d)] if names else d): v for d, v in scores["per_domain_test_nll"].items()
        }
        row = {
            "method": self.method,
            "seed": self.seed,
            "test_accuracy": scores["test_accuracy"],
            "test_nll": scores["test_nll"],
            "test_crps": scores["test_crps"],
            "test_crps_closed_form": scores["test_crps_closed_form"],
            "test_rmse": scores.get("test_rmse"),
            "per_expert_test_accuracy": scores["per_expert_test_accuracy"],
            "per_domain_test_nll": per_domain,
            "assignment": self.assignment.tolist(),
            "oracle_match": partition_match(self.assignment, task.oracle_partition)
            if task.oracle_partition is not None
            else None,
            "architectures": [a.key for a in self.architectures],
            "n_trained": self.n_trained,
            "uses_domain_labels": self.uses_domain_labels,
            "final_seconds": round(self.report.seconds, 3),
            "seconds": round(self.seconds, 3),
        }
        if self.search is not None:
            row["search_seconds"] = round(self.search.seconds, 3)
        return row | self.extra

    def save(
        self, path: str | os.PathLike, task: ClusteredTask, space: CellSpace, **info: Any
    ) -> Path:
        """Write the final MoE as a model directory (`sgem.load(path)` reads it)."""
        metrics = {k: v for k, v in self.report.to_json().items() if k not in ("seconds", "steps")}
        return save_final_moe(
            path,
            task,
            space,
            self.moe,
            self.n_out,
            metrics=metrics,
            info={"seed": self.seed, "method": self.method, **info},
        )


def drop_empty_experts(
    found: SearchResult, final: MethodResult
) -> tuple[SearchResult, MethodResult]:
    """The final model without experts that own no cluster (a routing may leave one empty):
    experts renumbered in order, their per-expert report entries with them. A model card
    that counted an expert nobody is routed to would describe a model that is not there."""
    relabelled, kept = compact_assignment(np.asarray(final.assignment))
    if len(kept) == len(final.architectures):
        return found, final
    archs = [final.architectures[k] for k in kept]
    moe = ClusterGatedMoE([final.moe.experts[k] for k in kept], relabelled, archs)
    report = final.report

    def keep(values: list | None) -> list | None:
        return None if values is None else [values[k] for k in kept if k < len(values)]

    report = replace(
        report,
        per_expert_test_accuracy=keep(report.per_expert_test_accuracy) or [],
        steps=keep(report.steps) or [],
        final_length=keep(report.final_length),
    )
    dropped = [k for k in range(len(final.architectures)) if k not in kept]
    selection = {**(found.selection or {}), "dropped_empty_experts": dropped}
    losses = found.region_val_losses
    found = replace(
        found,
        assignment=relabelled,
        architectures=archs,
        selection=selection,
        region_val_losses=[losses[k] for k in kept if k < len(losses)],
    )
    final = replace(
        final, assignment=relabelled, architectures=archs, moe=moe, report=report, search=found
    )
    return found, final


__all__ = ["MethodResult", "drop_empty_experts"]
