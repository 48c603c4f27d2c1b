"""Image data: readers for the original dataset files, mixtures of sources, image tasks.

Readers return ``(images, labels)``: images uint8 of shape (N, H, W, C), labels int64.

* `read_cifar_pickle`: the CIFAR-10 / CIFAR-100 "python version" pickles.
* `read_svhn_mat`: SVHN cropped digits, ``train_32x32.mat`` / ``test_32x32.mat``.
* `read_mnist`: MNIST IDX files (``*-images-idx3-ubyte`` + ``*-labels-idx1-ubyte``, gzipped
  or raw); `read_idx` reads any IDX file.
* `read_npz`: your own ``.npz`` with ``x`` uint8 (N, H, W[, C]) and integer ``y``.

`load_source(name, directory, split)` finds the files of a named dataset in a directory
where you have put the original downloads. Loading never downloads: a missing file raises
`FileNotFoundError` naming the exact path it expected, where the dataset is published and
the opt-in `sgem download NAME DIR` (`sgem.data.download`) that fetches it where a network
exists.

`build_image_mixture` joins several sources into one labelled pool (labels shifted so the
classes of different sources never collide, a source id per image, sizes and channels
harmonised), and `make_image_task` turns such a pool into a `ClusteredTask`, clustering in
an embedding space (see `sgem.data.embeddings`) while the task holds the pixels.
`make_offline_mixture_task` builds the CIFAR-10 + MNIST mixture from the offline files.
`build_image_task` builds the task of a run config's `task` section (the offline mixture or
CIFAR-100 + SVHN) and `downsample` average-pools a task's images after clustering.

This module builds the tasks; the other parts live in their own modules and are
re-exported here, so ``from sgem.data.images import ...`` reaches all of them:
`sgem.data.image_readers` (the file readers), `sgem.data.image_sources` (the catalogue:
publishers, file names, `load_source`, `OFFLINE_IMAGE_DIR`) and `sgem.data.image_mixture`
(`harmonise_images`, `ImageMixture`, `build_image_mixture`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .clustering import cluster_splits
from .embeddings import fit_embed, get_embedding
from .image_mixture import ImageMixture, build_image_mixture, harmonise_images
from .image_readers import (
    MNIST_IMAGES_MAGIC,
    MNIST_LABELS_MAGIC,
    _labels,
    read_cifar_pickle,
    read_idx,
    read_mnist,
    read_mnist_images,
    read_mnist_labels,
    read_npz,
    read_svhn_mat,
)
from .image_sources import OFFLINE_IMAGE_DIR, PUBLISHERS, load_source
from .task import ClusteredTask, Split

__all__ = [
    "MNIST_IMAGES_MAGIC",
    "MNIST_LABELS_MAGIC",
    "OFFLINE_IMAGE_DIR",
    "PUBLISHERS",
    "ImageMixture",
    "build_image_mixture",
    "build_image_task",
    "downsample",
    "harmonise_images",
    "load_source",
    "make_image_task",
    "make_offline_mixture_task",
    "read_cifar_pickle",
    "read_idx",
    "read_mnist",
    "read_mnist_images",
    "read_mnist_labels",
    "read_npz",
    "read_svhn_mat",
]

# ---------------------------------------------------------------------------------------
# tasks


def make_image_task(
    x: np.ndarray,
    y: np.ndarray,
    source: np.ndarray | None = None,
    embeddings="default",
    n_clusters: int = 30,
    split: tuple[float, float, float] = (0.70, 0.15, 0.15),
    seed: int = 0,
    n_classes: int | None = None,
    normalise: str = "unit",
    name: str = "images",
    source_names: Sequence[str] | None = None,
) -> ClusteredTask:
    """An image `ClusteredTask`: clustered on embeddings, holding the pixels.

    Args:
        x: uint8 images (N, H, W[, C]) (e.g. `ImageMixture.x`). y: int labels 0..C-1.
        source: optional source id per image (purity and oracle partition only).
        embeddings: the space k-means runs in: ``"default"`` (the built-in
            `HandcraftedEmbedding`), ``"timm:<model>"`` / ``"torchvision:<model>"`` (local
            weights only), your own (N, d) array (one row per image, same order), or an
            object with ``fit(images)`` / ``transform(images)``. It is fitted on the training
            images only.
        n_clusters: M. k-means (`fit_kmeans`) runs on the training embeddings only;
            validation and test images go to the nearest centroid. A cluster that gets no
            training or validation image is merged into its neighbours (`cluster_splits`,
            the policy of every builder), so the task may have fewer clusters;
            ``meta["merged_clusters"]`` says how many went.
        split: train / validation / test fractions of a seeded random permutation.
        normalise: ``"unit"`` (default): pixels / 255, in [0, 1]; ``"standardise"``: per
            channel, minus the training mean, over the training std (both in `meta`).

    The task's ``x`` is float32 NCHW (N, C, H, W); ``centroids`` live in the embedding space.
    ``meta`` holds ``mean_purity`` / ``purity_per_cluster`` (training split, w.r.t.
    `source`), ``val_mean_purity``, ``test_mean_purity`` and a description of the embedding.
    """
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.dtype != np.uint8:
        raise ValueError(
            f"x must be uint8 images (N, H, W[, C]), got {x.dtype} {x.shape}; build it with "
            "build_image_mixture or harmonise_images"
        )
    n = len(x)
    y = _labels(y, "y", n)
    if source is not None:
        source = _labels(source, "source", n)
    fr = np.asarray(split, dtype=np.float64)
    if fr.shape != (3,) or (fr <= 0).any() or abs(fr.sum() - 1.0) > 1e-6:
        raise ValueError(
            f"split must be three positive fractions (train, val, test) summing to 1, got {split}"
        )
    if normalise not in ("unit", "standardise"):
        raise ValueError(f"normalise must be 'unit' or 'standardise', got {normalise!r}")
    if n_classes is None:
        n_classes = int(y.max()) + 1 if n else 0
    # resolve the embedding first: an unavailable backbone fails before any work
    embedding = get_embedding(embeddings, seed=seed)

    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    n_val, n_test = round(fr[1] * n), round(fr[2] * n)
    train_idx, val_idx, test_idx = np.split(perm, [n - n_val - n_test, n - n_test])
    if len(train_idx) < n_clusters:
        raise ValueError(
            f"cannot form {n_clusters} clusters from {len(train_idx)} training images; use "
            "more images or fewer clusters"
        )

    z = fit_embed(embedding, x, train_idx)
    index = {"train": train_idx, "val": val_idx, "test": test_idx}
    clustered = cluster_splits(
        {part: z[idx] for part, idx in index.items()},
        n_clusters,
        seed,
        source=None if source is None else {part: source[idx] for part, idx in index.items()},
        what="images",
        fix="use more images, fewer clusters or a larger validation fraction",
    )
    clusters, centroids, merged = clustered.ids, clustered.centroids, clustered.merged
    n_requested, n_clusters = n_clusters, clustered.n_clusters

    meta: dict = {
        "layout": "NCHW",
        "normalise": normalise,
        "embedding": getattr(embedding, "name", type(embedding).__name__),
        "embedding_dim": int(z.shape[1]),
        # what a saved model needs to route new images: the fitted embedding, the pixel size
        "embedding_model": embedding,
        "image_shape_hwc": [int(v) for v in x.shape[1:]],
        "centroid_space": "embedding",
        "n_clusters_requested": int(n_requested),
        "merged_clusters": merged,
    }
    pixels = x.transpose(0, 3, 1, 2)
    if normalise == "standardise":
        train_pixels = pixels[train_idx].astype(np.float64) / 255.0
        mean = train_pixels.mean(axis=(0, 2, 3))
        std = np.maximum(train_pixels.std(axis=(0, 2, 3)), 1e-6)
        meta["pixel_mean"], meta["pixel_std"] = mean.tolist(), std.tolist()

    def to_float(idx: np.ndarray) -> np.ndarray:
        xf = pixels[idx].astype(np.float32) / np.float32(255.0)
        if normalise == "standardise":
            xf = (xf - mean[None, :, None, None]) / std[None, :, None, None]
        return np.ascontiguousarray(xf, dtype=np.float32)

    splits = {}
    for part, idx in (("train", train_idx), ("val", val_idx), ("test", test_idx)):
        src = None if source is None else source[idx]
        splits[part] = Split(to_float(idx), y[idx], clusters[part], src)

    oracle = None
    if source is not None and clustered.purity is not None:
        purity = clustered.purity
        meta["purity_per_cluster"] = purity.round(4).tolist()
        meta["mean_purity"] = float(purity.mean())
        for part in ("val", "test"):
            meta[f"{part}_mean_purity"] = clustered.mean_purity(part)
        oracle = clustered.oracle_partition
        if source_names is not None:
            meta["source_names"] = list(source_names)
        meta["n_per_source"] = np.bincount(source).tolist()
    return ClusteredTask(
        name=name,
        train=splits["train"],
        val=splits["val"],
        test=splits["test"],
        n_clusters=int(n_clusters),
        loss="cross_entropy",
        n_classes=int(n_classes),
        oracle_partition=oracle,
        centroids=centroids,
        meta=meta,
    )


def make_offline_mixture_task(
    data_dir: str | os.PathLike | None = None,
    n_per_source: int = 3000,
    n_clusters: int = 30,
    seed: int = 0,
    embeddings="default",
    split: tuple[float, float, float] = (0.70, 0.15, 0.15),
    normalise: str = "unit",
) -> ClusteredTask:
    """The offline counterpart of the CIFAR-100 + SVHN mixture: CIFAR-10 + MNIST.

    Reads ``cifar10_subset_train.npz`` (the CIFAR pool, 15000 images) and the official MNIST
    10k test set ``t10k-{images-idx3,labels-idx1}-ubyte.gz`` (the only MNIST part available
    offline, used as the MNIST pool) from `data_dir` (default `OFFLINE_IMAGE_DIR`), draws
    `n_per_source` images from each, pads MNIST to 32 x 32 x 3 and builds the task with
    `make_image_task`: 20 classes (MNIST digit d -> 10 + d), source 0 = CIFAR-10, 1 = MNIST.
    """
    data_dir = Path(data_dir) if data_dir is not None else OFFLINE_IMAGE_DIR
    cifar = load_source("npz:cifar10_subset_train.npz", data_dir)
    mnist = load_source("mnist", data_dir, split="test")
    return _two_source_task(
        [(*cifar, 10), (*mnist, 10)],
        ("cifar10", "mnist"),
        n_per_source,
        seed,
        embeddings=embeddings,
        n_clusters=n_clusters,
        split=split,
        normalise=normalise,
    )


def _two_source_task(
    sources: Sequence[tuple[np.ndarray, np.ndarray, int]],
    names: tuple[str, str],
    n_per_source: int,
    seed: int,
    **task_kwargs: Any,
) -> ClusteredTask:
    """`n_per_source` images of each source, harmonised to 32 x 32 x 3, as one image task
    named "<first>+<second>" (later sources' labels shifted, see `build_image_mixture`)."""
    mix = build_image_mixture(
        sources,
        counts=[n_per_source] * len(sources),
        seed=seed,
        size=(32, 32),
        channels=3,
        names=names,
    )
    return make_image_task(
        mix.x,
        mix.y,
        mix.source,
        seed=seed,
        n_classes=mix.n_classes,
        name="+".join(names),
        source_names=mix.names,
        **task_kwargs,
    )


def build_image_task(cfg: Mapping[str, Any], seed: int) -> ClusteredTask:
    """The full-resolution image task of a run config's `task` section.

    Keys: ``source`` (``"offline"``: CIFAR-10 + MNIST from ``directory`` or
    `OFFLINE_IMAGE_DIR`, see `make_offline_mixture_task`; ``"cifar100+svhn"``: the paper's
    mixture, read from ``directory`` holding ``cifar-100-python/`` and ``train_32x32.mat``),
    ``n_per_source``, ``n_clusters``, and optionally ``directory``, ``embeddings`` (default
    ``"default"``) and ``split`` (default 0.7 / 0.15 / 0.15). Other keys (``name``,
    ``image_size``) are ignored here; apply ``image_size`` with `downsample`.
    The mixture draw, the split and the clustering depend on `seed`.
    """
    source = cfg["source"]
    common: dict[str, Any] = {
        "n_clusters": int(cfg["n_clusters"]),
        "seed": seed,
        "embeddings": cfg.get("embeddings", "default"),
        "split": tuple(cfg.get("split", (0.7, 0.15, 0.15))),
    }
    if source == "offline":
        return make_offline_mixture_task(
            cfg.get("directory") or OFFLINE_IMAGE_DIR,
            n_per_source=int(cfg["n_per_source"]),
            **common,
        )
    if source == "cifar100+svhn":
        directory = cfg.get("directory")
        if not directory:
            raise ValueError(
                "the CIFAR-100 + SVHN task reads CIFAR-100 (cifar-100-python/) and SVHN "
                "(train_32x32.mat) from task.directory (benchmarks/images_main.py: --data-dir)"
            )
        cifar = load_source("cifar100", directory)
        svhn = load_source("svhn", directory)
        return _two_source_task(
            [(*cifar, 100), (*svhn, 10)], ("cifar100", "svhn"), int(cfg["n_per_source"]), **common
        )
    raise ValueError(f"unknown image source {source!r}; expected 'offline' or 'cifar100+svhn'")


def downsample(task: ClusteredTask, size: int | None) -> ClusteredTask:
    """The same task (clusters, splits, labels) with its NCHW images average-pooled to
    `size` x `size`; `task` itself when `size` is None or already the image side.

    Clustering ran on the full-resolution embeddings; only what the networks see shrinks
    (what makes the offline scale affordable on a CPU). `size` must divide the image side.
    """
    h = task.input_shape[-1]
    if size is None or size == h:
        return task
    if size < 1 or h % size:
        raise ValueError(f"image_size {size} must divide the image side {h}")
    import torch
    import torch.nn.functional as F

    def pool(split: Split) -> Split:
        x = F.avg_pool2d(torch.from_numpy(split.x), h // size).numpy()
        return Split(np.ascontiguousarray(x), split.y, split.cluster, split.source)

    return replace(
        task,
        train=pool(task.train),
        val=pool(task.val),
        test=pool(task.test),
        meta={**task.meta, "image_size": int(size)},
    )
