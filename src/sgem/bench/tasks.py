"""A benchmark's forecasting task: the package's own builder, one build path.

`sgem run ts-offline`, `sgem fit` and every benchmark build the task of a run config's
`task` section with `sgem.run.runconfig.build_task_from_config`; the task records each
domain's file frequency and MASE period itself (`task.meta["frequencies"]`,
`task.meta["seasonality"]`), so no benchmark sets a seasonal period of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..data.task import ClusteredTask
from ..run.runconfig import build_task_from_config


def build_task(task_cfg: Mapping[str, Any], seed: int) -> ClusteredTask:
    """The task of one seed (windows, split and clustering depend on it)."""
    return build_task_from_config({**task_cfg, "name": task_cfg.get("name", "timeseries")}, seed)


def task_summary(task: ClusteredTask, n_experts: int) -> str:
    """One line for the tables: sizes, domains, cluster purity and K."""
    return (
        f"{task.summary()}; domains {task.meta['domain_names']}; mean purity "
        f"{task.meta['mean_purity']:.3f}; K = {n_experts}"
    )
