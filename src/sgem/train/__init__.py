"""Training candidates on cluster masks and reading off per-cluster validation losses.

Its names resolve lazily (`sgem.lazy`): `sgem.train.time_fence` is read by processes that
never train a network (the AutoETS / AutoTheta refits), and torch cost each about 2 s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_attributes

#: public name -> the submodule defining it
_LAZY: dict[str, str] = {
    "bucket_by_cluster": ".losses",
    "per_sample_nll": ".losses",
    "region_loss": ".losses",
    "TrainConfig": ".trainer",
    "TrainOutcome": ".trainer",
    "Trainer": ".trainer",
    "resolve_device": ".trainer",
}

if TYPE_CHECKING:  # what static analysers and IDEs see
    from .losses import bucket_by_cluster, per_sample_nll, region_loss
    from .trainer import TrainConfig, Trainer, TrainOutcome, resolve_device

__all__ = [
    "TrainConfig",
    "TrainOutcome",
    "Trainer",
    "bucket_by_cluster",
    "per_sample_nll",
    "region_loss",
    "resolve_device",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
