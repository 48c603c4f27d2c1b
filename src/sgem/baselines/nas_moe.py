"""NAS-MoE: a random fixed partition, a cell searched independently for every expert.

Per region, random search over `budget.trainings // K` cells trained on that region; each
expert keeps its region's best. Architecture search without routing search: what SGEM
adds on top is choosing the partition.
"""

from __future__ import annotations

import time

import numpy as np

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from ..random_streams import Stream, stream_rng
from .base import CandidateLog, cluster_moe_result, make_trainer, random_partition, search_region


def search_per_region(
    task: ClusteredTask,
    budget: MethodBudget,
    assignment: np.ndarray,
    seed: int,
    method: str,
    stream: Stream,
) -> tuple[list, int]:
    """Independent random search per expert region; returns (architectures, trainings)."""
    space = budget.require_space(method)
    log = CandidateLog(make_trainer(task, budget, method), seed)
    rng = stream_rng(seed, stream)
    n_groups = int(assignment.max()) + 1
    per_region = max(budget.trainings // n_groups, 1)
    archs = [
        search_region(log, space, assignment == k, per_region, rng)[0] for k in range(n_groups)
    ]
    return archs, log.n_trained


class NASMoE:
    """Random fixed partition + K independently searched cells."""

    name = "nas_moe"
    uses_domain_labels = False

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        start = time.perf_counter()
        rng = stream_rng(seed, Stream.NAS_MOE_PARTITION)
        assignment = random_partition(task.n_clusters, budget.n_experts, rng)
        archs, n_trained = search_per_region(
            task, budget, assignment, seed, self.name, Stream.NAS_MOE_SEARCH
        )
        return cluster_moe_result(self.name, task, budget, assignment, archs, n_trained, start)
