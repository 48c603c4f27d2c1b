"""The final Mixture-of-Experts built from a search result."""

from .cluster_gated import ClusterGatedMoE
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
    "evaluate_forecasts",
    "train_learnable_gate_moe",
]
