"""Training candidates on cluster masks and reading off per-cluster validation losses."""

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
