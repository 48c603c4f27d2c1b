"""Data: toy generator, image readers and mixtures, Monash .tsf time series, clustering,
and the `ClusteredTask` the search consumes.

Names are resolved lazily (PEP 562), so `from sgem.data.task import ClusteredTask` (what a
worker process or the trainer needs) does not import scikit-learn, scipy and pandas
through the clustering and file readers (~1.2 s); the first use of a name imports its
module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_attributes

#: public name -> the submodule defining it
_LAZY: dict[str, str] = {
    "build_task": ".build",
    "assign_to_centroids": ".clustering",
    "cluster_purity": ".clustering",
    "fit_kmeans": ".clustering",
    "majority_source_partition": ".clustering",
    "ArrayEmbedding": ".embeddings",
    "HandcraftedEmbedding": ".embeddings",
    "PretrainedEmbedding": ".embeddings",
    "get_embedding": ".embeddings",
    "build_image_mixture": ".images",
    "build_image_task": ".images",
    "downsample": ".images",
    "harmonise_images": ".images",
    "load_source": ".images",
    "make_image_task": ".images",
    "make_offline_mixture_task": ".images",
    "shared_data_dir": ".paths",
    "ClusteredTask": ".task",
    "Split": ".task",
    "load_domains": ".timeseries",
    "make_timeseries_task": ".timeseries",
    "make_windows": ".timeseries",
    "window_descriptors": ".timeseries",
    "make_toy_task": ".toy",
    "sample_toy": ".toy",
    "TSFData": ".tsf",
    "TSFFormatError": ".tsf",
    "read_tsf": ".tsf",
    "write_tsf": ".tsf",
}

if TYPE_CHECKING:  # what static analysers and IDEs see
    from .build import build_task
    from .clustering import (
        assign_to_centroids,
        cluster_purity,
        fit_kmeans,
        majority_source_partition,
    )
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

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
