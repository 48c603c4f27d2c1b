"""The SGEM loop (paper Algorithm 1): E-step, M-step on R, M-step on alpha, S-step, plus
the exploration mechanisms of the paper's appendix.

Return rule. The surrogate changes at every refit, so surrogate objective values from
different iterations are not comparable and are never used to pick an iterate. Measured
values (real training outcomes) are, provided they were obtained with equal effort: SGEM
re-measures a few finalist partitions (the final iterate's and the best other visited ones)
with one common set of architectures (the final incumbents plus a few random ones) and
returns the partition with the best measured objective, each expert with the
architecture of lowest measured validation loss on its region (see `_finalise`).

Persistence. Every training is requested through `_train_batch`, which reuses finished
results (also from an interrupted earlier process), runs the rest on the executor, retries a
failure once and commits results in request order. At the end of every iteration the whole
search state (routing logits, incumbents, surrogate weights, RNG state, trace, the list of
visible observations) is checkpointed, so `fit(..., resume=True)` continues exactly where
an interrupted run stopped and reproduces the uninterrupted result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.special import softmax
from tqdm.auto import tqdm

from ..data.task import ClusteredTask
from ..executors import Executor, TrainJob, job_seed, make_executor
from ..metrics import partition_match
from ..space.arch import Arch, CellSpace
from ..store import Observation, ObservationStore
from ..surrogate.model import Surrogate, kendall_tau, lcb
from ..surrogate.scalar import ScalarReduced
from ..train.losses import region_loss
from ..train.trainer import Trainer
from .architecture import ExpertPool, architecture_m_step, score_pool
from .config import SearchConfig
from .exploration import affinity_groups, align_labels, hard_logits
from .masks import log_uniform_size_mask, nonempty_bernoulli_mask
from .objective import e_step, hard_routing, measured_hard_objective, objective
from .routing import expected_losses, routing_m_step

MAX_ATTEMPTS = 2  # a failed training is retried once


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


Listener = Callable[[str, dict], None]
Job = tuple[Arch, np.ndarray, str]  # (architecture, training mask, phase)


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
        self.listener = listener or (lambda event, payload: None)
        self.device = device

    # -- training requests -----------------------------------------------------------------
    def _train_batch(self, jobs: Sequence[Job], iteration: int) -> list[Observation | None]:
        """Train (or reuse) each (arch, mask) and make results visible in request order.

        A job that fails twice is recorded as failed (with its traceback) and returns None.
        """
        results: dict[int, Observation] = {}
        pending: list[tuple[int, TrainJob, str]] = []
        seen: dict[tuple, int] = {}
        for i, (arch, mask, phase) in enumerate(jobs):
            mask = np.asarray(mask, dtype=bool)
            key = (arch, mask.tobytes())
            if key in seen:
                continue
            seen[key] = i
            if self.store_.lookup(arch, mask) is None and self.store_.reuse(arch, mask) is None:
                seed = job_seed(self.seed, arch, mask)
                pending.append((i, TrainJob(arch, mask, seed), phase))
            else:
                results[i] = self.store_.lookup(arch, mask)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            if not pending:
                break
            rows = [
                self.store_.begin(job.arch, job.mask, job.seed, phase, iteration, attempt)
                for _, job, phase in pending
            ]
            outcomes = self.executor_.run([job for _, job, _ in pending])
            retry = []
            for (i, job, phase), row, out in zip(pending, rows, outcomes, strict=True):
                if out.error is not None:
                    self.store_.fail(row, out.error)
                    self.failures_ += 1
                    retry.append((i, job, phase))
                    continue
                obs = Observation(
                    job.arch,
                    job.mask,
                    np.asarray(out.losses),
                    out.seconds,
                    job.seed,
                    phase,
                    iteration,
                    out.device,
                )
                self.store_.complete(row, obs, visible=False)
                results[i] = obs
            pending = retry
        ordered: list[Observation | None] = []
        for arch, mask, _ in jobs:
            j = seen[(arch, np.asarray(mask, dtype=bool).tobytes())]
            obs = results.get(j)
            if obs is not None:
                self.store_.reuse(obs.arch, obs.mask)  # visible, in request order
            ordered.append(obs)
        return ordered

    def _refit(self, iteration: int) -> None:
        self.surrogate_.fit(
            self.store_.archs, self.store_.masks, self.store_.losses, seed=self.seed + iteration
        )

    # -- checkpoints -----------------------------------------------------------------------
    def _checkpoint(self, t: int, logits: np.ndarray, archs: list[Arch], rng, trace) -> None:
        self.store_.save_checkpoint(
            t,
            {
                "iteration": t,
                "logits": logits,
                "archs": [a.dumps() for a in archs],
                "rng": rng.bit_generator.state,
                "torch_rng": torch.get_rng_state(),
                "surrogate": self.surrogate_.state_dict(),
                "trace": trace,
                "visible": self.store_.visible_keys(),
                "failures": self.failures_,
            },
        )

    # -- the loop --------------------------------------------------------------------------
    def fit(
        self,
        task: ClusteredTask,
        store: ObservationStore | None = None,
        executor: Executor | str = "inline",
        resume: bool = False,
    ) -> SearchResult:
        """Run the search. `executor` is an Executor or the name of one ("inline",
        "batched", "processes", "ray"); `resume=True` continues from the store's last
        checkpoint."""
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
        m, k_experts = task.n_clusters, cfg.n_experts
        self.store_ = store if store is not None else ObservationStore(m)
        self.failures_ = 0
        self.surrogate_ = Surrogate(self.space, m, cfg.surrogate, seed=self.seed)
        # what the E- and M-steps see: the per-cluster surrogate, or its scalar reduction
        self.u_ = (
            ScalarReduced(self.surrogate_, val_sizes) if cfg.scalar_surrogate else self.surrogate_
        )

        state = self.store_.latest_checkpoint() if resume else None
        if state is None:
            logits = rng.normal(size=(m, k_experts))
            archs = self.space.sample_many(k_experts, rng)
            init_jobs = [
                (self.space.sample(rng), log_uniform_size_mask(m, rng, cfg.init_min_mask), "init")
                for _ in range(cfg.n_init)
            ]
            self._train_batch(init_jobs, 0)
            self._refit(0)
            trace: list[dict] = []
            t_done = 0
            self._checkpoint(0, logits, archs, rng, trace)
        else:
            self.store_.mark_interrupted()
            self.store_.restore_visible(state["visible"])
            self.surrogate_.load_state_dict(state["surrogate"])
            rng.bit_generator.state = state["rng"]
            torch.set_rng_state(state["torch_rng"])
            logits = np.asarray(state["logits"])
            archs = [Arch.from_json(a) for a in state["archs"]]
            trace = list(state["trace"])
            t_done = int(state["iteration"])
            self.failures_ = int(state["failures"])
            self.listener("restored", {"trace": trace, "iteration": t_done})

        iterations = tqdm(
            range(t_done + 1, cfg.n_iterations + 1),
            desc="SGEM",
            disable=not self.progress,
            initial=t_done,
            total=cfg.n_iterations,
        )
        for t in iterations:
            logits, archs, row = self._iteration(t, task, logits, archs, sizes, rng)
            trace.append(row)
            self._checkpoint(t, logits, archs, rng, trace)
            self.listener("iteration", {"row": row})
            if self.progress:
                iterations.set_postfix(
                    match=row["oracle_match"], obs=len(self.store_), tau=f"{row['kendall_tau']:.2f}"
                )
        iterations.close()

        routing = softmax(logits, axis=1)
        assignment, final_archs, region_losses, selection = self._finalise(
            trace, hard_routing(routing), archs, sizes, val_sizes, rng
        )
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
            failures=self.failures_,
            selection=selection,
        )

    def _iteration(
        self,
        t: int,
        task: ClusteredTask,
        logits: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, list[Arch], dict]:
        cfg = self.config
        m, k_experts = task.n_clusters, cfg.n_experts
        t0 = time.perf_counter()
        n_before = len(self.store_)
        routing = softmax(logits, axis=1)
        uniforms = rng.random((k_experts, cfg.mc_masks, m))
        # E-step
        q = e_step(routing, expected_losses(self.u_, archs, routing, uniforms))
        # M-step (routing)
        r_info: dict = {"accepted": False}
        if not cfg.freeze_routing:
            logits, r_info = routing_m_step(
                logits,
                q,
                self.u_,
                archs,
                sizes,
                steps=cfg.routing_steps,
                lr=cfg.routing_lr,
                n_samples=cfg.mc_masks,
                temperature=cfg.gumbel_temperature,
                seed=self.seed * 7919 + t,
                check_uniforms=uniforms,
                lb_weight=cfg.lb_weight,
                lb_kind=cfg.lb_kind,
            )
        routing = softmax(logits, axis=1)
        # M-step (architectures)
        pools = architecture_m_step(
            self.u_, self.space, archs, q, routing, sizes, uniforms, cfg.pool_size, rng
        )
        archs = [p.best for p in pools]
        assignment = hard_routing(routing)
        # S-step: train the LCB-chosen candidates (and measure the incumbents), refit
        jobs = self._acquire(pools, q, routing, assignment, sizes, rng, t)
        tau = float("nan")
        if jobs:
            predicted = self.surrogate_.predict(
                [j[0] for j in jobs], np.stack([j[1] for j in jobs])
            )
            done = self._train_batch(jobs, t)
            keep = [i for i, o in enumerate(done) if o is not None]
            if keep:
                observed = np.stack([done[i].losses for i in keep])
                clip = self.surrogate_.clip_value_
                tau = kendall_tau(np.minimum(predicted[keep], clip), np.minimum(observed, clip))
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

        u_now = expected_losses(self.u_, archs, routing, uniforms)
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
            "failures": self.failures_,
            "seconds": time.perf_counter() - t0,
        }
        return logits, archs, row

    def _acquire(
        self,
        pools: list[ExpertPool],
        q: np.ndarray,
        routing: np.ndarray,
        assignment: np.ndarray,
        sizes: np.ndarray,
        rng: np.random.Generator,
        t: int,
    ) -> list[Job]:
        """Per expert: the incumbent on its hard region, then the lowest-LCB pool members,
        each on a mask drawn from its routing column."""
        cfg = self.config
        out: list[Job] = []
        for k, pool in enumerate(pools):
            region = assignment == k
            if cfg.measure_incumbents and region.any():
                out.append((pool.best, region, "incumbent"))
            if cfg.acquisitions_per_expert == 0:
                continue
            order = np.argsort(pool.scores)[: cfg.lcb_shortlist]
            shortlist = [pool.archs[i] for i in order]
            weights = sizes * q[:, k]
            mc = self.u_.predict_mc(
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
        scores = score_pool(self.u_, pool, region[None, :].astype(np.float64), sizes * region)
        return pool[int(np.argmin(scores))]

    def _explore_masks(
        self, archs: list[Arch], sizes: np.ndarray, rng: np.random.Generator, t: int
    ) -> None:
        """Train each affinity group as a mask with the incumbents and one surrogate pick."""
        groups = affinity_groups(
            self.store_.losses, self.config.explore_groups, self.surrogate_.clip_value_
        )
        jobs: list[Job] = []
        for g in np.unique(groups):
            region = groups == g
            jobs += [
                (a, region, "explore") for a in (*archs, self._best_for_region(region, sizes, rng))
            ]
        self._train_batch(jobs, t)

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
        jobs: list[Job] = []
        for k, incumbent in enumerate(archs):
            region = assignment == k
            if region.any():
                jobs += [
                    (incumbent, region, "jump"),
                    (self._best_for_region(region, sizes, rng), region, "jump"),
                ]
        done = iter(self._train_batch(jobs, t))
        total, best_archs = 0.0, []
        for k, incumbent in enumerate(archs):
            region = assignment == k
            if not region.any():
                best_archs.append(incumbent)
                continue
            trained = [obs for obs in (next(done), next(done)) if obs is not None]
            if not trained:  # both trainings failed twice: this partition cannot be measured
                return float("-inf"), list(archs)
            value, arch = max(
                ((-float(np.sum(sizes[region] * o.losses[region])), o.arch) for o in trained),
                key=lambda option: option[0],
            )
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
        return self.evaluate_jump(archs, assignment, proposal, sizes, rng, t)

    def evaluate_jump(
        self,
        archs: list[Arch],
        assignment: np.ndarray,
        proposal: np.ndarray,
        sizes: np.ndarray,
        rng: np.random.Generator,
        t: int,
    ) -> dict:
        """Accept `proposal` only if its *measured* objective beats the current partition's."""
        record: dict = {"proposal": np.asarray(proposal).tolist(), "accepted": False}
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

    def _region_jobs(self, assignment: np.ndarray, archs: Sequence[Arch]) -> list[Job]:
        """One refit-phase job per (non-empty region of `assignment`, architecture)."""
        jobs: list[Job] = []
        for k in range(self.config.n_experts):
            region = assignment == k
            if region.any():
                jobs += [(a, region, "refit") for a in archs]
        return jobs

    def _visited_partitions(
        self, trace: list[dict], final_assignment: np.ndarray
    ) -> list[tuple[int, tuple[int, ...]]]:
        """Distinct groupings the run visited (each iteration's hard routing and every
        evaluated jump proposal), with the iteration each was first seen at. Partitions that
        differ only by a relabelling of the experts are one grouping (`canonical_partition`)."""
        out: list[tuple[int, tuple[int, ...]]] = []
        seen = {canonical_partition(final_assignment)}
        for row in trace:
            for partition in (row["routing"], (row.get("jump") or {}).get("proposal")):
                if partition is None:
                    continue
                key = canonical_partition(partition)
                if key not in seen:
                    seen.add(key)
                    out.append((row["iteration"], tuple(int(v) for v in partition)))
        return out

    def _screening_value(self, assignment: np.ndarray, sizes: np.ndarray) -> float | None:
        """Measured J from whatever was trained on exactly these regions (None if a region
        never was). Biased towards partitions that were tried more often: used only to pick
        finalists, never to decide between them."""
        total = 0.0
        for k in range(self.config.n_experts):
            region = assignment == k
            if not region.any():
                continue
            values = [
                -float(np.sum(sizes[region] * o.losses[region]))
                for o in self.store_.on_mask(region)
            ]
            if not values:
                return None
            total += max(values)
        return total

    def _finalise(
        self,
        trace: list[dict],
        final_assignment: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        val_sizes: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, list[Arch], list[float | None], dict]:
        """Choose the returned partition and architectures on measured outcomes only.

        Finalists: the final iterate's partition and the best other visited partitions by
        screening value. Every finalist's regions are trained with the *same* architectures
        (the final incumbents plus the first `finalist_budget` of the `refit_budget` random
        ones), so the comparison is fair; the partition with the best measured objective
        wins and its regions get the rest of the random search (the per-region refit). Each
        expert then gets the architecture with the lowest measured validation loss on its
        region among everything trained on exactly that region.
        """
        cfg = self.config
        visited = self._visited_partitions(trace, final_assignment)
        final_key = tuple(final_assignment.tolist())
        screened = []
        for iteration, partition in visited:  # the final iterate's grouping is not among them
            value = self._screening_value(np.array(partition), sizes)
            if value is not None:
                screened.append((value, iteration, partition))
        screened.sort(key=lambda v: -v[0])
        finalists = [(None, cfg.n_iterations, final_key)] + [
            (v, it, p) for v, it, p in screened[: max(cfg.final_candidates - 1, 0)]
        ]
        refit = self.space.sample_many(cfg.refit_budget, rng)
        n_common = min(cfg.finalist_budget, cfg.refit_budget)
        common = list(dict.fromkeys([*archs, *refit[:n_common]]))
        t = cfg.n_iterations + 1
        jobs: list[Job] = []
        for _, _, partition in finalists:
            jobs += self._region_jobs(np.array(partition), common)
        self._train_batch(jobs, t)

        report, best = [], None
        for screening, iteration, partition in finalists:
            assignment = np.array(partition)
            value = 0.0
            for k in range(cfg.n_experts):
                region = assignment == k
                if not region.any():
                    continue
                values = [
                    -float(np.sum(sizes[region] * o.losses[region]))
                    for a in common
                    if (o := self.store_.lookup(a, region)) is not None
                ]
                value += max(values) if values else float("-inf")
            report.append(
                {
                    "partition": list(partition),
                    "first_visited_at_iteration": iteration,
                    "screening_objective": screening,
                    "measured_objective": value,
                }
            )
            if best is None or value > best[0]:
                best = (value, partition)
        chosen = np.array(best[1])
        self._train_batch(self._region_jobs(chosen, refit[n_common:]), t)
        final, losses = [], []
        for k, incumbent in enumerate(archs):
            region = chosen == k
            scored = (
                [
                    (region_loss(o.losses, region, val_sizes), i, o.arch)
                    for i, o in enumerate(self.store_.on_mask(region))
                ]
                if region.any()
                else []
            )
            if not scored:
                final.append(incumbent)
                losses.append(None)
                continue
            top = min(scored)
            final.append(top[2])
            losses.append(top[0])
        for row in report:
            row["chosen"] = tuple(row["partition"]) == best[1]
        selection = {
            "rule": "finalist partitions re-measured with a common architecture set; best "
            "measured objective wins",
            "common_architectures": len(common),
            "refit_architectures_on_chosen": len(dict.fromkeys([*common, *refit])),
            "finalists": report,
            "equals_final_iterate": best[1] == final_key,
        }
        return chosen, final, losses, selection


def canonical_partition(partition: Sequence[int] | np.ndarray) -> tuple[int, ...]:
    """Expert labels renumbered by first appearance: equal for partitions that group the
    clusters identically (e.g. [1, 1, 0] and [0, 0, 1] both give (0, 0, 1))."""
    labels: dict[int, int] = {}
    return tuple(labels.setdefault(int(v), len(labels)) for v in partition)


__all__ = ["SGEM", "SearchResult", "canonical_partition"]
