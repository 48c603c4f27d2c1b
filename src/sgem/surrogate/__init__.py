"""The GNN surrogate of per-cluster validation losses."""

from .gnn import SurrogateNet, normalised_adjacency
from .model import Surrogate, SurrogateConfig, kendall_tau, lcb

__all__ = [
    "Surrogate",
    "SurrogateConfig",
    "SurrogateNet",
    "kendall_tau",
    "lcb",
    "normalised_adjacency",
]
