"""What one method produced on one task and seed, and its one row.

Every method returns a `MethodResult` (`sgem.methods.Method.fit_evaluate`): SGEM and the
cluster-gated baselines with their final MoE (routing, cells, the final stage's report),
the direct forecasters and the leaderboard's references with their raw outputs alone (in
the task's model units: logits, or the Student-t's (loc, scale, df) per step) on the test
split, and on validation where the method made them (out of sample: the leaderboard
compares and combines members there). `row(task)` is the one result schema (a benchmark
row; result.json's metrics), every metric from one scoring function
(`sgem.moe.scoring.method_scores`); `save()` writes a cluster-gated MoE's model directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask
from ..final.moe_fit import MoEReport
from ..metrics import partition_match
from ..moe.artifact import save_final_moe
from ..moe.cluster_gated import ClusterGatedMoE, compact_assignment
from ..moe.scoring import method_scores
from ..search.sgem import SearchResult
from ..space.arch import Arch, CellSpace

#: the keys of `MethodResult.scores` taken from a final MoE's report
_REPORT_KEYS = (
    "test_accuracy",
    "test_nll",
    "test_crps",
    "test_crps_closed_form",
    "test_rmse",
    "test_coverage_80",
    "per_expert_test_accuracy",
)


@dataclass
class Fitted:
    """What a leaderboard member keeps to be saved: a network of a cell (shippable in a
    cluster-gated MoE), a scikit-learn estimator with its Normal scale in model units
    (saved as plain arrays, `sgem.moe.portable`), or a classical forecaster with its
    validated spread and tails (`sgem.moe.classical.ClassicalMember`)."""

    network: nn.Module | None = field(default=None, repr=False)
    cell: Arch | None = None
    estimator: object | None = field(default=None, repr=False)
    scale: float = 1.0
    classical: Any = field(default=None, repr=False)


@dataclass
class MethodResult:
    """What one method produced on one task and seed.

    Cluster-gated MoEs fill `assignment`, `architectures`, `report` and `moe`; every
    method fills `test_output` (raw outputs on the test split) unless it was skipped, and
    `val_output` where it produced out-of-sample validation outputs. `kind`, `note`,
    `shippable` and `fitted` are what the leaderboard needs of a member.
    """

    method: str
    seed: int
    seconds: float = 0.0
    test_output: np.ndarray | torch.Tensor | None = field(default=None, repr=False)
    val_output: np.ndarray | None = field(default=None, repr=False)
    assignment: np.ndarray | None = None
    architectures: list[Arch] | None = None
    report: MoEReport | None = None
    moe: ClusterGatedMoE | None = field(default=None, repr=False)
    n_out: int | None = None
    n_trained: int = 0
    search: SearchResult | None = None
    uses_domain_labels: bool = False
    crps_samples: int = 100
    kind: str = "method"
    note: str = ""
    shippable: bool = False
    fitted: Fitted | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.method

    def outputs(self) -> torch.Tensor | None:
        """The raw test outputs (a final MoE's from its report)."""
        if self.test_output is not None:
            return torch.as_tensor(self.test_output)
        return None if self.report is None else self.report.output

    def scores(self, task: ClusteredTask) -> dict:
        """Every test metric (`sgem.moe.scoring.method_scores`): a final MoE's were computed
        by the final stage with that function and are read from its report."""
        if self.report is not None:
            r = self.report
            got = {k: getattr(r, k) for k in _REPORT_KEYS}
            return got | {"per_domain_test_nll": r.per_domain_test_nll, "forecast": r.forecast}
        out = self.outputs()
        if out is None:
            raise ValueError(f"{self.method} produced no test outputs to score")
        return method_scores(task, out, crps_samples=self.crps_samples, seed=self.seed)

    def row(self, task: ClusteredTask) -> dict:
        """The one result schema: a benchmark row, result.json's metrics."""
        s = self.scores(task)
        names = task.meta.get("domain_names") if task.meta else None
        per_domain = {
            (str(names[int(d)]) if names else str(d)): v
            for d, v in s["per_domain_test_nll"].items()
        }
        assignment = None if self.assignment is None else np.asarray(self.assignment)
        row: dict[str, Any] = {
            "method": self.method,
            "seed": self.seed,
            **{k: s[k] for k in _REPORT_KEYS},
            "per_domain_test_nll": per_domain,
            "assignment": None if assignment is None else assignment.tolist(),
            "oracle_match": None
            if assignment is None or task.oracle_partition is None
            else partition_match(assignment, task.oracle_partition),
            "architectures": None
            if self.architectures is None
            else [a.key for a in self.architectures],
            "n_trained": self.n_trained,
            "uses_domain_labels": self.uses_domain_labels,
            "seconds": round(self.seconds, 3),
        }
        if self.report is not None:
            moe = self.report.to_json()
            row["final_seconds"] = round(self.report.seconds, 3)
            row["steps"] = moe["steps"]
            if "final_length" in moe:
                row["final_length"] = _length_summary(moe["final_length"])
            if "global_networks" in moe:  # warm starts: each cell's global network
                nets = moe["global_networks"]
                row["global_networks"] = dict(
                    zip(nets, _length_summary(list(nets.values())), strict=True)
                )
                row["global_networks_test"] = moe.get("global_networks_test")
        if self.search is not None:
            row["search_seconds"] = round(self.search.seconds, 3)
        return row | forecast_fields(task, s.get("forecast")) | self.extra

    def save(
        self, path: str | os.PathLike, task: ClusteredTask, space: CellSpace, **info: Any
    ) -> Path:
        """Write the final MoE as a model directory (`sgem.load(path)` reads it)."""
        if self.moe is None or self.report is None or self.n_out is None:
            raise ValueError(f"{self.method} has no cluster-gated MoE to save")
        skip = ("seconds", "steps", "test_coverage_80")  # `evaluate` reports the calibrated one
        metrics = {k: v for k, v in self.report.to_json().items() if k not in skip}
        return save_final_moe(
            path,
            task,
            space,
            self.moe,
            self.n_out,
            metrics=metrics,
            info={"seed": self.seed, "method": self.method, **info},
        )


def _length_summary(lengths: list) -> list:
    """The tracking runs without their curves (best step, retraining steps, cap, stop)."""
    return [None if f is None else {k: v for k, v in f.items() if k != "curve"} for f in lengths]


def forecast_fields(task: ClusteredTask, forecast: dict | None) -> dict:
    """Row fields of `sgem.forecast.task_test_scores`: test MASE and wQL (original units),
    per domain (by name), and the per-window test NLL / closed-form CRPS (rounded) for
    paired comparisons; {} when the task is not a windowed forecasting task."""
    if not forecast:
        return {}
    names = task.meta.get("domain_names")

    def by_name(d: dict) -> dict:
        return {str(names[int(k)] if names else k): v for k, v in d.items()}

    return {
        "test_mase": forecast["mase"],
        "test_wql": forecast["wql"],
        "per_domain_test_mase": by_name(forecast["per_domain_mase"]),
        "per_domain_test_wql": by_name(forecast["per_domain_wql"]),
        "mase_seasons": forecast["mase_seasons"],
        "test_nll_per_window": [round(v, 5) for v in forecast["per_window_nll"]],
        "test_crps_cf_per_window": [round(v, 5) for v in forecast["per_window_crps_closed_form"]],
    }


def drop_empty_experts(
    found: SearchResult, final: MethodResult
) -> tuple[SearchResult, MethodResult]:
    """The final model without experts that own no cluster (a routing may leave one empty):
    experts renumbered in order, their per-expert report entries with them. A model card
    that counted an expert nobody is routed to would describe a model that is not there."""
    assert final.moe is not None and final.report is not None and final.architectures
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
        val_outputs=keep(report.val_outputs),
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


__all__ = ["Fitted", "MethodResult", "drop_empty_experts", "forecast_fields"]
