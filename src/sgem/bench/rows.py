"""SGEM's row of a forecasting table: its final stage on a finished search, as a
`MethodResult` row like the baselines' (`MethodResult.row`, the one row builder).

One entry for every benchmark that scores SGEM (the table run and the replays), so a
replayed row and a fresh one carry the same fields.
"""

from __future__ import annotations

from typing import Any

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.sgem import SgemMethod
from ..search.config import SearchConfig


def sgem_row(
    task: ClusteredTask, cfg: dict[str, Any], budget: MethodBudget, trainer: Any, found: Any
) -> dict[str, Any]:
    """SGEM's final stage on a finished search under `budget.final_length`
    (`SgemMethod.final`: the champion cell and the second look where the config asks for
    them), as a table row."""
    method = SgemMethod(SearchConfig.from_dict(cfg["search"]))
    return method.final(task, budget, trainer, found).row(task)
