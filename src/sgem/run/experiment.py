"""SGEM on one task and seed for the Python API: `sgem.methods.SgemMethod` under the
budget its search config implies.

`sgem run` / `sgem fit` go through `sgem.run.pipeline`, which runs the same two stages
with a run directory around them. The returned `MethodResult`'s `row()` is the one result
schema; `save()` writes the model directory `sgem.load` reads.
"""

from __future__ import annotations

from typing import Any

from ..data.task import ClusteredTask
from ..methods.result import MethodResult, drop_empty_experts
from ..methods.sgem import SgemMethod
from ..search.config import SearchConfig
from ..space.arch import CellSpace


def run_sgem(
    task: ClusteredTask,
    space: CellSpace,
    config: SearchConfig,
    seed: int,
    *,
    final_epochs: float | None = None,
    final_length: str = "fixed",
    crps_samples: int = 100,
    device: str = "cpu",
    progress: bool = False,
    deadline: float | None = None,
    **fit_options: Any,
) -> MethodResult:
    """SGEM end to end: the search (`fit_options` go to `SGEM.fit`: store, executor,
    resume; `listener` to `SGEM`), then the final stage under the protocol of `config` and
    the final keys (`FinalProtocol.from_config`)."""
    listener = fit_options.pop("listener", None)
    budget = SgemMethod.budget_of(
        config,
        seed,
        space=space,
        final_epochs=final_epochs,
        final_length=final_length,
        crps_samples=crps_samples,
        device=device,
        deadline=deadline,
    )
    method = SgemMethod(config, progress=progress, listener=listener, **fit_options)
    return method.fit_evaluate(task, budget)


__all__ = ["MethodResult", "drop_empty_experts", "run_sgem"]
