"""Search configuration (all of it is written to the run directory)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..surrogate.model import SurrogateConfig
from ..train.trainer import TrainConfig


@dataclass(frozen=True)
class SearchConfig:
    n_experts: int = 2
    n_iterations: int = 20
    n_init: int = 60  # random (arch, mask) observations before the first surrogate fit
    init_min_mask: int = 3  # mask sizes are log-uniform in [init_min_mask, M]
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
    refit_budget: int = 16  # random architectures per expert in the final per-region refit
    final_candidates: int = 3  # visited partitions re-measured at the end (1 = final iterate)
    # random architectures (besides the incumbents) every finalist region is trained with;
    # the winner then gets the rest of `refit_budget`
    finalist_budget: int = 4
    freeze_routing: bool = False  # ablation: no M-step on R (routing stays at its random init)
    # ablation: the scalar surrogate (region average, eq. scalar_u) with the load-balancing
    # penalty lb_weight * LB(R) in the routing M-step ("clusters" or "samples" fractions)
    scalar_surrogate: bool = False
    lb_weight: float = 0.0
    lb_kind: str = "clusters"
    final_steps: int = 600  # training steps of the final experts on train + val
    train: TrainConfig = field(default_factory=TrainConfig)
    surrogate: SurrogateConfig = field(default_factory=SurrogateConfig)

    def __post_init__(self) -> None:
        if self.n_experts < 1:
            raise ValueError(f"n_experts must be >= 1, got {self.n_experts}")
        for name in (
            "n_iterations",
            "n_init",
            "pool_size",
            "mc_masks",
            "lcb_shortlist",
            "explore_every",
            "final_candidates",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lb_kind not in ("clusters", "samples"):
            raise ValueError(f"lb_kind must be 'clusters' or 'samples', got {self.lb_kind!r}")
        for name in (
            "acquisitions_per_expert",
            "routing_steps",
            "refit_budget",
            "finalist_budget",
            "lb_weight",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> SearchConfig:
        data = dict(data)
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown search config key(s): {sorted(unknown)}")
        if "train" in data and isinstance(data["train"], dict):
            data["train"] = TrainConfig(**data["train"])
        if "surrogate" in data and isinstance(data["surrogate"], dict):
            data["surrogate"] = SurrogateConfig(**data["surrogate"])
        return cls(**data)
