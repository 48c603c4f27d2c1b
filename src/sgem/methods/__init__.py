"""The method layer: one shape for every method, one budget, one result, one row.

Every method (SGEM, `sgem.methods.sgem.SgemMethod`; every baseline of `sgem.baselines`;
every reference of the leaderboard, `sgem.leaderboard.members`) implements
`fit_evaluate(task, budget) -> MethodResult` (`protocol.Method`). `MethodBudget`
(`budget.py`) says what a method may spend and carries the run's one `Trainer` per task;
`MethodResult` (`result.py`) is what it produced, and `MethodResult.row(task)` the one
row, every metric from `sgem.moe.scoring.method_scores`. Names resolve on first use.
"""

from ..lazy import lazy_attributes

_NAMES = {
    "Fitted": ".result",
    "Method": ".protocol",
    "MethodBudget": ".budget",
    "MethodResult": ".result",
    "SgemMethod": ".sgem",
    "available_methods": ".protocol",
    "drop_empty_experts": ".result",
    "get_method": ".protocol",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_attributes(__name__, _NAMES, __all__)
