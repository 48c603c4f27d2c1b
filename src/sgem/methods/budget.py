"""What a method may spend on one task: one frozen value that every method reads.

Why one value: the benchmarks, the API and the leaderboard used to hand each method its
own mix of a setup object, a seed argument, a trainer and loose lengths. A `MethodBudget`
says it once (the space, how candidates train, K, the candidate trainings a search may
spend, the final stage's protocol and lengths, the CRPS samples, the device, the seed and
an optional wall-clock deadline); `shared` carries what methods of one run share (one
`Trainer` per task, searches that several methods reuse), so nothing is built twice.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..data.task import ClusteredTask
from ..final.protocol import FinalProtocol
from ..space.arch import CellSpace
from ..train.trainer import TrainConfig, Trainer


class Shared:
    """What the methods of one run share: one `Trainer` per (task, space, training,
    device), and `cache`, results several methods reuse (the best single cell that Global
    single, BestArch x K and Geometry routing all use; DARTS searches)."""

    def __init__(self) -> None:
        self.cache: dict = {}
        self._trainers: dict[tuple, Trainer] = {}

    def trainer(self, task: ClusteredTask, space: CellSpace, train: TrainConfig, device: str):
        key = (id(task), id(space), train, str(device))
        if key not in self._trainers:
            self._trainers[key] = Trainer(task, space, train, device=device)
        return self._trainers[key]

    def adopt(self, trainer: Trainer, device: str) -> None:
        """Hand a trainer built elsewhere (SGEM's search builds its own) to later methods."""
        key = (id(trainer.task), id(trainer.space), trainer.config, str(device))
        self._trainers.setdefault(key, trainer)


@dataclass(frozen=True)
class MethodBudget:
    """What one method may spend on one task and seed.

    Attributes:
        seed: the seed of every random choice the method makes.
        space: the cell search space (methods that build networks of cells).
        train: how candidates train during a search (and the final batch size / lr).
        n_experts: K, the experts of every MoE method.
        trainings: candidate trainings a searching method may spend.
        final_steps: optimiser steps of each final network on train + validation (also the
            training length of the direct forecasters DLinear and MoLE).
        final_epochs: if set, each final network trains this many epochs instead.
        final_length: the config's name of the final length rule
            (`sgem.final.protocol.FINAL_LENGTHS`: "fixed" or "validation...").
        crps_samples: samples per forecast for the sample-based CRPS.
        device: torch device for training.
        deadline: a `time.perf_counter()` value after which a search starts no iteration.
        reference_values: the most values (rows x features x fits) a scikit-learn
            reference is fitted on, a seeded sample of the rows beyond it (None: every row;
            `sgem.leaderboard.table_members.SCIKIT_LEARN_VALUES_PER_SECOND`).
        reference_seconds: the seconds a scikit-learn reference may spend choosing its
            settings by cross-validation (None: scikit-learn's defaults;
            `sgem.leaderboard.boosting_settings`).
        shared: what methods of one run share (`Shared`); copied by reference.
    """

    seed: int = 0
    space: CellSpace | None = None
    train: TrainConfig = field(default_factory=TrainConfig)
    n_experts: int = 4
    trainings: int = 24
    final_steps: int = 600
    final_epochs: float | None = None
    final_length: str = "fixed"
    crps_samples: int = 100
    device: str = "cpu"
    deadline: float | None = None
    reference_values: int | None = None
    reference_seconds: float | None = None
    shared: Shared = field(default_factory=Shared, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.n_experts < 1 or self.trainings < 1 or self.final_steps < 1:
            raise ValueError(
                f"need n_experts, trainings and final_steps >= 1, got {self.n_experts}, "
                f"{self.trainings}, {self.final_steps}"
            )
        self.protocol()  # an unknown final length fails here, not after a search

    @property
    def cache(self) -> dict:
        return self.shared.cache

    def replace(self, **changes: Any) -> MethodBudget:
        """The same budget with `changes` (what is shared stays shared)."""
        return dataclasses.replace(self, **changes)

    def protocol(self) -> FinalProtocol:
        """The final stage of every cluster-gated baseline (SGEM's protocol, no second look)."""
        return FinalProtocol.from_name(
            self.final_length,
            self.final_steps,
            final_epochs=self.final_epochs,
            crps_samples=self.crps_samples,
        )

    def require_space(self, method: str) -> CellSpace:
        if self.space is None:
            raise ValueError(f"{method} searches architectures: give MethodBudget(space=...)")
        return self.space

    def trainer(self, task: ClusteredTask, method: str) -> Trainer:
        """The run's one `Trainer` for `task` (built on first use, then handed to every
        method of the run)."""
        return self.shared.trainer(task, self.require_space(method), self.train, self.device)


__all__ = ["MethodBudget", "Shared"]
