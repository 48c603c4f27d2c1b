"""The final stage, one entry point: a routing and its cells -> the final MoE, tested once.

Every method that routes by clusters ends here (`sgem run` / `sgem fit` through
`sgem.run.pipeline`, `sgem.run.experiment.run_sgem`, the benchmark library), so methods
differ only in routing and cells, never in how their final networks are trained. What the
stage does is the `FinalProtocol`'s business:

1. (SGEM's search result, warm starts, `champion_cells > 0`) the champion cell
   (`sgem.final.champion`) is trained and offered to every expert;
2. (SGEM's search result, tracked length, a second look or a champion) the finalists'
   second look (`sgem.final.check`) makes the last choice of partition and cells with the
   final protocol's own tracking runs, which the retrain then reuses;
3. the cluster-gated MoE is retrained on train + validation (`train_final_moe`: fixed or
   tracked length, from scratch or warm) and tested once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..data.task import ClusteredTask
from ..methods.result import MethodResult
from ..metrics import partition_match
from ..search.sgem import SearchResult
from ..space.arch import Arch
from ..train.trainer import Trainer
from .champion import champion_cell
from .check import FinalCheck, final_check
from .length import tracking_rule
from .moe_fit import train_final_moe
from .protocol import FinalProtocol


def run_final(
    task: ClusteredTask,
    trainer: Trainer,
    routing: SearchResult | np.ndarray,
    architectures: Sequence[Arch] | None,
    protocol: FinalProtocol,
    *,
    seed: int,
    method: str = "sgem",
    n_trained: int = 0,
    started: float | None = None,
    uses_domain_labels: bool = False,
    executor: object | None = None,
) -> MethodResult:
    """The final MoE of `routing` (a cluster -> expert table with its `architectures`, or
    SGEM's `SearchResult`, whose own cells are used and whose finalists the second look may
    revisit) under `protocol`. `executor`: the search's processes executor trains the final
    networks side by side on its workers (same numbers as here). With a `SearchResult` the
    result's `search` is it with the partition and cells the final model has, the second
    look's report in `selection["final_check"]`, the champion's in `selection["champion"]`.
    """
    started = time.perf_counter() if started is None else started
    if isinstance(routing, SearchResult):
        found, check = _second_look(task, trainer, routing, protocol, seed, executor)
        assignment, archs = found.assignment, list(found.architectures)
        n_trained = found.n_trained
    else:
        if architectures is None:
            raise ValueError("run_final: a routing table needs its architectures (one per expert)")
        found, check = None, None
        assignment, archs = np.asarray(routing), list(architectures)
    moe, report = train_final_moe(
        task,
        trainer,
        np.asarray(assignment),
        archs,
        steps=protocol.final_steps,
        seed=seed,
        epochs=protocol.final_epochs,
        crps_samples=protocol.crps_samples,
        length=tracking_rule(protocol) or "fixed",
        executor=executor,
        known_lengths=check.known_lengths if check is not None else None,
        known_outputs=check.known_outputs if check is not None else None,
        known_states=check.known_states if check is not None else None,
        starts=check.starts if check is not None else None,
    )
    return MethodResult(
        method=method,
        seed=seed,
        assignment=np.asarray(assignment),
        architectures=archs,
        report=report,
        moe=moe,
        n_out=trainer.n_out,
        n_trained=n_trained,
        seconds=time.perf_counter() - started,
        search=found,
        uses_domain_labels=uses_domain_labels,
        crps_samples=protocol.crps_samples,
    )


def _second_look(
    task: ClusteredTask,
    trainer: Trainer,
    found: SearchResult,
    protocol: FinalProtocol,
    seed: int,
    executor: object | None,
) -> tuple[SearchResult, FinalCheck | None]:
    """Steps 1-2 of the module docstring: (the search result the final model follows, the
    second look: the tracking runs the retrain reuses, their validation outputs, the global
    networks they fine-tuned; None without one)."""
    rule = tracking_rule(protocol)
    extra: list[Arch] = []
    champion: dict | None = None
    if rule is not None and protocol.uses_champion:
        cell, champion = champion_cell(
            task,
            trainer,
            trainer.space,
            protocol.champion_cells,
            seed,
            executor,  # type: ignore[arg-type]
        )
        extra.append(cell)
    if rule is None or not (protocol.check_partitions > 0 or extra):
        return found, None
    check = final_check(
        task,
        trainer,
        found.store,
        found.selection,
        (found.assignment, found.architectures),
        seed,
        steps=protocol.final_steps,
        epochs=protocol.final_epochs,
        rule=rule,
        n_partitions=max(protocol.check_partitions, 1),
        # only the champion besides each expert's own cell, unless the check is on
        n_archs=protocol.check_archs if protocol.check_partitions > 0 else 1,
        executor=executor,
        extra_cells=extra,
    )
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
    return found, check


__all__ = ["run_final"]
