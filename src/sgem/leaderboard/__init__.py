"""The leaderboard at the end of every fit: the searched MoE beside one network of its cell
and the models a user would otherwise pick, scored where no choice was made, and the model
that is saved (`compete`)."""

from .board import greedy_ensemble, mixture_nll
from .contest import Contest, compete, selective_routing
from .frame import leaderboard_frame, leaderboard_lines
from .members import after_rounds_seconds

__all__ = [
    "Contest",
    "after_rounds_seconds",
    "compete",
    "greedy_ensemble",
    "leaderboard_frame",
    "leaderboard_lines",
    "mixture_nll",
    "selective_routing",
]
