"""SGEM as a method: the search (the paper's Algorithm 1), then the final stage.

`fit_evaluate(task, budget)` runs both; `final(...)` runs the final stage alone on a
finished search (a benchmark trains one search's final model under several lengths, a
replay starts from a saved search). The search's own settings are the method's
(`SearchConfig`); the budget must agree with them on K, the candidate training and the
final steps. The search's `Trainer` is handed to the budget's shared state, so methods run
after SGEM on the same task reuse it.
"""

from __future__ import annotations

import time
from typing import Any

from ..data.task import ClusteredTask
from ..final.protocol import FinalProtocol
from ..final.stage import run_final
from ..search.config import SearchConfig
from ..search.sgem import SGEM, SearchResult
from ..train.trainer import Trainer
from .budget import MethodBudget
from .result import MethodResult


class SgemMethod:
    """SGEM end to end under a `MethodBudget`. `fit_options` go to `SGEM.fit` (store,
    executor, resume); `listener` and `progress` to `SGEM`."""

    name = "sgem"
    uses_domain_labels = False

    def __init__(
        self,
        config: SearchConfig | None = None,
        *,
        progress: bool = False,
        listener: Any = None,
        **fit_options: Any,
    ) -> None:
        self.config = config or SearchConfig()
        self.progress = progress
        self.listener = listener
        self.fit_options = fit_options

    @classmethod
    def budget_of(cls, config: SearchConfig, seed: int, **fields: Any) -> MethodBudget:
        """The budget that agrees with `config` (K, candidate training, final steps)."""
        return MethodBudget(
            seed=seed,
            train=config.train,
            n_experts=config.n_experts,
            final_steps=config.final_steps,
            **fields,
        )

    def _check(self, budget: MethodBudget) -> None:
        cfg = self.config
        mine = (cfg.n_experts, cfg.train, cfg.final_steps)
        if mine != (budget.n_experts, budget.train, budget.final_steps):
            raise ValueError(
                "SGEM's search config and the method budget disagree on n_experts, the "
                f"candidate training or final_steps ({mine[0]}, {mine[2]} vs "
                f"{budget.n_experts}, {budget.final_steps}); build the budget with "
                "SgemMethod.budget_of(config, seed, ...)"
            )

    def protocol(self, budget: MethodBudget) -> FinalProtocol:
        """The final stage's protocol: the budget's length, the config's champion cells and
        second look."""
        return FinalProtocol.from_config(
            self.config, budget.final_length, budget.final_epochs, budget.crps_samples
        )

    def search(self, task: ClusteredTask, budget: MethodBudget) -> tuple[Trainer, SearchResult]:
        """The search alone: (its trainer, its result)."""
        self._check(budget)
        space = budget.require_space(self.name)
        search = SGEM(
            space,
            self.config,
            seed=budget.seed,
            progress=self.progress,
            listener=self.listener,
            device=budget.device,
        )
        found = search.fit(task, deadline=budget.deadline, **self.fit_options)
        budget.shared.adopt(search.trainer_, budget.device)
        return search.trainer_, found

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        started = time.perf_counter()
        trainer, found = self.search(task, budget)
        return self.final(task, budget, trainer, found, started=started)

    def final(
        self,
        task: ClusteredTask,
        budget: MethodBudget,
        trainer: Trainer,
        found: SearchResult,
        *,
        started: float | None = None,
        executor: object | None = None,
    ) -> MethodResult:
        """The final stage on a finished search under the budget's final length: the
        champion cell and the finalists' second look where the config asks for them."""
        result = run_final(
            task,
            trainer,
            found,
            None,
            self.protocol(budget),
            seed=budget.seed,
            started=started,
            executor=executor,
        )
        result.extra = search_fields(found, result.search)
        return result


def search_fields(searched: SearchResult, final: SearchResult | None) -> dict[str, Any]:
    """What the search returned before the final stage's choices, and the second look's
    summary where it ran (SGEM's extra row fields)."""
    out: dict[str, Any] = {
        "search_architectures": [a.key for a in searched.architectures],
        "search_n_trained": searched.n_trained,
    }
    check = ((final.selection if final is not None else None) or {}).get("final_check")
    if check is not None:
        out["final_check"] = {
            "changed_partition": check["changed_partition"],
            "changed_architectures": check["changed_architectures"],
            "tracking_runs": check["tracking_runs"],
            "seconds": check["seconds"],
            "validation_nll": [c["validation_nll"] for c in check["contenders"]],
            # each expert's tracked cells (validation NLL at the chosen length) and its pick
            "regions": next(c["regions"] for c in check["contenders"] if c["chosen"]),
        }
    return out


__all__ = ["SgemMethod", "search_fields"]
