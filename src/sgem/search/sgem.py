"""The SGEM loop (paper Algorithm 1): E-step, M-step on R, M-step on alpha, S-step.

Return rule. The surrogate changes at every refit, so surrogate objective values from
different iterations are not comparable and are never used to pick an iterate. SGEM returns
the routing of the final iterate, and for each expert the architecture with the lowest
*measured* validation loss on exactly that expert's final region: the final incumbent, the
per-region refit's random architectures and anything else trained on that exact region
compete on equal terms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import softmax
from tqdm.auto import tqdm

from ..data.task import ClusteredTask
from ..metrics import partition_match
from ..space.arch import Arch, CellSpace
from ..store import Observation, ObservationStore
from ..surrogate.model import Surrogate, kendall_tau, lcb
from ..train.losses import region_loss
from ..train.trainer import Trainer
from .architecture import ExpertPool, architecture_m_step, score_pool
from .config import SearchConfig
from .exploration import affinity_groups, align_labels, hard_logits
from .masks import log_uniform_size_mask, nonempty_bernoulli_mask
from .objective import (
    e_step,
    hard_routing,
    measured_hard_objective,
    objective,
)
from .routing import expected_losses, routing_m_step


@dataclass
class SearchResult:
    assignment: np.ndarray  # (M,) expert index per cluster
    architectures: list[Arch]  # one per expert
    routing: np.ndarray  # (M, K) final soft routing
    trace: list[dict]
    store: ObservationStore
    oracle_match: float | None
    n_trained: int
    seconds: float
    region_val_losses: list[float | None] = field(default_factory=list)


Listener = Callable[[str, dict], None]


class SGEM:
    """Surrogate-assisted generalised EM over (routing, per-expert architectures).

    Usage: `SGEM(space, SearchConfig(...), seed=0).fit(task)` -> `SearchResult`.
    `listener(event, payload)` receives "observation" and "iteration" events, which the
    run directory uses to persist work as soon as it exists.
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
        self.listener = listener or (lambda event, payload: None)
        self.device = device

    # -- helpers ---------------------------------------------------------------------------
    def _emit(self, event: str, payload: dict) -> None:
        self.listener(event, payload)

    def _train(self, arch: Arch, mask: np.ndarray, phase: str, iteration: int) -> Observation:
        existing = self.store_.lookup(arch, mask)
        if existing is not None:
            return existing
        seed = (self.seed * 1_000_003 + len(self.store_)) % (2**31 - 1)
        outcome = self.trainer_.train(arch, mask, seed)
        obs = Observation(
            arch, np.asarray(mask, bool), outcome.losses, outcome.seconds, seed, phase, iteration
        )
        self.store_.add(obs)
        self._emit("observation", {"observation": obs})
        return obs

    def _refit(self, iteration: int) -> None:
        self.surrogate_.fit(
            self.store_.archs, self.store_.masks, self.store_.losses, seed=self.seed + iteration
        )

    # -- the loop --------------------------------------------------------------------------
    def fit(self, task: ClusteredTask) -> SearchResult:
        cfg = self.config
        m, k_experts = task.n_clusters, cfg.n_experts
        if k_experts > m:
            raise ValueError(
                f"n_experts K={k_experts} exceeds the number of clusters M={m}: every expert "
                "needs at least one cluster. Use fewer experts or more clusters."
            )
        start = time.perf_counter()
        rng = np.random.default_rng(self.seed)
        sizes = task.cluster_sizes.astype(np.float64)
        val_sizes = task.val_cluster_sizes.astype(np.float64)
        self.trainer_ = Trainer(task, self.space, cfg.train, device=self.device)
        self.store_ = ObservationStore(m)
        self.surrogate_ = Surrogate(self.space, m, cfg.surrogate, seed=self.seed)

        logits = rng.normal(size=(m, k_experts))
        archs = self.space.sample_many(k_experts, rng)

        bar = tqdm(
            total=cfg.n_init, desc="initial observations", disable=not self.progress, leave=False
        )
        for _ in range(cfg.n_init):
            arch = self.space.sample(rng)
            mask = log_uniform_size_mask(m, rng, cfg.init_min_mask)
            self._train(arch, mask, "init", 0)
            bar.update()
        bar.close()
        self._refit(0)

        trace: list[dict] = []
        iterations = tqdm(range(1, cfg.n_iterations + 1), desc="SGEM", disable=not self.progress)
        for t in iterations:
            t0 = time.perf_counter()
            n_before = len(self.store_)
            routing = softmax(logits, axis=1)
            uniforms = rng.random((k_experts, cfg.mc_masks, m))
            # E-step
            u = expected_losses(self.surrogate_, archs, routing, uniforms)
            q = e_step(routing, u)
            # M-step (routing)
            r_info: dict = {"accepted": False}
            if not cfg.freeze_routing:
                logits, r_info = routing_m_step(
                    logits,
                    q,
                    self.surrogate_,
                    archs,
                    sizes,
                    steps=cfg.routing_steps,
                    lr=cfg.routing_lr,
                    n_samples=cfg.mc_masks,
                    temperature=cfg.gumbel_temperature,
                    seed=self.seed * 7919 + t,
                    check_uniforms=uniforms,
                )
            routing = softmax(logits, axis=1)
            # M-step (architectures)
            pools = architecture_m_step(
                self.surrogate_,
                self.space,
                archs,
                q,
                routing,
                sizes,
                uniforms,
                cfg.pool_size,
                rng,
            )
            archs = [p.best for p in pools]
            assignment = hard_routing(routing)
            # S-step: train the LCB-chosen candidates (and measure the incumbents)
            candidates = self._acquire(pools, q, routing, assignment, sizes, rng, t)
            predicted = (
                self.surrogate_.predict(
                    [c[0] for c in candidates], np.stack([c[1] for c in candidates])
                )
                if candidates
                else np.zeros((0, m))
            )
            new_obs = [self._train(arch, mask, phase, t) for arch, mask, phase in candidates]
            observed = np.stack([o.losses for o in new_obs]) if new_obs else np.zeros((0, m))
            clip = self.surrogate_.clip_value_
            tau = kendall_tau(np.minimum(predicted, clip), np.minimum(observed, clip))
            jump: dict | None = None
            if cfg.explore and t % cfg.explore_every == 0:
                self._explore_masks(archs, sizes, rng, t)
                if cfg.jumps and not cfg.freeze_routing:
                    jump = self._partition_jump(archs, assignment, sizes, rng, t)
                    if jump["accepted"]:
                        assignment = np.asarray(jump["proposal"])
                        archs = [Arch.from_json(a) for a in jump["architectures"]]
                        logits = hard_logits(assignment, k_experts)
                        routing = softmax(logits, axis=1)
            self._refit(t)

            u_now = expected_losses(self.surrogate_, archs, routing, uniforms)
            row = {
                "iteration": t,
                "objective": objective(routing, u_now, sizes),
                "measured_objective": self._measured_objective(archs, assignment, sizes),
                "routing": assignment.tolist(),
                "oracle_match": None
                if task.oracle_partition is None
                else partition_match(assignment, task.oracle_partition),
                "architectures": [a.key for a in archs],
                "routing_step_accepted": bool(r_info["accepted"]),
                "kendall_tau": tau,
                "jump": jump,
                "trained": len(self.store_) - n_before,
                "n_trained": len(self.store_),
                "seconds": time.perf_counter() - t0,
            }
            trace.append(row)
            self._emit("iteration", {"row": row, "logits": logits, "archs": archs})
            if self.progress:
                iterations.set_postfix(
                    match=row["oracle_match"], obs=len(self.store_), tau=f"{tau:.2f}"
                )

        routing = softmax(logits, axis=1)
        assignment = hard_routing(routing)
        final_archs, region_losses = self._select_final(archs, assignment, val_sizes, rng)
        oracle_match = (
            None
            if task.oracle_partition is None
            else partition_match(assignment, task.oracle_partition)
        )
        return SearchResult(
            assignment=assignment,
            architectures=final_archs,
            routing=routing,
            trace=trace,
            store=self.store_,
            oracle_match=oracle_match,
            n_trained=len(self.store_),
            seconds=time.perf_counter() - start,
            region_val_losses=region_losses,
        )

    def _acquire(
        self,
        pools: list[ExpertPool],
        q: np.ndarray,
        routing: np.ndarray,
        assignment: np.ndarray,
        sizes: np.ndarray,
        rng: np.random.Generator,
        t: int,
    ) -> list[tuple[Arch, np.ndarray, str]]:
        """Per expert: the incumbent on its hard region, then the lowest-LCB pool members,
        each on a mask drawn from its routing column."""
        cfg = self.config
        out: list[tuple[Arch, np.ndarray, str]] = []
        for k, pool in enumerate(pools):
            region = assignment == k
            if cfg.measure_incumbents and region.any():
                out.append((pool.best, region, "incumbent"))
            if cfg.acquisitions_per_expert == 0:
                continue
            order = np.argsort(pool.scores)[: cfg.lcb_shortlist]
            shortlist = [pool.archs[i] for i in order]
            weights = sizes * q[:, k]
            mc = self.surrogate_.predict_mc(
                [a for a in shortlist for _ in range(len(pool.masks))],
                np.tile(pool.masks, (len(shortlist), 1)),
                seed=self.seed * 104_729 + t * 31 + k,
            )  # (T, L*S, M)
            n_t = mc.shape[0]
            mc = mc.reshape(n_t, len(shortlist), len(pool.masks), -1).mean(axis=2)
            scalar = mc @ weights / max(weights.sum(), 1e-12)  # (T, L)
            bounds = lcb(scalar.mean(0), scalar.std(0))
            fallback = region if region.any() else np.ones_like(region)
            taken = 0
            for i in np.argsort(bounds):
                if taken == cfg.acquisitions_per_expert:
                    break
                mask = nonempty_bernoulli_mask(routing[:, k], rng, fallback)
                if any(a == shortlist[i] and np.array_equal(b, mask) for a, b, _ in out):
                    continue
                out.append((shortlist[i], mask, "s-step"))
                taken += 1
        return out

    def _best_for_region(
        self, region: np.ndarray, sizes: np.ndarray, rng: np.random.Generator
    ) -> Arch:
        """The surrogate's favourite from a fresh pool for training on `region`."""
        pool = self.space.sample_many(self.config.pool_size, rng)
        scores = score_pool(
            self.surrogate_, pool, region[None, :].astype(np.float64), sizes * region
        )
        return pool[int(np.argmin(scores))]

    def _explore_masks(
        self, archs: list[Arch], sizes: np.ndarray, rng: np.random.Generator, t: int
    ) -> None:
        """Train each affinity group as a mask with the incumbents and one surrogate pick."""
        groups = affinity_groups(
            self.store_.losses, self.config.explore_groups, self.surrogate_.clip_value_
        )
        for g in np.unique(groups):
            region = groups == g
            for arch in [*archs, self._best_for_region(region, sizes, rng)]:
                self._train(arch, region, "explore", t)

    def _measure_partition(
        self,
        assignment: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        rng: np.random.Generator,
        t: int,
    ) -> tuple[float, list[Arch]]:
        """Measured J of a hard partition: per region, the better of the incumbent and one
        surrogate-chosen alternative, both really trained on that region."""
        total, best_archs = 0.0, []
        for k, incumbent in enumerate(archs):
            region = assignment == k
            if not region.any():
                best_archs.append(incumbent)
                continue
            options = []
            for arch in (incumbent, self._best_for_region(region, sizes, rng)):
                obs = self._train(arch, region, "jump", t)
                options.append((-float(np.sum(sizes[region] * obs.losses[region])), arch))
            value, arch = max(options, key=lambda o: o[0])
            total += value
            best_archs.append(arch)
        return total, best_archs

    def _partition_jump(
        self,
        archs: list[Arch],
        assignment: np.ndarray,
        sizes: np.ndarray,
        rng: np.random.Generator,
        t: int,
    ) -> dict:
        k_experts = self.config.n_experts
        groups = affinity_groups(self.store_.losses, k_experts, self.surrogate_.clip_value_)
        proposal = align_labels(groups, assignment, k_experts)
        record: dict = {"proposal": proposal.tolist(), "accepted": False}
        if np.array_equal(proposal, assignment):
            record["reason"] = "proposal equals the current routing"
            return record
        current_value, current_archs = self._measure_partition(assignment, archs, sizes, rng, t)
        proposal_value, proposal_archs = self._measure_partition(proposal, archs, sizes, rng, t)
        accepted = proposal_value > current_value
        record.update(
            accepted=bool(accepted),
            measured_current=current_value,
            measured_proposal=proposal_value,
            architectures=[a.to_json() for a in (proposal_archs if accepted else current_archs)],
        )
        return record

    def _measured_objective(
        self, archs: list[Arch], assignment: np.ndarray, sizes: np.ndarray
    ) -> float | None:
        rows = []
        for k, arch in enumerate(archs):
            region = assignment == k
            if not region.any():
                rows.append(np.zeros(len(assignment)))
                continue
            obs = self.store_.lookup(arch, region)
            if obs is None:
                return None
            rows.append(obs.losses)
        return measured_hard_objective(assignment, np.stack(rows), sizes)

    def _select_final(
        self,
        archs: list[Arch],
        assignment: np.ndarray,
        val_sizes: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[list[Arch], list[float | None]]:
        """Best measured architecture on each expert's exact final region."""
        final, losses = [], []
        t = self.config.n_iterations + 1
        for k, incumbent in enumerate(archs):
            region = assignment == k
            if not region.any():
                final.append(incumbent)
                losses.append(None)
                continue
            self._train(incumbent, region, "final", t)
            for arch in self.space.sample_many(self.config.refit_budget, rng):
                self._train(arch, region, "refit", t)
            scored = [
                (region_loss(o.losses, region, val_sizes), i, o.arch)
                for i, o in enumerate(self.store_.on_mask(region))
            ]
            best = min(scored)
            final.append(best[2])
            losses.append(best[0])
        return final, losses


__all__ = ["SGEM", "SearchResult", "score_pool"]
