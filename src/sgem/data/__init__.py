"""Data: toy generator, image readers and mixtures, Monash .tsf time series, clustering,
and the `ClusteredTask` the search consumes."""

from .build import build_task
from .clustering import assign_to_centroids, cluster_purity, fit_kmeans, majority_source_partition
from .embeddings import ArrayEmbedding, HandcraftedEmbedding, PretrainedEmbedding, get_embedding
from .images import (
    build_image_mixture,
    build_image_task,
    downsample,
    harmonise_images,
    load_source,
    make_image_task,
    make_offline_mixture_task,
)
from .paths import shared_data_dir
from .task import ClusteredTask, Split
from .timeseries import load_domains, make_timeseries_task, make_windows, window_descriptors
from .toy import make_toy_task, sample_toy
from .tsf import TSFData, TSFFormatError, read_tsf, write_tsf

__all__ = [
    "ArrayEmbedding",
    "ClusteredTask",
    "HandcraftedEmbedding",
    "PretrainedEmbedding",
    "Split",
    "TSFData",
    "TSFFormatError",
    "assign_to_centroids",
    "build_image_mixture",
    "build_image_task",
    "build_task",
    "cluster_purity",
    "downsample",
    "fit_kmeans",
    "get_embedding",
    "harmonise_images",
    "load_domains",
    "load_source",
    "majority_source_partition",
    "make_image_task",
    "make_offline_mixture_task",
    "make_timeseries_task",
    "make_toy_task",
    "make_windows",
    "read_tsf",
    "sample_toy",
    "shared_data_dir",
    "window_descriptors",
    "write_tsf",
]
