"""What passes between the search loop's steps (`sgem.search.loop`), as types.

Proposal   the E-, M- and S-steps' decision at step t (nothing trained yet)
InFlight   that decision sent out as one batch: its jobs, what its row and jump need
           when it is collected, and its place in the ledger (a checkpoint holds it)
Iterate    the routing and incumbents a trace row reports, with the objective J
TraceRow   one row of the trace; `to_json` writes the keys that the run directory's
           trace.jsonl, the checkpoints, `search.selection` and the reports read
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.task import ClusteredTask
from ..metrics import partition_match
from ..space.arch import Arch
from .exploration import ExplorationBatch
from .jump import Jump
from .ledger import Job, Ticket
from .store import mask_from_str, mask_to_str


@dataclass
class Proposal:
    """What one iteration's E-, M- and S-steps decided; nothing is trained yet."""

    logits: np.ndarray
    archs: list[Arch]
    routing: np.ndarray
    assignment: np.ndarray
    uniforms: np.ndarray
    jobs: list[Job]  # the S-step's: incumbents and acquisitions
    routing_step_accepted: bool


@dataclass(frozen=True)
class Iterate:
    """A routing and its incumbents as a trace row reports them: J under the surrogate of
    the moment, the hard partition, its agreement with the oracle, the cells."""

    objective: float
    routing: list[int]
    oracle_match: float | None
    architectures: list[str]

    @classmethod
    def of(
        cls, objective: float, assignment: np.ndarray, archs: list[Arch], task: ClusteredTask
    ) -> Iterate:
        return cls(objective, assignment.tolist(), oracle_match(assignment, task), keys(archs))

    def to_json(self) -> dict:
        return {
            "objective": self.objective,
            "routing": self.routing,
            "oracle_match": self.oracle_match,
            "architectures": self.architectures,
        }

    @classmethod
    def from_json(cls, row: dict) -> Iterate:
        return cls(row["objective"], row["routing"], row["oracle_match"], row["architectures"])


@dataclass
class TraceRow:
    """One EM iteration in the trace (see `search.loop` for which iterate it reports)."""

    iteration: int
    iterate: Iterate
    measured_objective: float | None
    routing_step_accepted: bool
    kendall_tau: float
    jump: Jump | None
    trained: int  # observations this batch made visible
    n_trained: int
    failures: int
    seconds: float  # the step that proposed the batch
    phase_seconds: dict[str, float]

    def to_json(self) -> dict:
        it = self.iterate
        return {
            "iteration": self.iteration,
            "objective": it.objective,
            "measured_objective": self.measured_objective,
            "routing": it.routing,
            "oracle_match": it.oracle_match,
            "architectures": it.architectures,
            "routing_step_accepted": self.routing_step_accepted,
            "kendall_tau": self.kendall_tau,
            "jump": None if self.jump is None else self.jump.to_json(),
            "trained": self.trained,
            "n_trained": self.n_trained,
            "failures": self.failures,
            "seconds": self.seconds,
            "phase_seconds": self.phase_seconds,
        }


@dataclass
class InFlight:
    """One proposed batch on its way: the S-step's jobs, then the exploration's (masks, the
    jump's current and proposed partition), and what its row and jump need when it is
    collected. `proposed`: the row's iterate as proposed (a lag d >= 1 reports it; lag 0
    reports the iterate after the verdict and refit, so it is None there)."""

    t: int
    acquired: list[Job]
    explored: ExplorationBatch
    predicted: np.ndarray  # the surrogate's prediction of the S-step jobs (Kendall tau)
    clip: float | None  # ... and its clip value then
    archs: list[Arch]  # the incumbents and partition proposed at step t
    assignment: np.ndarray
    routing_step_accepted: bool
    proposed: Iterate | None
    seconds: float | None = None  # the step that proposed it, once that step has ended
    phase_seconds: dict[str, float] | None = None
    uniforms: np.ndarray | None = None  # the proposal's mask draws (lag 0's objective)
    own: list[int] | None = None  # the ticket's own trainings (see Ledger.submit)
    ticket: Ticket | None = None  # submitted to the ledger (lag 0 trains it at collection)

    @property
    def jobs(self) -> list[Job]:
        return [*self.acquired, *self.explored.jobs]

    def to_state(self) -> dict:
        """Plain data for a checkpoint (the keys of the checkpoints written before)."""
        assert self.ticket is not None, "only a submitted batch is in flight at a checkpoint"
        e = self.explored
        row = {"iteration": self.t, **(self.proposed.to_json() if self.proposed else {})}
        row.update(
            routing_step_accepted=self.routing_step_accepted,
            seconds=self.seconds,
            phase_seconds=self.phase_seconds,
        )
        return {
            "t": self.t,
            "jobs": [(a.dumps(), mask_to_str(m), phase) for a, m, phase in self.jobs],
            "sizes": [len(self.acquired), len(e.masks), len(e.current)],
            "predicted": self.predicted,
            "clip": self.clip,
            "archs": [a.dumps() for a in self.archs],
            "assignment": self.assignment,
            "row": row,
            "jump": None if e.jump is None else e.jump.to_json(),
            "own": self.ticket.own_index,
        }

    @classmethod
    def from_state(cls, state: dict) -> InFlight:
        jobs = [(Arch.from_json(a), mask_from_str(m), phase) for a, m, phase in state["jobs"]]
        a, e, c = (int(n) for n in state["sizes"])
        jump = None if state["jump"] is None else Jump.from_json(state["jump"])
        masks, current, proposed = jobs[a : a + e], jobs[a + e : a + e + c], jobs[a + e + c :]
        explored = ExplorationBatch(masks, current, proposed, jump)
        row = state["row"]
        return cls(
            int(state["t"]),
            jobs[:a],
            explored,
            np.asarray(state["predicted"]),
            state["clip"],
            [Arch.from_json(x) for x in state["archs"]],
            np.asarray(state["assignment"]),
            bool(row["routing_step_accepted"]),
            Iterate.from_json(row) if "objective" in row else None,
            row.get("seconds"),
            row.get("phase_seconds"),
            None,
            [int(i) for i in state["own"]],
        )


def keys(archs: list[Arch]) -> list[str]:
    return [a.key for a in archs]


def oracle_match(assignment: np.ndarray, task: ClusteredTask) -> float | None:
    """Agreement of a partition with the task's oracle partition (None without one)."""
    if task.oracle_partition is None:
        return None
    return partition_match(assignment, task.oracle_partition)


__all__ = ["InFlight", "Iterate", "Proposal", "TraceRow", "oracle_match"]
