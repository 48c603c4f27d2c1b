"""Random-MoE: random architecture tuples on a random cluster split, the best retrained.

One random partition per seed; `budget.trainings // K` random K-tuples of cells, each cell
trained briefly (the candidate training) on its expert's region; the tuple with the best
measured objective (sum over regions of cluster size x validation loss) is retrained. The
tuple is chosen as a whole: no per-region selection (that is NAS-MoE).
"""

from __future__ import annotations

import time

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from ..random_streams import Stream, stream_rng
from .base import CandidateLog, cluster_moe_result, make_trainer, random_partition


class RandomMoE:
    """Random cells (whole tuples) on a random partition."""

    name = "random_moe"
    uses_domain_labels = False

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        start = time.perf_counter()
        space = budget.require_space(self.name)
        k = budget.n_experts
        rng = stream_rng(seed, Stream.RANDOM_MOE)
        assignment = random_partition(task.n_clusters, k, rng)
        log = CandidateLog(make_trainer(task, budget, self.name), seed)
        best: tuple[float, list] | None = None
        for _ in range(max(budget.trainings // k, 1)):
            archs = space.sample_many(k, rng)
            value = sum(log.objective(a, assignment == e) for e, a in enumerate(archs))
            if best is None or value < best[0]:
                best = (value, archs)
        assert best is not None
        return cluster_moe_result(
            self.name, task, budget, assignment, best[1], log.n_trained, start
        )
