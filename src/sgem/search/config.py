"""Search configuration (all of it is written to the run directory)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..config_fields import check_bool, check_choice, check_float, check_int, config_from_dict
from ..surrogate.model import SurrogateConfig
from ..train.trainer import TrainConfig

LB_KINDS = ("clusters", "samples")
INIT_MASKS = ("random", "geometric", "auto")
EQUAL_EFFORT = ("auto", "always", "never")


@dataclass(frozen=True)
class SearchConfig:
    """Every setting of the search. Three defaults adapt to the size of the task:
    `init_masks="auto"` (balls of nearest clusters when M > `geometric_above`),
    `equal_effort_jumps="auto"` (the joint-architecture jump test when M >
    `geometric_above` or K > 2) and `finalist_champions` (on at every size: the return
    rule trains each finalist's region k with the best architectures measured on the
    finalists' regions k). At the default toy size (M = 20, K = 2) only the last one
    differs from the paper's loop."""

    n_experts: int = 2
    n_iterations: int = 20
    n_init: int = 60  # random (arch, mask) observations before the first surrogate fit
    init_min_mask: int = 3  # mask sizes are log-uniform in [init_min_mask, M]
    # initial masks: "random" subsets (the paper), "geometric" balls of nearest clusters in
    # centroid space (near-pure masks at large M), or "auto": geometric when M >
    # `geometric_above` and the task has centroids, random otherwise
    init_masks: str = "auto"
    geometric_above: int = 40
    pool_size: int = 200  # fresh architectures scored per expert per M-step
    mc_masks: int = 16  # Bernoulli masks averaged for u(alpha, r) (mask extension)
    routing_steps: int = 40
    routing_lr: float = 0.1
    gumbel_temperature: float = 0.5
    acquisitions_per_expert: int = 2  # LCB-chosen candidates trained per expert per S-step
    lcb_shortlist: int = 16  # best-by-mean pool members whose LCB is computed
    measure_incumbents: bool = True  # train each incumbent on its hard region (measured J)
    # exploration of the mask space (paper appendix): every `explore_every` iterations the
    # affinity groups are trained as masks and a K-way partition jump is proposed
    explore: bool = True
    jumps: bool = True
    explore_every: int = 4
    explore_groups: int = 4
    # coarse-to-fine jumps: the first exploration round proposes the K-means partition of
    # the cluster centroids (geometry: the coarse split), later rounds the affinity
    # grouping (the loss-driven refinement); every proposal is accepted on measured J only
    geometric_jumps: bool = False
    # equal-effort jump test: the current and the proposed partition's regions k are both
    # trained with one joint set (incumbent k, the surrogate's picks and the champions of
    # either partition's region k) instead of each with its own incumbent + pick.
    # "auto": on for large searches (M > `geometric_above` or K > 2), where the incumbents
    # and the surrogate's picks are least likely to suit a proposal's regions; "always";
    # "never" (the paper's test)
    equal_effort_jumps: str = "auto"
    # the k-means split of the cluster centroids (label-free geometry) joins the finalists,
    # so the returned partition measures at least as well as geometry does with the same
    # architectures, and it is returned unless another finalist beats it by two standard
    # errors of the training noise (`selection.geometry_test`): the search can only improve on it
    geometry_finalist: bool = True
    # the finalists' region k are trained with incumbent k, the champion (best measured
    # architecture so far) of every finalist's region k (labels aligned to the final
    # iterate) and `finalist_budget` random ones; False: every incumbent plus the random ones
    finalist_champions: bool = True
    refit_budget: int = 16  # random architectures per expert in the final per-region refit
    final_candidates: int = 3  # visited partitions re-measured at the end (1 = final iterate)
    # random architectures (besides the incumbents) every finalist region is trained with;
    # the winner then gets the rest of `refit_budget`
    finalist_budget: int = 4
    # the finalists' second look (final.check), only when the final experts' length
    # is chosen on validation: the return rule's partition and the next
    # `final_check_partitions - 1` contenders (the geometry split first), each region with
    # its `final_check_archs` best candidate architectures, judged by the final protocol's
    # own tracking run (early-stopped validation NLL); 0 partitions: off (the default: on
    # ts-offline it cost +50% wall clock and, on the one seed compared with it off, chose
    # cells that validated better and tested worse, 0.2807 vs 0.2617 test NLL; set 2 to use)
    final_check_partitions: int = 0
    final_check_archs: int = 2
    # with warm-started final experts (final_length: validation-warm): a champion cell, the
    # best of this many random cells trained on every cluster (final.champion), is offered
    # to every expert beside its own cell; each keeps the one whose warm tracking run scores
    # the lower validation NLL on its region (0: off). Why: under warm starts an expert's
    # cell is first a global network, and cells ranked by training from scratch on a region
    # made worse ones (benchmarks/results/cell_choice_emulation.json)
    champion_cells: int = 0
    freeze_routing: bool = False  # ablation: no M-step on R (routing stays at its random init)
    # ablation: the scalar surrogate (region average, eq. scalar_u) with the load-balancing
    # penalty lb_weight * LB(R) in the routing M-step ("clusters" or "samples" fractions)
    scalar_surrogate: bool = False
    lb_weight: float = 0.0
    lb_kind: str = "clusters"
    final_steps: int = 600  # training steps of the final experts on train + val
    # scale-out (both off by default: the search is then exactly the paper's loop).
    # batch_size q > 0: the S-step proposes q LCB candidates in total per iteration, spread
    # over the experts and chosen jointly (acquisition.acquire_batch), instead of
    # `acquisitions_per_expert` per expert; the incumbents are measured as before
    batch_size: int = 0
    # pipeline d > 0: S-steps overlap with training at a fixed lag (search.loop): batch
    # t is proposed while batches t-d .. t-1 train, from the surrogate fitted on batches
    # <= t-d-1, so workers need not wait on a refit; the same search on every executor.
    # 1 suffices when a step's training outlasts a refit; more hides slower refits at the
    # cost of staler proposals
    pipeline: int = 0
    train: TrainConfig = field(default_factory=TrainConfig)
    surrogate: SurrogateConfig = field(default_factory=SurrogateConfig)

    def __post_init__(self) -> None:
        """Every field typed and range-checked once, for the Python API and YAML alike
        (a `SgemUserError` naming the field, the value and what is allowed)."""
        for name in (
            "n_experts",
            "n_iterations",
            "n_init",
            "init_min_mask",
            "geometric_above",
            "pool_size",
            "mc_masks",
            "lcb_shortlist",
            "explore_every",
            "explore_groups",
            "final_candidates",
            "final_steps",
        ):
            check_int(self, name, 1)
        # 0 is meaningful: no M-step on R, no acquisitions, no refit, no finalist trainings,
        # per-expert acquisitions (batch_size)
        for name in (
            "routing_steps",
            "acquisitions_per_expert",
            "refit_budget",
            "finalist_budget",
            "batch_size",
            "pipeline",
            "final_check_partitions",
            "champion_cells",
        ):
            check_int(self, name, 0)
        check_int(self, "final_check_archs", 1)
        check_float(self, "routing_lr", 0.0, low_open=True)
        # the Gumbel-softmax divides by the temperature: 0 makes every routing NaN
        check_float(self, "gumbel_temperature", 0.0, low_open=True)
        check_float(self, "lb_weight", 0.0)
        for name in (
            "measure_incumbents",
            "explore",
            "jumps",
            "geometric_jumps",
            "geometry_finalist",
            "finalist_champions",
            "freeze_routing",
            "scalar_surrogate",
        ):
            check_bool(self, name)
        check_choice(self, "lb_kind", LB_KINDS)
        check_choice(self, "init_masks", INIT_MASKS)
        check_choice(self, "equal_effort_jumps", EQUAL_EFFORT)
        # nested sections may come as mappings (YAML); unknown keys are errors there too
        object.__setattr__(self, "train", config_from_dict(TrainConfig, self.train, "search.train"))
        object.__setattr__(
            self,
            "surrogate",
            config_from_dict(SurrogateConfig, self.surrogate, "search.surrogate"),
        )

    def equal_effort_for(self, n_clusters: int) -> bool:
        """Whether jumps use the equal-effort test for a task with `n_clusters` clusters."""
        if self.equal_effort_jumps != "auto":
            return self.equal_effort_jumps == "always"
        return n_clusters > self.geometric_above or self.n_experts > 2

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> SearchConfig:
        """From a mapping (the `search` section of a run config); unknown keys are errors
        naming the known ones, and every value is checked (see `__post_init__`)."""
        return config_from_dict(cls, data, "search")
