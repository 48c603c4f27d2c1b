"""Pipelined S-steps: the search proposes while the workers train (`SearchConfig.pipeline`).

The synchronous loop trains a batch, then refits, then proposes the next batch, so every
worker waits on the refit and the E- and M-steps. Here the iterations overlap at a fixed
lag d (`pipeline` = d): step t collects batch t-d-1, refits the surrogate on everything up
to it, proposes batch t (E-step, M-steps, S-step, exploration masks and jump) and submits
it, while batches t-d .. t-1 train. At most d+1 batches are in flight, so the workers have
queued work while the search refits, as long as what is left of the queue when a batch is
collected outlasts a refit and a proposal (d = 1: batch t+1 is proposed from results up to
t-1 while batch t trains).

Why a fixed lag, not "whatever has finished". Which results a proposal sees must not
depend on timing, or inline, processes and Ray (and two runs on one cluster) would search
differently. With the lag fixed, proposal t always sees exactly batches <= t-d-1: the same
search on every executor. Results are still committed to the store as they finish
(`Ledger.harvest`), and become visible at collection, in request order.

A jump proposed at step t is judged when batch t is collected (step t+d+1): accepted only
if its measured objective beats the one of the routing it was proposed from, it then
replaces the routing and incumbents carried into that step. A trace row is written when
its batch is collected. A checkpoint after every step holds the batches in flight;
resuming resubmits them (finished trainings come from the store, unfinished chunks train
again whole), so a resumed run reproduces the uninterrupted one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data.task import ClusteredTask
from ..execution.timing import PhaseTimer
from ..metrics import partition_match
from ..space.arch import Arch
from ..surrogate.model import LossModel, Surrogate
from .acquisition import outcome_tau, predicted_losses
from .checkpoint import encode_checkpoint
from .config import SearchConfig
from .exploration import ExplorationBatch, Explorer, hard_logits
from .ledger import Job, Ledger, Ticket
from .objective import objective
from .routing import expected_losses
from .store import ObservationStore, mask_from_str, mask_to_str


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


class Search(Protocol):
    """The parts of `sgem.search.SGEM` the pipelined loop drives."""

    config: SearchConfig
    seed: int
    progress: bool
    deadline: float | None
    listener: Callable[[str, dict], None]
    store_: ObservationStore
    ledger_: Ledger
    surrogate_: Surrogate
    u_: LossModel
    explorer_: Explorer
    timer_: PhaseTimer

    def _propose(
        self,
        t: int,
        task: ClusteredTask,
        logits: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        rng: np.random.Generator,
    ) -> Proposal: ...

    def _refit(self, iteration: int) -> None: ...


@dataclass
class InFlight:
    """One proposed batch on its way, with what its trace row and jump need when it is
    collected. `jobs`: the S-step's, then the exploration masks', then the jump's (current
    partition, then proposed partition)."""

    t: int
    jobs: list[Job]
    n_acquired: int
    n_explore: int
    n_current: int
    predicted: np.ndarray  # the surrogate's prediction of the S-step jobs (Kendall tau)
    clip: float | None  # ... and its clip value then
    archs: list[Arch]  # the incumbents and routing proposed at step t
    assignment: np.ndarray
    row: dict  # the trace row's fields known at step t
    jump: dict | None
    own: list[int] | None = None  # the ticket's own trainings (see Ledger.submit)
    ticket: Ticket | None = None

    def to_state(self) -> dict:
        """Plain data for a checkpoint."""
        assert self.ticket is not None
        return {
            "t": self.t,
            "jobs": [(a.dumps(), mask_to_str(m), phase) for a, m, phase in self.jobs],
            "sizes": [self.n_acquired, self.n_explore, self.n_current],
            "predicted": self.predicted,
            "clip": self.clip,
            "archs": [a.dumps() for a in self.archs],
            "assignment": self.assignment,
            "row": self.row,
            "jump": self.jump,
            "own": self.ticket.own_index,
        }

    @classmethod
    def from_state(cls, state: dict) -> InFlight:
        jobs = [(Arch.from_json(a), mask_from_str(m), phase) for a, m, phase in state["jobs"]]
        n_acquired, n_explore, n_current = state["sizes"]
        return cls(
            int(state["t"]),
            jobs,
            int(n_acquired),
            int(n_explore),
            int(n_current),
            np.asarray(state["predicted"]),
            state["clip"],
            [Arch.from_json(a) for a in state["archs"]],
            np.asarray(state["assignment"]),
            dict(state["row"]),
            state["jump"],
            [int(i) for i in state["own"]],
        )


def progress_bar(done: int, total: int, show: bool) -> Any:
    """The iteration progress bar (tqdm over the iterations still to run)."""
    return tqdm(
        range(done + 1, total + 1), desc="SGEM", disable=not show, initial=done, total=total
    )


def show_row(bar: Any, row: dict, n_observations: int, show: bool) -> None:
    if show:  # the oracle match only where the task knows its true partition
        shown = {"match": row["oracle_match"]} if row.get("oracle_match") is not None else {}
        bar.set_postfix(**shown, obs=n_observations, tau=f"{row['kendall_tau']:.2f}")


class PipelinedLoop:
    """Runs iterations t_done + 1 .. T of `search` with up to `pipeline` + 1 batches in
    flight."""

    def __init__(
        self,
        search: Search,
        task: ClusteredTask,
        sizes: np.ndarray,
        rng: np.random.Generator,
        trace: list[dict],
    ) -> None:
        self.search, self.task, self.sizes, self.rng, self.trace = search, task, sizes, rng, trace
        self.in_flight: list[InFlight] = []

    def run(
        self, t_done: int, logits: np.ndarray, archs: list[Arch], state: dict | None
    ) -> tuple[np.ndarray, list[Arch], int | None]:
        """Returns the final logits and incumbents (all batches collected), and the last
        iteration proposed if the deadline stopped the loop early."""
        search = self.search
        for saved in (state or {}).get("in_flight", []):  # resume: resubmit, in order
            self._submit(InFlight.from_state(saved))
        steps = progress_bar(t_done, search.config.n_iterations, search.progress)
        stopped_at, last = None, t_done
        took = 0.0  # the last step's seconds: one that would end past the deadline waits
        for t in steps:
            if search.deadline is not None and time.perf_counter() + took > search.deadline:
                stopped_at = t - 1
                break
            begun = time.perf_counter()
            logits, archs = self._step(t, logits, archs)
            took = time.perf_counter() - begun
            last = t
            if self.trace:
                show_row(steps, self.trace[-1], len(search.store_), search.progress)
        steps.close()
        while self.in_flight:  # drain: collect what is still training
            logits, archs = self._finish(self.in_flight.pop(0), logits, archs)
        self._checkpoint(last, logits, archs)
        return logits, archs, stopped_at

    def _step(self, t: int, logits: np.ndarray, archs: list[Arch]) -> tuple[np.ndarray, list[Arch]]:
        """Collect batch t-d-1 and refit, then propose and submit batch t."""
        search, cfg = self.search, self.search.config
        clock, t0, timing_before = search.timer_, time.perf_counter(), search.timer_.snapshot()
        if len(self.in_flight) > cfg.pipeline:
            done = self.in_flight.pop(0)
            logits, archs = self._finish(done, logits, archs)
            search._refit(done.t)
            search.ledger_.harvest()
        p = search._propose(t, self.task, logits, archs, self.sizes, self.rng)
        explored = ExplorationBatch([], [], [], None)
        if cfg.explore and t % cfg.explore_every == 0:
            with clock.phase("exploration"):
                explored = search.explorer_.batch(p.archs, p.assignment, self.sizes, self.rng, t)
        with clock.phase("acquisition"):
            predicted = predicted_losses(search.surrogate_, p.jobs)
            u_now = expected_losses(search.u_, p.archs, p.routing, p.uniforms)
        row = {
            "iteration": t,
            "objective": objective(p.routing, u_now, self.sizes),
            "routing": p.assignment.tolist(),
            "oracle_match": oracle_match(p.assignment, self.task),
            "architectures": [a.key for a in p.archs],
            "routing_step_accepted": p.routing_step_accepted,
        }
        flight = InFlight(
            t,
            [*p.jobs, *explored.jobs],
            len(p.jobs),
            len(explored.masks),
            len(explored.current),
            predicted,
            search.surrogate_.clip_value_,
            p.archs,
            p.assignment,
            row,
            explored.jump,
        )
        self._submit(flight)
        row["seconds"] = time.perf_counter() - t0  # this step: collect, refit, propose t
        row["phase_seconds"] = PhaseTimer.difference(clock.snapshot(), timing_before)
        self._checkpoint(t, p.logits, p.archs)
        return p.logits, p.archs

    def _submit(self, flight: InFlight) -> None:
        flight.ticket = self.search.ledger_.submit(flight.jobs, flight.t, own=flight.own)
        self.in_flight.append(flight)

    def _finish(
        self, flight: InFlight, logits: np.ndarray, archs: list[Arch]
    ) -> tuple[np.ndarray, list[Arch]]:
        """Collect a batch: its trace row, and its jump's verdict (which, if accepted,
        replaces the routing and incumbents carried on)."""
        search = self.search
        assert flight.ticket is not None
        n_before = len(search.store_)
        done = search.ledger_.collect(flight.ticket)
        a, e, c = flight.n_acquired, flight.n_explore, flight.n_current
        jobs = flight.jobs
        explored = ExplorationBatch(
            jobs[a : a + e], jobs[a + e : a + e + c], jobs[a + e + c :], flight.jump
        )
        jump = search.explorer_.settle(
            explored, flight.archs, flight.assignment, self.sizes, done[a:]
        )
        if jump is not None and jump["accepted"]:
            logits = hard_logits(np.asarray(jump["proposal"]), search.config.n_experts)
            archs = [Arch.from_json(x) for x in jump["architectures"]]
        row = {
            **flight.row,
            "measured_objective": search.ledger_.measured_objective(
                flight.archs, flight.assignment, self.sizes
            ),
            "kendall_tau": outcome_tau(flight.predicted, done[:a], flight.clip),
            "jump": jump,
            "trained": len(search.store_) - n_before,
            "n_trained": len(search.store_),
            "failures": search.ledger_.failures,
        }
        self.trace.append(row)
        search.listener("iteration", {"row": row})
        return logits, archs

    def _checkpoint(self, t: int, logits: np.ndarray, archs: list[Arch]) -> None:
        """`checkpoint.save_state`'s document plus the batches in flight."""
        search = self.search
        with search.timer_.phase("checkpoint"):
            document, tensors = encode_checkpoint(
                {
                    "iteration": t,
                    "logits": logits,
                    "archs": [a.dumps() for a in archs],
                    "rng": self.rng.bit_generator.state,
                    "torch_rng": torch.get_rng_state(),
                    "surrogate": search.surrogate_.state_dict(),
                    "trace": self.trace,
                    "visible": search.store_.visible_keys(),
                    "failures": search.ledger_.failures,
                    "in_flight": [f.to_state() for f in self.in_flight],
                }
            )
            search.store_.save_checkpoint(t, document, tensors)


def oracle_match(assignment: np.ndarray, task: ClusteredTask) -> float | None:
    """Agreement of a partition with the task's oracle partition (None without one)."""
    if task.oracle_partition is None:
        return None
    return partition_match(assignment, task.oracle_partition)


__all__ = ["InFlight", "PipelinedLoop", "Proposal", "oracle_match", "progress_bar", "show_row"]
