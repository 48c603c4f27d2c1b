"""One method on one task and seed: search (or a given routing), final MoE, scores, model.

"Search, then train the final MoE, then score it" lives here once. `sgem run` / `sgem fit`
(through `sgem.run.pipeline`), the Python API and the benchmarks call `run_sgem`, and any
cluster-gated method (a baseline's routing and cells) calls `finish`; both return a
`MethodResult` whose `row()` is the one result schema, and whose model can be saved with
`save()` and loaded with `sgem.load`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..data.task import ClusteredTask
from ..metrics import partition_match
from ..moe.artifact import save_final_moe
from ..moe.cluster_gated import ClusterGatedMoE, MoEReport, compact_assignment, train_final_moe
from ..moe.final_length import resolve_length
from ..search.champion import champion_cell
from ..search.config import SearchConfig
from ..search.final_check import final_check
from ..search.sgem import SGEM, SearchResult
from ..space.arch import Arch, CellSpace
from ..train.trainer import Trainer


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


def finish(
    method: str,
    task: ClusteredTask,
    trainer: Trainer,
    assignment: np.ndarray,
    architectures: list[Arch],
    seed: int,
    *,
    final_steps: int,
    final_epochs: float | None = None,
    final_length: str = "fixed",
    crps_samples: int = 100,
    n_trained: int = 0,
    started: float | None = None,
    search: SearchResult | None = None,
    uses_domain_labels: bool = False,
    executor: object | None = None,
    known_lengths: list[dict | None] | None = None,
    starts: dict | None = None,
) -> MethodResult:
    """Retrain the cluster-gated MoE of a routing and its cells on train + validation and
    test it once (the protocol every method shares). `final_length`: "fixed" or
    "validation" (each expert's length chosen on validation, `sgem.moe.final_length`).
    `executor`: the search's processes executor retrains the experts side by side;
    `known_lengths`: tracking runs already made for these experts (`finish_sgem`), `starts`
    the global networks they fine-tuned (warm starts)."""
    started = time.perf_counter() if started is None else started
    moe, report = train_final_moe(
        task,
        trainer,
        np.asarray(assignment),
        list(architectures),
        steps=final_steps,
        seed=seed,
        epochs=final_epochs,
        crps_samples=crps_samples,
        length=final_length,
        executor=executor,
        known_lengths=known_lengths,
        starts=starts,
    )
    return MethodResult(
        method=method,
        seed=seed,
        assignment=np.asarray(assignment),
        architectures=list(architectures),
        report=report,
        moe=moe,
        n_out=trainer.n_out,
        n_trained=n_trained,
        seconds=time.perf_counter() - started,
        search=search,
        uses_domain_labels=uses_domain_labels,
    )


def finish_sgem(
    task: ClusteredTask,
    trainer: Trainer,
    found: SearchResult,
    config: SearchConfig,
    seed: int,
    *,
    final_epochs: float | None = None,
    final_length: str = "fixed",
    crps_samples: int = 100,
    started: float | None = None,
    executor: object | None = None,
) -> MethodResult:
    """SGEM's final model: with a validation-chosen length, the finalists' second look
    (`sgem.search.final_check`) makes the last choice of partition and architectures with
    that protocol and hands its tracking runs on; then `finish`. The result's `search` is
    `found` with the partition and architectures the final model has, and the check's
    report in `selection["final_check"]`."""
    rule = resolve_length(final_length)
    known, starts = None, None
    extra: list[Arch] = []
    champion: dict | None = None
    if rule is not None and rule.warm_start and config.champion_cells > 0:
        cell, champion = champion_cell(
            task,
            trainer,
            trainer.space,
            config.champion_cells,
            seed,
            executor,  # type: ignore[arg-type]
        )
        extra.append(cell)
    if rule is not None and (config.final_check_partitions > 0 or extra):
        check = final_check(
            task,
            trainer,
            found.store,
            found.selection,
            (found.assignment, found.architectures),
            seed,
            steps=config.final_steps,
            epochs=final_epochs,
            rule=rule,
            n_partitions=max(config.final_check_partitions, 1),
            # only the champion besides each expert's own cell, unless the check is on
            n_archs=config.final_check_archs if config.final_check_partitions > 0 else 1,
            executor=executor,
            extra_cells=extra,
        )
        known, starts = check.known_lengths, check.starts
        found = replace(
            found,
            assignment=check.assignment,
            architectures=check.architectures,
            oracle_match=partition_match(check.assignment, task.oracle_partition)
            if task.oracle_partition is not None
            else None,
            selection={**found.selection, "final_check": check.report}
            | ({"champion": champion} if champion else {}),
            n_trained=found.n_trained + (champion["trainings"] if champion else 0),
        )
    return finish(
        "sgem",
        task,
        trainer,
        found.assignment,
        found.architectures,
        seed,
        final_steps=config.final_steps,
        final_epochs=final_epochs,
        final_length=final_length,
        crps_samples=crps_samples,
        n_trained=found.n_trained,
        started=started,
        search=found,
        executor=executor,
        known_lengths=known,
        starts=starts,
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


def run_sgem(
    task: ClusteredTask,
    space: CellSpace,
    config: SearchConfig,
    seed: int,
    *,
    final_epochs: float | None = None,
    final_length: str = "fixed",
    crps_samples: int = 100,
    device: str = "cpu",
    progress: bool = False,
    **fit_options: Any,
) -> MethodResult:
    """SGEM end to end: the search (`fit_options` go to `SGEM.fit`: store, executor,
    resume, deadline), then `finish`."""
    started = time.perf_counter()
    listener = fit_options.pop("listener", None)
    search = SGEM(space, config, seed=seed, progress=progress, listener=listener, device=device)
    found = search.fit(task, **fit_options)
    return finish_sgem(
        task,
        search.trainer_,
        found,
        config,
        seed,
        final_epochs=final_epochs,
        final_length=final_length,
        crps_samples=crps_samples,
        started=started,
    )


__all__ = ["MethodResult", "drop_empty_experts", "finish", "finish_sgem", "run_sgem"]
