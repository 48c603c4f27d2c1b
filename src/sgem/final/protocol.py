"""The final stage's protocol as one frozen value: how experts start, how long they train.

Why a value and not a string: the config spells the length rule as one name
("validation-warm-norefit"), and code that made the stage cheaper used to rewrite that name
with string replacement. Here each choice is its own typed field, the config name is parsed
once (`FinalProtocol.from_config`) and written back only where a file records it
(`FinalProtocol.length_name`: result.json and the time-budget plan keep their spelling).

Torch-free, so planning a time budget or checking a config does not load torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

#: the config's spellings of the length rule (`final_length:`), one per field combination
FINAL_LENGTHS = (
    "fixed",
    "validation",
    "validation-warm",
    "validation-norefit",
    "validation-warm-norefit",
    "validation-twins",
    "validation-warm-twins",
)

Length = Literal["fixed", "tracked"]


@dataclass(frozen=True)
class FinalProtocol:
    """How the final networks of a routing and its cells are trained and tested.

    Attributes:
        final_steps: optimiser steps per final network (or the tracking run's base length).
        final_epochs: if set, passes over each network's own data instead of `final_steps`.
        length: "fixed" (`final_steps` / `final_epochs`) or "tracked" (each network's
            length chosen on validation, `sgem.final.length`).
        warm_start: (tracked only) each expert fine-tunes a global network of its cell
            (`sgem.final.warm_start`).
        refit: (tracked only) retrain on train + validation for the chosen length; False
            keeps the tracking run's network at its best step.
        crps_samples: samples per forecast for the sample-based CRPS.
        champion_cells: (warm starts only) random cells trained on every cluster whose best
            is offered to every expert (`sgem.final.champion`); 0: off.
        check_partitions: the finalists' second look (`sgem.final.check`, tracked only):
            contenders judged by the final protocol; 0: off.
        check_archs: candidate cells per region in that second look.
        twins: (tracked with refit only) each final expert is shipped as the average of its
            refitted and its tracked network (`sgem.moe.averaged`): no extra training.
    """

    final_steps: int
    final_epochs: float | None = None
    length: Length = "fixed"
    warm_start: bool = False
    refit: bool = True
    crps_samples: int = 100
    champion_cells: int = 0
    check_partitions: int = 0
    check_archs: int = 2
    twins: bool = False

    def __post_init__(self) -> None:
        if self.length not in ("fixed", "tracked"):
            raise ValueError(f"length must be 'fixed' or 'tracked', got {self.length!r}")
        if self.length == "fixed" and (self.warm_start or not self.refit):
            raise ValueError(
                "warm_start and refit=False need length='tracked' (a length chosen on "
                "validation); use length='tracked' or drop them"
            )
        if self.twins and not (self.tracked and self.refit):
            raise ValueError(
                "twins need a tracked length with a refit (the tracked and the refitted "
                "network are averaged); use length='tracked', refit=True or drop twins"
            )
        if self.final_steps < 1 or self.crps_samples < 1:
            raise ValueError(
                f"need final_steps >= 1 and crps_samples >= 1, got {self.final_steps}, "
                f"{self.crps_samples}"
            )

    @property
    def tracked(self) -> bool:
        return self.length == "tracked"

    @property
    def length_name(self) -> str:
        """The config's spelling of the length rule (what result.json and plans record)."""
        if not self.tracked:
            return "fixed"
        return (
            "validation"
            + ("-warm" if self.warm_start else "")
            + ("" if self.refit else "-norefit")
            + ("-twins" if self.twins else "")
        )

    @property
    def uses_champion(self) -> bool:
        return self.warm_start and self.champion_cells > 0

    def replace(self, **changes: Any) -> FinalProtocol:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_name(cls, final_length: str, final_steps: int, **fields: Any) -> FinalProtocol:
        """A protocol from the config's `final_length` name (the one place it is parsed)."""
        length, warm, refit = parse_length(final_length)
        twins = parse_twins(final_length)
        return cls(final_steps, length=length, warm_start=warm, refit=refit, twins=twins, **fields)

    @classmethod
    def from_config(
        cls,
        search: Any,
        final_length: str = "fixed",
        final_epochs: float | None = None,
        crps_samples: int = 100,
    ) -> FinalProtocol:
        """Config -> protocol: a `SearchConfig` (final_steps, champion_cells,
        final_check_partitions, final_check_archs) and the run config's final keys."""
        return cls.from_name(
            final_length,
            search.final_steps,
            final_epochs=final_epochs,
            crps_samples=crps_samples,
            champion_cells=search.champion_cells,
            check_partitions=search.final_check_partitions,
            check_archs=search.final_check_archs,
        )


def parse_length(final_length: str) -> tuple[Length, bool, bool]:
    """(length, warm_start, refit) of a config name; a clear error for an unknown one."""
    if final_length not in FINAL_LENGTHS:
        raise ValueError(f"unknown final length {final_length!r}: use one of {list(FINAL_LENGTHS)}")
    if final_length == "fixed":
        return "fixed", False, True
    return "tracked", "-warm" in final_length, not final_length.endswith("-norefit")


def parse_twins(final_length: str) -> bool:
    """Whether a config name ships twin experts ("-twins": `FinalProtocol.twins`)."""
    return final_length.endswith("-twins")


__all__ = ["FINAL_LENGTHS", "FinalProtocol", "Length", "parse_length", "parse_twins"]
