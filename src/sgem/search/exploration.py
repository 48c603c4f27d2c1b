"""Exploration of the mask space (paper appendix "Exploration Mechanisms in SGEM").

All three mechanisms read only the search's own observations, never domain labels:
cluster affinities -> exploration masks and candidate partitions (jumps); the jump is
accepted on *measured* objective only (`region_value`, via `Explorer.measure_partition`),
so a mis-calibrated surrogate can waste budget but cannot move the routing to a worse
partition.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import AgglomerativeClustering

from ..space.arch import Arch, CellSpace
from ..surrogate.model import LossModel, Surrogate
from .architecture import score_pool
from .config import SearchConfig
from .geometry import centroid_kmeans
from .jump import Jump
from .ledger import Job, Ledger, region_value
from .store import Observation


def residual_profiles(losses: np.ndarray, clip: float | None = None) -> np.ndarray:
    """Cluster x observation matrix of losses with each observation's mean removed.

    `losses` is (S, M) (one row per observation). Removing the observation (column) mean
    takes out the global strength of an architecture, leaving how each cluster *reacts*.
    """
    y = np.asarray(losses, dtype=np.float64)
    if clip is not None:
        y = np.minimum(y, clip)
    y = y.T  # (M, S)
    return y - y.mean(axis=0, keepdims=True)


def affinity_groups(losses: np.ndarray, n_groups: int, clip: float | None = None) -> np.ndarray:
    """Group clusters whose residual profiles correlate (agglomerative, average linkage).

    Returns a group label per cluster (length M).
    """
    profiles = residual_profiles(losses, clip)
    m = profiles.shape[0]
    n_groups = int(min(max(n_groups, 1), m))
    if n_groups == 1:
        return np.zeros(m, dtype=np.int64)
    centred = profiles - profiles.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(centred, axis=1, keepdims=True)
    unit = centred / np.where(norms > 0, norms, 1.0)
    corr = np.clip(unit @ unit.T, -1.0, 1.0)
    distance = 1.0 - corr
    np.fill_diagonal(distance, 0.0)
    model = AgglomerativeClustering(n_clusters=n_groups, metric="precomputed", linkage="average")
    return model.fit_predict(distance).astype(np.int64)


def align_labels(proposal: np.ndarray, current: np.ndarray, n_experts: int) -> np.ndarray:
    """Relabel a proposed partition so that its regions overlap most with the current
    experts' regions (Hungarian), keeping each expert's incumbent architecture meaningful."""
    overlap = np.zeros((n_experts, n_experts))
    np.add.at(overlap, (proposal, current), 1)
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    mapping = np.empty(n_experts, dtype=np.int64)
    mapping[rows] = cols
    return mapping[proposal]


def champions(ledger: Ledger, region: np.ndarray, sizes: np.ndarray) -> list[Arch]:
    """The architectures of best measured value on `region`'s clusters: among trainings on
    exactly `region`, and among trainings on any mask that covers it (a region never
    trained on as such still has evidence from larger masks). Empty if neither exists."""
    store = ledger.store
    if not region.any() or not len(store):
        return []
    observations = store.observations
    masks = np.stack([o.mask for o in observations])
    values = -(np.stack([o.losses for o in observations])[:, region] @ sizes[region])
    covers = masks[:, region].all(axis=1)
    exact = covers & (masks.sum(axis=1) == region.sum())
    out = []
    for chosen in (exact, covers):
        if chosen.any():
            best = int(np.argmax(np.where(chosen, values, -np.inf)))
            out.append(observations[best].arch)
    return list(dict.fromkeys(out))


def hard_logits(assignment: np.ndarray, n_experts: int, confidence: float = 0.9) -> np.ndarray:
    """Routing logits whose softmax puts `confidence` on the assigned expert."""
    rest = (1.0 - confidence) / max(n_experts - 1, 1)
    logits = np.full((len(assignment), n_experts), np.log(rest))
    logits[np.arange(len(assignment)), assignment] = np.log(confidence)
    return logits


@dataclass
class ExplorationBatch:
    """What one exploration step trains (`Explorer.batch`): the affinity masks' jobs, then a
    jump's trainings on the current and on the proposed partition, with the jump's record so
    far (None: no jump this time)."""

    masks: list[Job]
    current: list[Job]
    proposed: list[Job]
    jump: Jump | None

    @property
    def jobs(self) -> list[Job]:
        return [*self.masks, *self.current, *self.proposed]


class Explorer:
    """Exploration masks and partition jumps, trained through the ledger.

    `surrogate` supplies the clip value for the affinities; `u` (the surrogate or its scalar
    reduction, what the M-steps see) picks the alternative architecture for a region.
    """

    def __init__(
        self,
        ledger: Ledger,
        space: CellSpace,
        surrogate: Surrogate,
        u: LossModel,
        config: SearchConfig,
        centroids: np.ndarray | None = None,
    ) -> None:
        self.ledger = ledger
        self.centroids = None if centroids is None else np.asarray(centroids, dtype=np.float64)
        self.geometric_jumps = config.geometric_jumps
        self.explore_every = config.explore_every
        self.jumps = config.jumps and not config.freeze_routing  # frozen routing never jumps
        self.space = space
        self.surrogate = surrogate
        self.u = u
        self.pool_size = config.pool_size
        self.n_groups = config.explore_groups
        self.n_experts = config.n_experts
        self.equal_effort = config.equal_effort_for(ledger.store.n_clusters)

    def best_for_region(
        self, region: np.ndarray, sizes: np.ndarray, rng: np.random.Generator
    ) -> Arch:
        """The surrogate's favourite from a fresh pool for training on `region`."""
        pool = self.space.sample_many(self.pool_size, rng)
        scores = score_pool(self.u, pool, region[None, :].astype(np.float64), sizes * region)
        return pool[int(np.argmin(scores))]

    def batch(
        self,
        archs: list[Arch],
        assignment: np.ndarray,
        sizes: np.ndarray,
        rng: np.random.Generator,
        t: int,
    ) -> ExplorationBatch:
        """One exploration step's trainings, all decided before any of them trains (so they
        go out with the S-step's batch): the affinity masks' jobs, then (unless jumps are
        off or the routing is frozen) a jump's trainings on the current and on the proposed
        partition."""
        masks = self.mask_jobs(archs, sizes, rng)
        if not self.jumps:
            return ExplorationBatch(masks, [], [], None)
        jump, current, proposed = self.jump_jobs(archs, assignment, sizes, rng, t)
        return ExplorationBatch(masks, current, proposed, jump)

    def settle(
        self,
        batch: ExplorationBatch,
        archs: list[Arch],
        assignment: np.ndarray,
        sizes: np.ndarray,
        outcomes: list[Observation | None],
    ) -> Jump | None:
        """The jump's verdict from the outcomes of `batch.jobs` (in that order); the record
        as it is when the jump trained nothing, None when there was no jump."""
        if batch.jump is None or batch.jump.reason is not None:
            return batch.jump
        start = len(batch.masks)
        middle = start + len(batch.current)
        return self.decide_jump(
            batch.jump, archs, assignment, sizes, outcomes[start:middle], outcomes[middle:]
        )

    def mask_jobs(
        self, archs: list[Arch], sizes: np.ndarray, rng: np.random.Generator
    ) -> list[Job]:
        """The exploration masks' jobs: each affinity group with the incumbents and one
        surrogate pick."""
        groups = affinity_groups(
            self.ledger.store.losses, self.n_groups, self.surrogate.clip_value_
        )
        jobs: list[Job] = []
        for g in np.unique(groups):
            region = groups == g
            jobs += [
                (a, region, "explore") for a in (*archs, self.best_for_region(region, sizes, rng))
            ]
        return jobs

    def partition_slots(
        self,
        assignment: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        rng: np.random.Generator,
    ) -> list[list[Arch]]:
        """Per expert, what measuring a hard partition trains on its region: the incumbent
        and one surrogate-chosen alternative (the incumbent only for an empty region)."""
        slots = []
        for k, incumbent in enumerate(archs):
            region = assignment == k
            pick = [self.best_for_region(region, sizes, rng)] if region.any() else []
            slots.append([incumbent, *pick])
        return slots

    def jump_slots(
        self,
        archs: list[Arch],
        assignment: np.ndarray,
        proposal: np.ndarray,
        sizes: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[list[list[Arch]], list[list[Arch]]]:
        """The architectures a jump trains on the current and on the proposed regions.

        Each partition its own `partition_slots` (the paper); with `equal_effort_jumps` both
        get one joint set per expert k: the incumbent, the surrogate's pick and the
        `champions` (best measured architectures so far) of the current *and* of the
        proposed region k, so neither is judged with architectures chosen for the other."""
        current = self.partition_slots(assignment, archs, sizes, rng)
        proposed = self.partition_slots(proposal, archs, sizes, rng)
        if not self.equal_effort:
            return current, proposed
        joint = []
        for k, (mine, theirs) in enumerate(zip(current, proposed, strict=True)):
            found = [
                a for p in (assignment, proposal) for a in champions(self.ledger, p == k, sizes)
            ]
            joint.append(list(dict.fromkeys([*mine, *theirs, *found])))
        return joint, joint

    @staticmethod
    def slot_jobs(assignment: np.ndarray, slots: list[list[Arch]]) -> list[Job]:
        """One jump-phase job per (non-empty region of `assignment`, architecture of its
        slot)."""
        jobs: list[Job] = []
        for k, slot in enumerate(slots):
            region = assignment == k
            if region.any():
                jobs += [(a, region, "jump") for a in slot]
        return jobs

    def partition_jobs(
        self,
        assignment: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        rng: np.random.Generator,
    ) -> list[Job]:
        """What measuring a hard partition trains: per non-empty region, the incumbent and
        one surrogate-chosen alternative."""
        return self.slot_jobs(assignment, self.partition_slots(assignment, archs, sizes, rng))

    def measure_partition(
        self,
        assignment: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        rng: np.random.Generator,
        t: int,
    ) -> tuple[float, list[Arch]]:
        """Measured J of a hard partition: per region, the better of the incumbent and one
        surrogate-chosen alternative, both really trained on that region."""
        jobs = self.partition_jobs(assignment, archs, sizes, rng)
        return self.partition_value(assignment, archs, sizes, self.ledger.train(jobs, t))

    def partition_value(
        self,
        assignment: np.ndarray,
        archs: list[Arch],
        sizes: np.ndarray,
        outcomes: list[Observation | None],
    ) -> tuple[float, list[Arch]]:
        """Measured J of a hard partition from trainings on its regions (`outcomes`, e.g. of
        `partition_jobs`): per region, the best `region_value` among the outcomes trained on
        exactly that region, and the architecture that attained it."""
        done = [o for o in outcomes if o is not None]
        total, best_archs = 0.0, []
        for k, incumbent in enumerate(archs):
            region = assignment == k
            if not region.any():
                best_archs.append(incumbent)
                continue
            trained = [o for o in done if np.array_equal(o.mask, region)]
            if not trained:  # every training failed twice: this partition cannot be measured
                return float("-inf"), list(archs)
            value, arch = max(
                ((region_value(o, region, sizes), o.arch) for o in trained),
                key=lambda option: option[0],
            )
            total += value
            best_archs.append(arch)
        return total, best_archs

    def proposal(self, assignment: np.ndarray, t: int) -> np.ndarray:
        """The partition a jump at iteration `t` proposes (labels aligned to `assignment`):
        with `geometric_jumps`, the geometry split (`search.geometry`) in the first round, else
        the affinity grouping of the measured losses."""
        first_round = t <= self.explore_every  # a function of t: the same after a resume
        if self.geometric_jumps and first_round and self.centroids is not None:
            groups = centroid_kmeans(self.centroids, self.n_experts, self.ledger.seed)
        else:
            groups = affinity_groups(
                self.ledger.store.losses, self.n_experts, self.surrogate.clip_value_
            )
        return align_labels(groups, assignment, self.n_experts)

    def jump_jobs(
        self,
        archs: list[Arch],
        assignment: np.ndarray,
        sizes: np.ndarray,
        rng: np.random.Generator,
        t: int,
    ) -> tuple[Jump, list[Job], list[Job]]:
        """A jump whose trainings go out with a batch and are judged later (`decide_jump`):
        the record so far, then the jobs measuring the current and the proposed partition
        (none when the proposal equals the current routing: the record is then final)."""
        return self._jobs_for(archs, assignment, self.proposal(assignment, t), sizes, rng)

    def _jobs_for(
        self,
        archs: list[Arch],
        assignment: np.ndarray,
        proposal: np.ndarray,
        sizes: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[Jump, list[Job], list[Job]]:
        """`jump_jobs` for a given proposal."""
        record = Jump(np.asarray(proposal).tolist())
        if np.array_equal(proposal, assignment):
            return replace(record, reason="proposal equals the current routing"), [], []
        current, proposed = self.jump_slots(archs, assignment, proposal, sizes, rng)
        return record, self.slot_jobs(assignment, current), self.slot_jobs(proposal, proposed)

    def decide_jump(
        self,
        record: Jump,
        archs: list[Arch],
        assignment: np.ndarray,
        sizes: np.ndarray,
        current: list[Observation | None],
        proposed: list[Observation | None],
    ) -> Jump:
        """Judge a `jump_jobs` proposal on the outcomes of its trainings (as `evaluate_jump`)."""
        proposal = np.asarray(record.proposal)
        return record.verdict(
            self.partition_value(assignment, archs, sizes, current),
            self.partition_value(proposal, archs, sizes, proposed),
        )

    def evaluate_jump(
        self,
        archs: list[Arch],
        assignment: np.ndarray,
        proposal: np.ndarray,
        sizes: np.ndarray,
        rng: np.random.Generator,
        t: int,
    ) -> Jump:
        """Accept `proposal` only if its *measured* objective beats the current partition's
        (both partitions' trainings in one batch, judged as the search loop judges them)."""
        record, current, proposed = self._jobs_for(archs, assignment, proposal, sizes, rng)
        batch = ExplorationBatch([], current, proposed, record)
        outcomes = self.ledger.train(batch.jobs, t) if batch.jobs else []
        settled = self.settle(batch, archs, assignment, sizes, outcomes)
        assert settled is not None
        return settled
