"""Geometry routing: clusters grouped by k-means over their centroids, K copies of the
best single cell.

Routing by where clusters lie in feature space, not by how well an expert fits them: the
baseline that likelihood-driven routing must beat. The split itself is
`sgem.search.geometry.geometry_partition`, the same one SGEM keeps as a finalist.
"""

from __future__ import annotations

import time

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from ..search.geometry import geometry_partition
from .base import best_single_architecture, cluster_moe_result


class GeometryRouting:
    """k-means over cluster centroids to K groups; K copies of the best single cell."""

    name = "geometry"
    uses_domain_labels = False

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        start = time.perf_counter()
        arch, n_trained = best_single_architecture(task, budget)
        assignment = geometry_partition(task, budget.n_experts, seed)
        return cluster_moe_result(
            self.name, task, budget, assignment, [arch] * budget.n_experts, n_trained, start
        )
