"""Data: toy generator, clustering, and the `ClusteredTask` the search consumes."""

from .build import build_task
from .clustering import assign_to_centroids, cluster_purity, fit_kmeans, majority_source_partition
from .task import ClusteredTask, Split
from .toy import make_toy_task, sample_toy

__all__ = [
    "ClusteredTask",
    "Split",
    "assign_to_centroids",
    "build_task",
    "cluster_purity",
    "fit_kmeans",
    "majority_source_partition",
    "make_toy_task",
    "sample_toy",
]
