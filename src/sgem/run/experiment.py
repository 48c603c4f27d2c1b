"""SGEM on one task and seed: the search, then the final stage (`sgem.final.run_final`).

The Python API and the benchmarks call `run_sgem`; `sgem run` / `sgem fit` go through
`sgem.run.pipeline`, which runs the same two stages with a run directory around them. The
returned `MethodResult`'s `row()` is the one result schema; `save()` writes the model
directory `sgem.load` reads.
"""

from __future__ import annotations

import time
from typing import Any

from ..data.task import ClusteredTask
from ..final.protocol import FinalProtocol
from ..final.result import MethodResult, drop_empty_experts
from ..final.stage import run_final
from ..search.config import SearchConfig
from ..search.sgem import SGEM
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
    **fit_options: Any,
) -> MethodResult:
    """SGEM end to end: the search (`fit_options` go to `SGEM.fit`: store, executor,
    resume, deadline), then the final stage under the protocol of `config` and the final
    keys (`FinalProtocol.from_config`)."""
    started = time.perf_counter()
    listener = fit_options.pop("listener", None)
    search = SGEM(space, config, seed=seed, progress=progress, listener=listener, device=device)
    found = search.fit(task, **fit_options)
    protocol = FinalProtocol.from_config(config, final_length, final_epochs, crps_samples)
    return run_final(task, search.trainer_, found, None, protocol, seed=seed, started=started)


__all__ = ["MethodResult", "drop_empty_experts", "run_sgem"]
