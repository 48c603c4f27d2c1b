"""Where a run's wall clock goes: exclusive time per named phase.

Phases nest (a candidate training inside an exploration round, say); the time of an inner
phase counts only for the inner one, so the phases of a run add up to its total and a
breakdown answers "what would get faster if X got faster". `result.json["timing"]` and each
`trace.jsonl` row (`phase_seconds`) carry the totals.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

#: the phases a run reports, in the order of a run (others may appear)
PHASES = (
    "task",
    "initial_design",
    "candidate_training",
    "surrogate_fit",
    "e_step",
    "routing_m_step",
    "architecture_m_step",
    "acquisition",
    "exploration",
    "finalisation",
    "checkpoint",
    "final_check",
    "final_retrain",
    "reporting",
)


class PhaseTimer:
    """Accumulates exclusive wall-clock seconds per phase (`with timer.phase("x"): ...`)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self._stack: list[str] = []
        self._since = 0.0

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        now = time.perf_counter()
        if self._stack:  # pause the enclosing phase
            self._add(self._stack[-1], now - self._since)
        self._stack.append(name)
        self._since = now
        try:
            yield
        finally:
            now = time.perf_counter()
            self._add(self._stack.pop(), now - self._since)
            self._since = now  # the enclosing phase resumes

    def _add(self, name: str, seconds: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + seconds

    def snapshot(self) -> dict[str, float]:
        """Totals so far (rounded to ms), in `PHASES` order, then any other phase."""
        order = [p for p in PHASES if p in self.totals]
        order += sorted(p for p in self.totals if p not in PHASES)
        return {p: round(self.totals[p], 3) for p in order}

    @staticmethod
    def difference(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
        """Seconds per phase spent between two snapshots (phases with no time left out)."""
        out = {p: round(s - before.get(p, 0.0), 3) for p, s in after.items()}
        return {p: s for p, s in out.items() if s > 0}


__all__ = ["PHASES", "PhaseTimer"]
