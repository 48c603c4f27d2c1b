"""BestArch x K: K copies of the best single cell on a random cluster split.

The analogue of the paper's DARTS x K: architecture search done once, globally, and the
same cell reused by every expert; the routing is a random partition, so the gain over
Global single is what K separate sets of weights alone buy.
"""

from __future__ import annotations

import time

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from ..random_streams import Stream, stream_rng
from .base import best_single_architecture, cluster_moe_result, random_partition


class BestArchTimesK:
    """The best single architecture, K copies, random partition."""

    name = "bestarch_x_k"
    uses_domain_labels = False

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        start = time.perf_counter()
        arch, n_trained = best_single_architecture(task, budget)
        rng = stream_rng(seed, Stream.BASELINE_PARTITION)
        assignment = random_partition(task.n_clusters, budget.n_experts, rng)
        return cluster_moe_result(
            self.name, task, budget, assignment, [arch] * budget.n_experts, n_trained, start
        )
