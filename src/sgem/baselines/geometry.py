"""Geometry routing: clusters grouped by k-means over their centroids, K copies of the
best single cell.

Routing by where clusters lie in feature space, not by how well an expert fits them: the
baseline that likelihood-driven routing must beat. The split itself is
`sgem.search.geometry.geometry_partition`, the same one SGEM keeps as a finalist.
"""

from __future__ import annotations

import time

from ..data.task import ClusteredTask
from ..search.geometry import geometry_partition
from .base import BaselineSetup, best_single_architecture, cluster_moe_result


class GeometryRouting:
    """k-means over cluster centroids to K groups; K copies of the best single cell."""

    name = "geometry"
    uses_domain_labels = False

    def fit_evaluate(self, task: ClusteredTask, setup: BaselineSetup, seed: int) -> dict:
        start = time.perf_counter()
        arch, n_trained = best_single_architecture(task, setup, seed)
        assignment = geometry_partition(task, setup.n_experts, seed)
        return cluster_moe_result(
            self.name, task, setup, assignment, [arch] * setup.n_experts, seed, n_trained, start
        )
