"""The final Mixture-of-Experts built from a search result.

Its names resolve lazily (`sgem.lazy`): the processes that refit AutoETS / AutoTheta import
`sgem.moe.classical` alone, and importing torch there cost each of them about 3 s of a
forecast's or a budgeted fit's time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_attributes

#: public name -> the submodule defining it
_LAZY: dict[str, str] = {
    "ClusterGatedMoE": ".cluster_gated",
    "GatedMoEReport": ".learnable_gate",
    "LearnableGatedMoE": ".learnable_gate",
    "train_learnable_gate_moe": ".learnable_gate",
    "evaluate_forecasts": ".scoring",
}

if TYPE_CHECKING:  # what static analysers and IDEs see
    from .cluster_gated import ClusterGatedMoE
    from .learnable_gate import GatedMoEReport, LearnableGatedMoE, train_learnable_gate_moe
    from .scoring import evaluate_forecasts

__all__ = [
    "ClusterGatedMoE",
    "GatedMoEReport",
    "LearnableGatedMoE",
    "evaluate_forecasts",
    "train_learnable_gate_moe",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
