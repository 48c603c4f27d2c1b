"""The final Mixture-of-Experts built from a search result."""

from ..final.expert_fit import steps_for_epochs
from .cluster_gated import ClusterGatedMoE, MoEReport, train_final_moe
from .learnable_gate import (
    GatedMoEReport,
    LearnableGatedMoE,
    train_learnable_gate_moe,
)
from .scoring import evaluate_forecasts

__all__ = [
    "ClusterGatedMoE",
    "GatedMoEReport",
    "LearnableGatedMoE",
    "MoEReport",
    "evaluate_forecasts",
    "steps_for_epochs",
    "train_final_moe",
    "train_learnable_gate_moe",
]
