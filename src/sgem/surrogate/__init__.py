"""The GNN surrogate of per-cluster validation losses."""

from .gnn import SurrogateNet, normalised_adjacency
from .model import LossModel, Surrogate, SurrogateConfig, kendall_tau, lcb
from .scalar import ScalarReduced

__all__ = [
    "LossModel",
    "ScalarReduced",
    "Surrogate",
    "SurrogateConfig",
    "SurrogateNet",
    "kendall_tau",
    "lcb",
    "normalised_adjacency",
]
