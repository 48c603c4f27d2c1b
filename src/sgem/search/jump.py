"""A partition jump's record: what it proposed and, once its trainings are in, its verdict.

A jump is decided in two moments that a pipelined search separates by d steps: proposed
(the partition, trainings sent out with a batch) and judged (when that batch is collected:
accepted only if the proposal's *measured* objective beats the current partition's). The
record travels between them in a checkpoint, and its JSON form is the trace row's "jump"
(read by `search.selection` and the convergence figure), so `to_json` keeps those keys.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..space.arch import Arch


@dataclass(frozen=True)
class Jump:
    """`reason`: why the jump trained nothing (its record is then final). After the verdict,
    `architectures` are the incumbents that go with the winning partition."""

    proposal: list[int]
    accepted: bool = False
    reason: str | None = None
    measured_current: float | None = None
    measured_proposal: float | None = None
    architectures: list[Arch] | None = None

    @property
    def judged(self) -> bool:
        return self.measured_current is not None

    def verdict(
        self, current: tuple[float, list[Arch]], proposed: tuple[float, list[Arch]]
    ) -> Jump:
        """The record with its verdict from the measured (value, architectures) of the
        current and of the proposed partition: accepted only if the proposal measured better."""
        (current_value, current_archs), (proposal_value, proposal_archs) = current, proposed
        accepted = bool(proposal_value > current_value)
        return replace(
            self,
            accepted=accepted,
            measured_current=current_value,
            measured_proposal=proposal_value,
            architectures=list(proposal_archs if accepted else current_archs),
        )

    def to_json(self) -> dict:
        """The trace's and the checkpoint's form (the keys written before this type)."""
        out: dict = {"proposal": list(self.proposal), "accepted": self.accepted}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.judged:
            assert self.architectures is not None
            out["measured_current"] = self.measured_current
            out["measured_proposal"] = self.measured_proposal
            out["architectures"] = [a.to_json() for a in self.architectures]
        return out

    @classmethod
    def from_json(cls, data: dict) -> Jump:
        archs = data.get("architectures")
        return cls(
            proposal=[int(v) for v in data["proposal"]],
            accepted=bool(data["accepted"]),
            reason=data.get("reason"),
            measured_current=data.get("measured_current"),
            measured_proposal=data.get("measured_proposal"),
            architectures=None if archs is None else [Arch.from_json(a) for a in archs],
        )


__all__ = ["Jump"]
