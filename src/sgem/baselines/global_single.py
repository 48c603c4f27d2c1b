"""Global single: one network (K = 1) for all clusters, its cell found by random search."""

from __future__ import annotations

import time

import numpy as np

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from .base import best_single_architecture, cluster_moe_result


class GlobalSingle:
    """K = 1: the best of `budget.trainings` random cells trained on all clusters."""

    name = "global_single"
    uses_domain_labels = False

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        start = time.perf_counter()
        arch, n_trained = best_single_architecture(task, budget)
        assignment = np.zeros(task.n_clusters, dtype=np.int64)
        result = cluster_moe_result(self.name, task, budget, assignment, [arch], n_trained, start)
        result.extra["oracle_match"] = None  # one expert: there is no routing to recover
        return result
