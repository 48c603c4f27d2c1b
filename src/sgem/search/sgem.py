"""The SGEM loop (paper Algorithm 1), one step per module:

    initialise    random routing logits and incumbents, `n_init` random trainings (ledger)
                  on random masks, or on balls of nearest clusters in centroid space when
                  M > 40 (`init_masks`: random subsets of many clusters are almost never
                  pure, and without near-pure observations the affinities are at chance)
    repeat T times:
      E-step      responsibilities q from the surrogate (objective.e_step)
      M-step R    a gradient step on the routing logits, kept only if J improves (routing)
      M-step alpha  per expert, the best of a fresh scored pool (architecture)
      S-step      train the lowest-LCB candidates and the incumbents (acquisition, ledger)
      explore     every few iterations: affinity masks and a partition jump (exploration),
                  trained in one batch with the S-step's candidates
      refit       the surrogate on all visible observations; checkpoint (checkpoint)
    return        the best *measured* finalist partition, per-region refit (selection)

The iterations run in `search.loop` at a lag d (`pipeline`): d = 0 is the loop above,
one step after the other; d > 0 overlaps the steps with training (batch t is proposed
while batches t-d .. t-1 train). With `batch_size` the S-step chooses a joint batch
(acquisition.acquire_batch).

Every training goes through the `Ledger` (reuse, retry, request order); every comparison of
real outcomes uses its `region_value`. The state is checkpointed after every iteration, so
`fit(..., resume=True)` continues exactly where an interrupted run stopped and reproduces
the uninterrupted result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.special import softmax

from ..data.task import ClusteredTask
from ..execution.executors import Executor, make_executor
from ..execution.timing import PhaseTimer
from ..random_streams import routing_seed
from ..space.arch import Arch, CellSpace
from ..surrogate.model import Surrogate
from ..surrogate.scalar import ScalarReduced
from ..train.trainer import Trainer
from .acquisition import acquire
from .architecture import architecture_m_step
from .checkpoint import decode_checkpoint, restore_state, save_state
from .config import SearchConfig
from .exploration import Explorer
from .geometry import cluster_centroids, geometry_partition
from .handoffs import Proposal, oracle_match
from .ledger import Ledger
from .loop import Reprice, SearchLoop
from .masks import geometric_mask, log_uniform_size_mask
from .objective import e_step, hard_routing
from .routing import expected_losses, routing_m_step
from .selection import canonical_partition, finalise
from .store import ObservationStore

log = logging.getLogger(__name__)


@dataclass
class SearchResult:
    assignment: np.ndarray  # (M,) expert index per cluster
    architectures: list[Arch]  # one per expert
    routing: np.ndarray  # (M, K) the final iterate's soft routing
    trace: list[dict]
    store: ObservationStore
    oracle_match: float | None
    n_trained: int
    seconds: float
    region_val_losses: list[float | None] = field(default_factory=list)
    failures: int = 0
    selection: dict = field(default_factory=dict)  # which visited partition was returned, why
    timing: dict = field(default_factory=dict)  # seconds per phase (sgem.execution.timing)


Listener = Callable[[str, dict], None]


class SGEM:
    """Surrogate-assisted generalised EM over (routing, per-expert architectures).

    Usage: `SGEM(space, SearchConfig(...), seed=0).fit(task)` -> `SearchResult`.
    `listener(event, payload)` receives an "iteration" event per EM iteration (the run
    directory appends it to trace.jsonl). Pass a file-backed `ObservationStore` to persist
    observations and checkpoints, and an executor to train candidates elsewhere.
    """

    def __init__(
        self,
        space: CellSpace,
        config: SearchConfig | None = None,
        seed: int = 0,
        progress: bool = True,
        listener: Listener | None = None,
        device: str = "cpu",
    ) -> None:
        self.space = space
        self.config = config or SearchConfig()
        self.seed = int(seed)
        self.progress = progress
        self.deadline: float | None = None
        self.iteration_cap: int | None = None
        self.extension_margin = 0.0
        self.reprice: Reprice | None = None
        self.listener = listener or (lambda event, payload: None)
        self.device = device

    # -- the loop --------------------------------------------------------------------------
    def fit(
        self,
        task: ClusteredTask,
        store: ObservationStore | None = None,
        executor: Executor | str = "inline",
        resume: bool = False,
        deadline: float | None = None,
        iteration_cap: int | None = None,
        extension_margin: float = 0.0,
        reprice: Reprice | None = None,
    ) -> SearchResult:
        """Run the search. `executor` is an Executor or the name of one ("inline",
        "batched", "processes", "ray"); `resume=True` continues from the store's last
        checkpoint. `deadline` (a `time.perf_counter()` value): no EM iteration starts after
        it, and the finalisation then runs at its smallest (one finalist, two refit
        architectures per expert), so a time budget always ends in a result. With a
        deadline, `iteration_cap`: the loop runs on past `config.n_iterations` (then the
        count a time budget's pilot expected to fit) up to this many while the deadline
        allows; stopping there is the planned end, not a cut. A step past the planned count
        must end `extension_margin` seconds before the deadline (a time budget: a quarter of the
        final stage's reserve, `sgem.run.budget.extension_margin`). `reprice(store,
        incumbents)`: the deadline and margin priced again before each EM step from what the
        search has measured (a time budget: `sgem.run.budget.moving_deadline`)."""
        self.deadline, self.iteration_cap = deadline, iteration_cap
        self.extension_margin = float(extension_margin)
        self.reprice = reprice
        cfg = self.config
        m, k_experts = task.n_clusters, cfg.n_experts
        if k_experts > m:
            raise ValueError(
                f"n_experts K={k_experts} exceeds the number of clusters M={m}: every expert "
                "needs at least one cluster. Use fewer experts or more clusters."
            )
        if store is not None and store.n_clusters != m:
            raise ValueError(f"the store is for {store.n_clusters} clusters, the task has {m}")
        start = time.perf_counter()
        self.timer_ = PhaseTimer()
        rng = np.random.default_rng(self.seed)
        sizes = task.cluster_sizes.astype(np.float64)
        val_sizes = task.val_cluster_sizes.astype(np.float64)
        self.trainer_ = Trainer(task, self.space, cfg.train, device=self.device)
        if isinstance(executor, str):
            self.executor_ = make_executor(
                executor, task, self.space, cfg.train, trainer=self.trainer_
            )
            try:
                return self._fit(task, store, resume, start, rng, sizes, val_sizes)
            finally:
                self.executor_.close()
        self.executor_ = executor
        return self._fit(task, store, resume, start, rng, sizes, val_sizes)

    def _fit(
        self,
        task: ClusteredTask,
        store: ObservationStore | None,
        resume: bool,
        start: float,
        rng: np.random.Generator,
        sizes: np.ndarray,
        val_sizes: np.ndarray,
    ) -> SearchResult:
        cfg = self.config
        centroids = cluster_centroids(task)
        self._setup(task.n_clusters, store, val_sizes, centroids)
        state = self.store_.latest_checkpoint(decode_checkpoint) if resume else None
        if state is None:
            with self.timer_.phase("initial_design"):
                logits, archs = self._initialise(task.n_clusters, rng, centroids)
            trace: list[dict] = []
            t_done, in_flight = 0, []
            with self.timer_.phase("checkpoint"):
                save_state(
                    self.store_, 0, logits, archs, rng, self.surrogate_, trace, self.failures_
                )
        else:
            restored = restore_state(state, self.store_, self.surrogate_, rng)
            logits, archs, trace = restored.logits, restored.archs, restored.trace
            t_done, self.ledger_.failures = restored.iteration, restored.failures
            in_flight = restored.in_flight
            self.listener("restored", {"trace": trace, "iteration": t_done})

        loop = SearchLoop(self, task, sizes, rng, trace)
        logits, archs, ran, stopped = loop.run(t_done, logits, archs, in_flight)
        # cut short: the deadline came before the planned iterations were done
        stopped_at = ran if stopped and ran < cfg.n_iterations else None

        routing = softmax(logits, axis=1)
        last = hard_routing(routing)  # the final iterate's partition: one of the finalists
        # the finalisation's trainings are numbered after the last iteration run
        final_cfg = replace(cfg, n_iterations=ran) if ran > cfg.n_iterations else cfg
        geometry = self._geometry(task)
        # no EM iteration ran: the final iterate is the random start, not a search result,
        # and measuring it beside the k-means split doubled the finalisation's trainings
        # (120 daily weather series at 2 minutes: 34 in 47 s, and the fence then cut the
        # final experts at 24-57 of 100 steps); the split is the one finalist
        start_only = stopped_at == 0 and geometry is not None
        if stopped_at is not None:  # out of time: the smallest finalisation
            log.warning(
                "time budget: the EM loop stopped at its deadline after %d of %d iterations%s; "
                "a longer --time-budget lets the search run them",
                stopped_at,
                cfg.n_iterations,
                " (the model comes from the initial design alone"
                + (", on the k-means split of the clusters)" if start_only else ")")
                if stopped_at == 0
                else "",
            )
            final_cfg = replace(
                cfg,
                n_iterations=max(stopped_at, 1),
                final_candidates=1,
                finalist_budget=min(cfg.finalist_budget, 1),
                refit_budget=min(cfg.refit_budget, 2),
            )
        with self.timer_.phase("finalisation"):
            assignment, final_archs, region_losses, selection = finalise(
                self.ledger_,
                self.space,
                final_cfg,
                [] if start_only else trace,
                geometry if start_only else last,
                archs,
                sizes,
                val_sizes,
                rng,
                geometry=geometry,
            )
        if start_only:
            selection = {**selection, "random_start_skipped": True}
        selection = {**selection, "iterations_run": ran}
        if stopped_at is not None:
            selection = {**selection, "stopped_at_deadline_after_iteration": stopped_at}
        return SearchResult(
            assignment=assignment,
            architectures=final_archs,
            routing=routing,
            trace=trace,
            store=self.store_,
            oracle_match=oracle_match(assignment, task),
            n_trained=len(self.store_),
            seconds=time.perf_counter() - start,
            region_val_losses=region_losses,
            failures=self.failures_,
            selection=selection,
            timing=self.timer_.snapshot(),
        )

    def _setup(
        self,
        m: int,
        store: ObservationStore | None,
        val_sizes: np.ndarray,
        centroids: np.ndarray | None = None,
    ) -> None:
        cfg = self.config
        self.store_ = store if store is not None else ObservationStore(m)
        self.ledger_ = Ledger(self.store_, self.executor_, self.seed, self.timer_)
        self.surrogate_ = Surrogate(self.space, m, cfg.surrogate, seed=self.seed)
        # what the E- and M-steps see: the per-cluster surrogate, or its scalar reduction
        self.u_ = (
            ScalarReduced(self.surrogate_, val_sizes) if cfg.scalar_surrogate else self.surrogate_
        )
        if centroids is not None and len(centroids) != m:
            centroids = None
        self.explorer_ = Explorer(
            self.ledger_, self.space, self.surrogate_, self.u_, cfg, centroids=centroids
        )

    def _initialise(
        self, m: int, rng: np.random.Generator, centroids: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[Arch]]:
        """Random routing logits and incumbents; `n_init` random trainings; first fit.

        The masks are random subsets, or balls in centroid space (`init_masks`)."""
        cfg = self.config
        logits = rng.normal(size=(m, cfg.n_experts))
        archs = self.space.sample_many(cfg.n_experts, rng)
        geometric = self._geometric_init(m, centroids)

        def mask() -> np.ndarray:
            if geometric:
                return geometric_mask(centroids, rng, cfg.init_min_mask)
            return log_uniform_size_mask(m, rng, cfg.init_min_mask)

        init_jobs = [(self.space.sample(rng), mask(), "init") for _ in range(cfg.n_init)]
        self.ledger_.train(init_jobs, 0)
        self._refit(0)
        return logits, archs

    def _propose(
        self,
        t: int,
        task: ClusteredTask,
        logits: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        rng: np.random.Generator,
    ) -> Proposal:
        """E-step, M-steps on R and alpha, and the S-step's choice of what to train."""
        cfg = self.config
        m, k_experts = task.n_clusters, cfg.n_experts
        clock = self.timer_
        routing = softmax(logits, axis=1)
        uniforms = rng.random((k_experts, cfg.mc_masks, m))
        with clock.phase("e_step"):
            q = e_step(routing, expected_losses(self.u_, archs, routing, uniforms))
        r_info: dict = {"accepted": False}
        if not cfg.freeze_routing:
            with clock.phase("routing_m_step"):
                logits, r_info = self._routing_step(t, logits, q, archs, sizes, uniforms)
        routing = softmax(logits, axis=1)
        with clock.phase("architecture_m_step"):
            pools = architecture_m_step(
                self.u_, self.space, archs, q, routing, sizes, uniforms, cfg.pool_size, rng
            )
        archs = [p.best for p in pools]
        assignment = hard_routing(routing)
        with clock.phase("acquisition"):
            jobs = acquire(self.u_, cfg, self.seed, pools, q, routing, assignment, sizes, rng, t)
        accepted = bool(r_info["accepted"])
        return Proposal(logits, archs, routing, assignment, uniforms, jobs, accepted)

    def _routing_step(
        self,
        t: int,
        logits: np.ndarray,
        q: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        uniforms: np.ndarray,
    ) -> tuple[np.ndarray, dict]:
        """M-step on R: straight-through Gumbel-Softmax steps, kept only if J improves."""
        cfg = self.config
        return routing_m_step(
            logits,
            q,
            self.u_,
            archs,
            sizes,
            steps=cfg.routing_steps,
            lr=cfg.routing_lr,
            n_samples=cfg.mc_masks,
            temperature=cfg.gumbel_temperature,
            seed=routing_seed(self.seed, t),
            check_uniforms=uniforms,
            lb_weight=cfg.lb_weight,
            lb_kind=cfg.lb_kind,
        )

    # -- helpers ---------------------------------------------------------------------------
    def _geometric_init(self, m: int, centroids: np.ndarray | None) -> bool:
        """Whether the initial masks are balls in centroid space (`init_masks`)."""
        mode = self.config.init_masks
        if centroids is None or len(centroids) != m or mode == "random":
            return False
        return mode == "geometric" or m > self.config.geometric_above

    def _geometry(self, task: ClusteredTask) -> np.ndarray | None:
        """The Geometry-routing baseline's split, a finalist (`geometry_finalist`).

        It used `task.centroids` alone before, which a time-series task does not have (its
        centroids are in `meta`), so forecasting searches silently ran without it."""
        if not self.config.geometry_finalist:
            return None
        return geometry_partition(task, self.config.n_experts, self.seed)

    @property
    def failures_(self) -> int:
        """Failed training attempts so far (each retried once)."""
        return self.ledger_.failures

    def _refit(self, iteration: int) -> None:
        with self.timer_.phase("surrogate_fit"):
            self.surrogate_.fit(
                self.store_.archs, self.store_.masks, self.store_.losses, seed=self.seed + iteration
            )


__all__ = ["SGEM", "SearchResult", "canonical_partition"]
