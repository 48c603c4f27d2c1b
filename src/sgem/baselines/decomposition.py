"""The decomposition ablation (paper appendix, Table decomp): routing vs. architecture.

Each setting fixes one factor and varies the other, all with DARTS-searched cells and the
cluster-gated final protocol:

(i)  architecture fixed (the cell searched on the full mixture), routing varied: a random
     cluster split vs. the oracle source split;
(ii) oracle routing fixed, architecture varied: the full-mix cell for every expert, or the
     cell searched on source s used for every expert (one setting per source).

The block (iii) of the paper (SGEM with frozen vs. learned routing) is a search
configuration, `SearchConfig(freeze_routing=True)`, not a baseline.

Every setting is a `Baseline` (`name`, `uses_domain_labels`, `fit_evaluate`); searches are
shared through `budget.cache`, so running all settings costs one DARTS search per source
plus one on the full mixture.
"""

from __future__ import annotations

import time

import numpy as np

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from ..random_streams import Stream, stream_rng
from .base import cluster_moe_result, random_partition
from .darts import DartsConfig, cached_darts_search, oracle_assignment

ROUTINGS = ("random", "oracle")


class DecompositionSetting:
    """One row of the ablation: `routing` ("random" or "oracle") and the cell every expert
    uses, `arch_from` ("full": searched on all clusters, or a source id: searched on the
    clusters whose majority source it is)."""

    def __init__(
        self, routing: str, arch_from: str | int, config: DartsConfig | None = None
    ) -> None:
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {list(ROUTINGS)}, got {routing!r}")
        if arch_from != "full" and not isinstance(arch_from, int):
            raise ValueError(f"arch_from must be 'full' or a source id (int), got {arch_from!r}")
        self.routing = routing
        self.arch_from = arch_from
        self.config = config or DartsConfig()
        src = "full" if arch_from == "full" else f"source{arch_from}"
        self.name = f"decomp_{routing}_split_{src}_arch"
        # the oracle routing, and a cell searched on one source, both read the source labels
        self.uses_domain_labels = routing == "oracle" or arch_from != "full"

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        start = time.perf_counter()
        if self.arch_from == "full":
            mask = None
        else:
            oracle = oracle_assignment(task, budget.n_experts)
            groups = np.unique(np.asarray(task.oracle_partition))
            if self.arch_from not in groups:
                raise ValueError(
                    f"source {self.arch_from} is not in the oracle partition ({groups.tolist()})"
                )
            mask = oracle == int(np.searchsorted(groups, self.arch_from))
        found = cached_darts_search(task, budget, mask, self.config, seed)
        if self.routing == "oracle":
            assignment = oracle_assignment(task, budget.n_experts)
        else:
            assignment = random_partition(
                task.n_clusters, budget.n_experts, stream_rng(seed, Stream.BASELINE_PARTITION)
            )
        return cluster_moe_result(
            self.name,
            task,
            budget,
            assignment,
            [found.arch] * budget.n_experts,
            0,
            start,
            uses_domain_labels=self.uses_domain_labels,
            extra={
                "block": "i" if self.arch_from == "full" else "ii",
                "routing": self.routing,
                "arch_from": self.arch_from,
                "darts": found.to_json(),
            },
        )


def decomposition_settings(
    task: ClusteredTask, config: DartsConfig | None = None
) -> list[DecompositionSetting]:
    """All rows for `task`: (i) random / oracle split with the full-mix cell, (ii) oracle
    split with each source's cell (the oracle + full-mix row is shared by both blocks)."""
    if task.oracle_partition is None:
        raise ValueError(
            f"task {task.name!r} has no oracle partition; the decomposition needs source ids"
        )
    sources = [int(s) for s in np.unique(np.asarray(task.oracle_partition))]
    rows = [DecompositionSetting("random", "full", config)]
    rows.append(DecompositionSetting("oracle", "full", config))
    rows += [DecompositionSetting("oracle", s, config) for s in sources]
    return rows


def run_decomposition(
    task: ClusteredTask,
    budget: MethodBudget,
    config: DartsConfig | None = None,
) -> list[MethodResult]:
    """Every setting of the ablation on one (task, seed); the DARTS searches are shared."""
    return [row.fit_evaluate(task, budget) for row in decomposition_settings(task, config)]


def _register() -> None:
    """Self-registration with the package registry: the rows of a two-source mixture."""
    from . import register_baseline

    for routing, arch_from in (
        ("random", "full"),
        ("oracle", "full"),
        ("oracle", 0),
        ("oracle", 1),
    ):
        setting = DecompositionSetting(routing, arch_from)
        register_baseline(setting.name, lambda r=routing, a=arch_from: DecompositionSetting(r, a))


_register()
