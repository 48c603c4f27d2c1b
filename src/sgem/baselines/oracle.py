"""Oracle per-domain specialists: each cluster routed to the expert of its majority domain,
a cell searched for each domain. Uses the domain labels (through the task's
`oracle_partition`): an upper bound on what perfect routing achieves, not a competitor.
"""

from __future__ import annotations

import time

import numpy as np

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from ..random_streams import Stream
from .base import cluster_moe_result
from .nas_moe import search_per_region


class OracleSpecialists:
    """Routing = the oracle partition (one expert per domain); per-domain random search."""

    name = "oracle"
    uses_domain_labels = True

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        if task.oracle_partition is None:
            raise ValueError(
                "the oracle baseline needs task.oracle_partition (the majority domain of each "
                "cluster); this task has none"
            )
        start = time.perf_counter()
        _, assignment = np.unique(task.oracle_partition, return_inverse=True)
        assignment = assignment.astype(np.int64)
        archs, n_trained = search_per_region(
            task, budget, assignment, seed, self.name, Stream.ORACLE_SEARCH
        )
        return cluster_moe_result(
            self.name,
            task,
            budget,
            assignment,
            archs,
            n_trained,
            start,
            uses_domain_labels=True,
        )
