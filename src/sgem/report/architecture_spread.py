"""The paper's architecture-spread row, measured: how much the choice of architecture
matters on each domain, from new trainings.

Kept apart from `sgem.report.analysis`, which only reads finished runs: this trains
`n_archs x domains` candidates. The free estimate from a run's stored observations is
`sgem.report.analysis.spread_from_observations`.
"""

from __future__ import annotations

import numpy as np

from ..baselines.base import CandidateLog
from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..random_streams import Stream, stream_rng
from ..space.arch import CellSpace
from ..train.trainer import TrainConfig


def measure_architecture_spread(
    task: ClusteredTask,
    space: CellSpace,
    train_config: TrainConfig,
    n_archs: int = 50,
    seed: int = 0,
) -> dict[str, float]:
    """Per domain, the std of the region NLL of `n_archs` random architectures, each trained
    on its domain's region under oracle routing (the task's `oracle_partition`)."""
    if task.oracle_partition is None:
        raise ValueError("measure_architecture_spread needs task.oracle_partition")
    budget = MethodBudget(seed=seed, space=space, train=train_config)
    log = CandidateLog(budget.trainer(task, "the architecture spread"), seed)
    archs = space.sample_many(n_archs, stream_rng(seed, Stream.ARCH_SPREAD))
    names = task.meta.get("domain_names")
    out = {}
    for d in np.unique(task.oracle_partition):
        region = task.oracle_partition == d
        values = [log.region_score(a, region) for a in archs]
        out[names[int(d)] if names else str(d)] = float(np.std(values))
    return out


__all__ = ["measure_architecture_spread"]
