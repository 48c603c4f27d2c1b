"""The EM iterations of SGEM, one loop with a lag d (`SearchConfig.pipeline`).

Step t proposes (E-step, M-steps, S-step, exploration masks and jump), sends the batch out,
then collects the oldest batches until at most d are in flight. Collecting a batch settles
its jump (accepted only if its measured objective beats the one of the routing it was
proposed from: it then replaces the routing and incumbents carried on), refits the
surrogate on everything visible, and writes the batch's trace row. Proposal t therefore
sees exactly the batches <= t-d-1.

Lag 0 is the synchronous form: propose t, train it, settle its jump, refit, propose t+1.
Its batch trains when it is collected (`Ledger.train`: with nothing to overlap, the search
process trains a chunk itself rather than wait).

Lag d >= 1 overlaps the search with training: the workers train batches t-d+1 .. t while
the search refits and proposes, so the workers have queued work as long as what is left of
the queue outlasts a refit and a proposal (d = 1: batch t+1 is proposed from results up to
t-1 while batch t trains). The lag is fixed, not "whatever has finished", so what a
proposal sees never depends on timing: inline, processes and Ray (and two runs on one
cluster) search alike. Results are committed to the store as they finish
(`Ledger.harvest`) and become visible at collection, in request order.

Which iterate a row reports: the one the next proposal starts from. At lag 0 that is the
proposal after its jump's verdict, J under the refitted surrogate; at lag d >= 1 the next
proposals started before the batch came back, so the row reports the proposal as made, J
under the surrogate that proposed it (an accepted jump shows in the row's "jump").

A checkpoint after every step holds the batches in flight (none at lag 0); resuming
resubmits them (finished trainings come from the store, unfinished chunks train again
whole), so a resumed run reproduces the uninterrupted one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from scipy.special import softmax
from tqdm.auto import tqdm

from ..data.task import ClusteredTask
from ..execution.timing import PhaseTimer
from ..space.arch import Arch
from ..surrogate.model import LossModel, Surrogate
from .acquisition import outcome_tau, predicted_losses
from .checkpoint import save_state
from .config import SearchConfig
from .exploration import ExplorationBatch, Explorer, hard_logits
from .handoffs import InFlight, Iterate, Proposal, TraceRow
from .jump import Jump
from .ledger import Ledger
from .objective import objective
from .routing import expected_losses
from .store import ObservationStore

Carried = tuple[np.ndarray, list[Arch]]  # the routing logits and incumbents carried on
#: (store, incumbent archs) -> (deadline, extension margin): see `SGEM.fit(reprice=...)`
Reprice = Callable[[ObservationStore, list[Arch]], tuple[float | None, float]]


class Search(Protocol):
    """The parts of `sgem.search.SGEM` the loop drives."""

    config: SearchConfig
    seed: int
    progress: bool
    deadline: float | None
    iteration_cap: int | None
    extension_margin: float
    reprice: Reprice | None
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


class StepCost:
    """What the next EM step is expected to take, for the deadline: the slowest seconds per
    training seen so far times the trainings it will make. An exploration step trains the
    affinity masks and a jump besides the S-step's candidates (about three times as many);
    the last step's seconds alone let one start 60 s before a deadline on M3 "other" and
    end 25 s past it, and the final stage was cut short."""

    def __init__(self, cfg: SearchConfig) -> None:
        self.cfg = cfg
        self.per_training = 0.0
        self.plain: int | None = None  # trainings of a step without exploration
        k = cfg.n_experts
        jumps = cfg.jumps and not cfg.freeze_routing
        # until one is seen: the affinity groups with every incumbent and one pick, and a
        # jump's incumbent and alternative per region on two partitions
        self.exploring_extra = cfg.explore_groups * (k + 1) + (4 * k if jumps else 0)

    def explores(self, t: int) -> bool:
        return bool(self.cfg.explore) and t % self.cfg.explore_every == 0

    def expected(self, t: int) -> float:
        """Seconds step t is expected to take (0 before any step: the first always runs)."""
        if self.plain is None:
            return 0.0
        extra = self.exploring_extra if self.explores(t) else 0
        return self.per_training * (self.plain + extra)

    def record(self, seconds: float, trained: int, explored: int) -> None:
        """A finished step's seconds and trainings (its own, then its exploration's)."""
        if trained + explored == 0:
            return
        self.per_training = max(self.per_training, seconds / (trained + explored))
        self.plain = trained
        if explored:
            self.exploring_extra = explored


class SearchLoop:
    """Runs iterations t_done + 1 .. T of `search` with at most `pipeline` batches in
    flight between steps."""

    def __init__(
        self,
        search: Search,
        task: ClusteredTask,
        sizes: np.ndarray,
        rng: np.random.Generator,
        trace: list[dict],
    ) -> None:
        self.search, self.task, self.sizes, self.rng, self.trace = search, task, sizes, rng, trace
        self.lag = int(search.config.pipeline)
        self.in_flight: list[InFlight] = []
        self.cost = StepCost(search.config)
        self._began, self._timing_before = time.perf_counter(), search.timer_.snapshot()

    def run(
        self, t_done: int, logits: np.ndarray, archs: list[Arch], in_flight: list[dict]
    ) -> tuple[np.ndarray, list[Arch], int, bool]:
        """Returns the final logits and incumbents (all batches collected), the last
        iteration done, and whether the deadline stopped the loop. With a deadline the loop
        runs on past `config.n_iterations` up to `search.iteration_cap` while the deadline
        allows another step (a time budget plans the count from a pilot, and a search that
        runs faster than planned should use what it saved). `in_flight`: a checkpoint's
        batches, resubmitted in order (one more than the lag in a checkpoint written
        before a step collected at its end: collected here first)."""
        search = self.search
        carried: Carried = (logits, archs)
        for saved in in_flight:
            self._submit(InFlight.from_state(saved))
        while len(self.in_flight) > self.lag:
            carried = self._collect(self.in_flight.pop(0), carried, refit=True)
        total = search.config.n_iterations
        if search.deadline is not None and search.iteration_cap is not None:
            total = max(total, search.iteration_cap)
        steps = progress_bar(t_done, total, search.progress)
        stopped, last = False, t_done
        for t in steps:  # a step that would end past the deadline does not start
            if search.reprice is not None:  # priced on the cells searched so far
                search.deadline, search.extension_margin = search.reprice(search.store_, carried[1])
            late = time.perf_counter() + self.cost.expected(t)
            if t > search.config.n_iterations:  # unplanned: leaves a margin (see `SGEM.fit`)
                late += search.extension_margin
            if search.deadline is not None and late > search.deadline:
                stopped = True
                break
            carried = self._step(t, carried)
            last = t
            self._checkpoint(t, carried)
            if self.trace:
                show_row(steps, self.trace[-1], len(search.store_), search.progress)
        steps.close()
        if self.in_flight:  # drain: collect what is still training (no proposal follows)
            while self.in_flight:
                carried = self._collect(self.in_flight.pop(0), carried, refit=False)
            self._checkpoint(last, carried)
        return carried[0], carried[1], last, stopped

    def _step(self, t: int, carried: Carried) -> Carried:
        """Propose and send batch t, then collect until at most `lag` batches are out;
        returns what is carried on (the step's seconds go to `self.cost`)."""
        search = self.search
        clock = search.timer_
        self._began, self._timing_before = time.perf_counter(), clock.snapshot()
        p = search._propose(t, self.task, carried[0], carried[1], self.sizes, self.rng)
        explored = ExplorationBatch([], [], [], None)
        if self.cost.explores(t):
            with clock.phase("exploration"):
                explored = search.explorer_.batch(p.archs, p.assignment, self.sizes, self.rng, t)
        with clock.phase("acquisition"):
            predicted = predicted_losses(search.surrogate_, p.jobs)
            proposed = None
            if self.lag:  # the row reports the proposal as made (see the module's note)
                u_now = expected_losses(search.u_, p.archs, p.routing, p.uniforms)
                j = objective(p.routing, u_now, self.sizes)
                proposed = Iterate.of(j, p.assignment, p.archs, self.task)
        flight = InFlight(
            t,
            p.jobs,
            explored,
            predicted,
            search.surrogate_.clip_value_,
            p.archs,
            p.assignment,
            p.routing_step_accepted,
            proposed,
            uniforms=p.uniforms,
        )
        carried = (p.logits, p.archs)
        if self.lag:
            self._submit(flight)
        else:
            self.in_flight.append(flight)  # trained when collected, just below
        while len(self.in_flight) > self.lag:
            carried = self._collect(self.in_flight.pop(0), carried, refit=True)
        if flight.seconds is None:
            self._time_step(flight)
        assert flight.seconds is not None
        self.cost.record(flight.seconds, len(p.jobs), len(explored.jobs))
        return carried

    def _time_step(self, flight: InFlight) -> None:
        """The seconds (and per phase) of the step that proposed `flight`, up to now."""
        flight.seconds = time.perf_counter() - self._began
        before = self._timing_before
        flight.phase_seconds = PhaseTimer.difference(self.search.timer_.snapshot(), before)

    def _submit(self, flight: InFlight) -> None:
        flight.ticket = self.search.ledger_.submit(flight.jobs, flight.t, own=flight.own)
        self.in_flight.append(flight)

    def _collect(self, flight: InFlight, carried: Carried, refit: bool) -> Carried:
        """Collect a batch: its jump's verdict (which, if accepted, replaces the routing and
        incumbents carried on), the refit (unless no proposal follows), its trace row."""
        search = self.search
        ledger, n_before = search.ledger_, len(search.store_)
        if flight.ticket is not None:
            done = ledger.collect(flight.ticket)
        else:
            with search.timer_.phase("acquisition"):
                done = ledger.train(flight.jobs, flight.t)
        a = len(flight.acquired)
        tau = outcome_tau(flight.predicted, done[:a], flight.clip)
        with search.timer_.phase("exploration"):
            jump = search.explorer_.settle(
                flight.explored, flight.archs, flight.assignment, self.sizes, done[a:]
            )
        if jump is not None and jump.accepted:
            assert jump.architectures is not None
            logits = hard_logits(np.asarray(jump.proposal), search.config.n_experts)
            carried = (logits, jump.architectures)
        if refit:
            search._refit(flight.t)
            ledger.harvest()
        iterate, archs, assignment = self._reported(flight, carried, jump)
        if flight.seconds is None:  # lag 0: the step ends with its row
            self._time_step(flight)
        assert flight.seconds is not None and flight.phase_seconds is not None
        row = TraceRow(
            iteration=flight.t,
            iterate=iterate,
            measured_objective=ledger.measured_objective(archs, assignment, self.sizes),
            routing_step_accepted=flight.routing_step_accepted,
            kendall_tau=tau,
            jump=jump,
            trained=len(search.store_) - n_before,
            n_trained=len(search.store_),
            failures=ledger.failures,
            seconds=flight.seconds,
            phase_seconds=flight.phase_seconds,
        ).to_json()
        self.trace.append(row)
        search.listener("iteration", {"row": row})
        return carried

    def _reported(
        self, flight: InFlight, carried: Carried, jump: Jump | None
    ) -> tuple[Iterate, list[Arch], np.ndarray]:
        """The iterate a row reports (see the module's note), with its incumbents and hard
        partition (for the measured objective)."""
        if flight.proposed is not None:
            return flight.proposed, flight.archs, flight.assignment
        logits, archs = carried  # lag 0: this batch's proposal, after its verdict
        assignment = flight.assignment
        if jump is not None and jump.accepted:
            assignment = np.asarray(jump.proposal)
        routing = softmax(logits, axis=1)
        assert flight.uniforms is not None
        u_now = expected_losses(self.search.u_, archs, routing, flight.uniforms)
        j = objective(routing, u_now, self.sizes)
        return Iterate.of(j, assignment, archs, self.task), archs, assignment

    def _checkpoint(self, t: int, carried: Carried) -> None:
        search = self.search
        with search.timer_.phase("checkpoint"):
            save_state(
                search.store_,
                t,
                carried[0],
                carried[1],
                self.rng,
                search.surrogate_,
                self.trace,
                search.ledger_.failures,
                [f.to_state() for f in self.in_flight],
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


__all__ = ["SearchLoop", "progress_bar", "show_row"]
