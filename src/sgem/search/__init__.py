"""SGEM: objective, E-step, M-steps, S-step and the loop."""

from .config import SearchConfig
from .objective import (
    e_step,
    hard_routing,
    measured_hard_objective,
    multilinear_extension,
    objective,
    q_function,
)
from .routing import expected_losses, routing_m_step, straight_through_bernoulli
from .sgem import SGEM, SearchResult

__all__ = [
    "SGEM",
    "SearchConfig",
    "SearchResult",
    "e_step",
    "expected_losses",
    "hard_routing",
    "measured_hard_objective",
    "multilinear_extension",
    "objective",
    "q_function",
    "routing_m_step",
    "straight_through_bernoulli",
]
