"""Image embeddings for clustering: the space k-means runs in, not what the experts see.

`make_image_task` clusters images in an embedding space while `ClusteredTask.x` keeps the
pixels. Three kinds of embedding plug in, all with the same two-method interface
(`fit(train_images)` then `transform(images)`, images uint8 (N, H, W, C)):

* `ArrayEmbedding`: your own precomputed (N, d) array, one row per image.
* `PretrainedEmbedding`: a timm or torchvision backbone, *only* when the library is
  importable and its weights are already on disk. Nothing is ever downloaded; when either is
  missing it raises `EmbeddingUnavailableError` saying what is missing and how to fix it
  (`pretrained_available` asks the same question without raising). It lives in
  `sgem.data.embeddings_pretrained` and is re-exported here.
* `HandcraftedEmbedding` (the default, ``"default"``): needs no download and no training.
  Four blocks of features, each standardised and given equal total weight, then a PCA fitted
  on the training images only:

  1. colour / intensity statistics: per-channel mean and std, chroma (max - min over
     channels) statistics, a 16-bin grey-level histogram, fractions of near-black and
     near-white pixels, border-vs-centre brightness;
  2. HOG-like gradient-orientation histograms: 9 unsigned orientations in a 4 x 4 grid of
     cells plus one global histogram, magnitude-weighted and normalised;
  3. a fixed bank of random 5 x 5 convolution filters (drawn once from `seed`, zero-mean,
     unit-norm) applied with stride 2, rectified, average- and max-pooled globally and
     average-pooled per quadrant;
  4. a 8 x 8 grey thumbnail (coarse layout).

  Everything is deterministic for a given `seed` (and, like any float computation, for a
  given machine and thread count). About a second per few thousand 32 x 32 images on 2 CPU
  cores.

`get_embedding(spec)` turns ``"default"``, ``"timm:<model>"``, ``"torchvision:<model>"``, an
array, or any object with `fit`/`transform` into an embedding.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..random_streams import Stream, stream_rng
from .embeddings_pretrained import (
    _LIBRARIES,
    EmbeddingUnavailableError,
    PretrainedEmbedding,
    _check_images,
    pretrained_available,
)
from .embeddings_pretrained import IMAGENET_MEAN as IMAGENET_MEAN  # re-exported
from .embeddings_pretrained import IMAGENET_STD as IMAGENET_STD  # re-exported

__all__ = [
    "ArrayEmbedding",
    "EmbeddingUnavailableError",
    "HandcraftedEmbedding",
    "ImageEmbedding",
    "PretrainedEmbedding",
    "fit_embed",
    "get_embedding",
    "pretrained_available",
]


@runtime_checkable
class ImageEmbedding(Protocol):
    """What `make_image_task` needs: fit on the training images, then embed any images."""

    def fit(self, images: np.ndarray) -> ImageEmbedding: ...

    def transform(self, images: np.ndarray) -> np.ndarray: ...


# ---------------------------------------------------------------------------------------
# (a) the user's own array


class ArrayEmbedding:
    """Your own embedding: a precomputed (N, d) array aligned with the images.

    `transform` is only defined on the images the array was computed for, so
    `make_image_task` indexes the array by sample instead of calling `transform`.
    """

    def __init__(self, array) -> None:
        arr = np.asarray(array, dtype=np.float64)
        if arr.ndim != 2:
            raise ValueError(f"an embedding array must be (n_samples, dim), got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("the embedding array contains NaN or inf")
        self.array = arr
        self.name = f"array(dim={arr.shape[1]})"

    def rows(self, index: np.ndarray) -> np.ndarray:
        return self.array[index]

    def fit(self, images: np.ndarray) -> ArrayEmbedding:
        return self

    def transform(self, images: np.ndarray) -> np.ndarray:
        if len(images) != len(self.array):
            raise ValueError(
                f"ArrayEmbedding holds {len(self.array)} rows but was asked to embed "
                f"{len(images)} images; index it with .rows(index) instead"
            )
        return self.array


# ---------------------------------------------------------------------------------------
# (c) the built-in default


def _gray(xf: np.ndarray) -> np.ndarray:
    if xf.shape[-1] == 1:
        return xf[..., 0]
    return xf @ np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _colour_stats(xf: np.ndarray, gray: np.ndarray) -> np.ndarray:
    n = len(xf)
    flat = xf.reshape(n, -1, xf.shape[-1])
    chan_mean = flat.mean(1)
    chan_std = flat.std(1)
    if xf.shape[-1] == 1:  # grey input: as if its three channels were equal
        chan_mean = np.repeat(chan_mean, 3, axis=1)
        chan_std = np.repeat(chan_std, 3, axis=1)
    if xf.shape[-1] == 3:
        r, g_, b = xf[..., 0], xf[..., 1], xf[..., 2]
        hi, lo = np.maximum(np.maximum(r, g_), b), np.minimum(np.minimum(r, g_), b)
        chroma = (hi - lo).reshape(n, -1)
    else:
        chroma = np.zeros((n, xf.shape[1] * xf.shape[2]), dtype=xf.dtype)
    g = gray.reshape(n, -1)
    bins = np.minimum(g * 16, 15).astype(np.int64) + 16 * np.arange(n)[:, None]
    hist = np.bincount(bins.ravel(), minlength=16 * n).reshape(n, 16) / g.shape[1]
    h, w = gray.shape[1:]
    bh, bw = max(1, h // 8), max(1, w // 8)
    border = np.concatenate(
        [
            gray[:, :bh].reshape(n, -1),
            gray[:, -bh:].reshape(n, -1),
            gray[:, :, :bw].reshape(n, -1),
            gray[:, :, -bw:].reshape(n, -1),
        ],
        axis=1,
    )
    centre = gray[:, h // 4 : h - h // 4, w // 4 : w - w // 4].reshape(n, -1)
    feats = [
        chan_mean,
        chan_std,
        chroma.mean(1, keepdims=True),
        chroma.std(1, keepdims=True),
        (chroma > 0.05).mean(1, keepdims=True),
        hist,
        (g < 0.05).mean(1, keepdims=True),
        (g > 0.95).mean(1, keepdims=True),
        g.std(1, keepdims=True),
        border.mean(1, keepdims=True),
        border.std(1, keepdims=True),
        centre.mean(1, keepdims=True) - border.mean(1, keepdims=True),
    ]
    return np.concatenate(feats, axis=1)


def _hog(gray: np.ndarray, n_bins: int = 9, grid: int = 4) -> np.ndarray:
    n, h, w = gray.shape
    gx = np.zeros_like(gray)
    gy = np.zeros_like(gray)
    gx[:, :, 1:-1] = gray[:, :, 2:] - gray[:, :, :-2]
    gy[:, 1:-1, :] = gray[:, 2:, :] - gray[:, :-2, :]
    mag = np.sqrt(gx**2 + gy**2)
    ang = np.mod(np.arctan2(gy, gx), np.pi)
    b = np.minimum((ang / np.pi * n_bins).astype(np.int64), n_bins - 1)
    # cell index per pixel
    rows = np.minimum(np.arange(h) * grid // h, grid - 1)
    cols = np.minimum(np.arange(w) * grid // w, grid - 1)
    cell = (rows[:, None] * grid + cols[None, :])[None]  # (1, h, w)
    n_cells = grid * grid
    index = (np.arange(n)[:, None, None] * n_cells + cell) * n_bins + b
    hist = np.bincount(index.ravel(), weights=mag.ravel(), minlength=n * n_cells * n_bins)
    hist = hist.reshape(n, n_cells, n_bins)
    total = hist.sum(1)  # global orientation histogram
    cells = hist / (np.linalg.norm(hist, axis=2, keepdims=True) + 1e-3)
    total = total / (total.sum(1, keepdims=True) + 1e-6)
    strength = np.stack([mag.reshape(n, -1).mean(1), (mag.reshape(n, -1) > 0.2).mean(1)], 1)
    return np.concatenate([np.sqrt(cells.reshape(n, -1)), total, strength], axis=1)


def _random_conv(
    xf: np.ndarray, filters: np.ndarray, stride: int = 2, chunk: int = 1024
) -> np.ndarray:
    import torch
    import torch.nn.functional as F

    weight = torch.from_numpy(filters)
    n_f = filters.shape[0]
    out = np.empty((len(xf), n_f * 6), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, len(xf), chunk):
            t = torch.from_numpy(np.ascontiguousarray(xf[start : start + chunk]))
            t = t.permute(0, 3, 1, 2)
            if t.shape[1] == 1:
                t = t.expand(-1, 3, -1, -1)
            k = weight.shape[-1]
            if t.shape[2] < k or t.shape[3] < k:  # tiny images: zero-pad up to one filter
                t = F.pad(t, (0, max(0, k - t.shape[3]), 0, max(0, k - t.shape[2])))
            r = F.relu(F.conv2d(t, weight, stride=stride))
            quads = F.adaptive_avg_pool2d(r, 2).flatten(1)
            feats = torch.cat([r.mean((2, 3)), r.amax((2, 3)), quads], 1)
            out[start : start + len(t)] = feats.numpy()
    return out


def _thumbnail(gray: np.ndarray, size: int = 8) -> np.ndarray:
    n, h, w = gray.shape
    sh, sw = min(size, h), min(size, w)
    if h % sh == 0 and w % sw == 0:
        return gray.reshape(n, sh, h // sh, sw, w // sw).mean((2, 4)).reshape(n, -1)
    rows = np.minimum(np.arange(h) * sh // h, sh - 1)
    cols = np.minimum(np.arange(w) * sw // w, sw - 1)
    out = np.zeros((n, sh, sw), dtype=np.float64)
    np.add.at(out, (slice(None), rows[:, None], cols[None, :]), gray)
    counts = np.bincount(rows, minlength=sh)[:, None] * np.bincount(cols, minlength=sw)[None]
    return (out / counts).reshape(n, -1)


class HandcraftedEmbedding:
    """The built-in default: handcrafted + random-convolution features, then PCA.

    Args:
        n_components: PCA dimensions kept (capped by the number of training images).
        n_filters: size of the fixed random 5 x 5 filter bank.
        whiten: scale each principal component by 1 / sqrt(eigenvalue) ** whiten: 0 keeps
            the PCA variances (the default), 1 is full whitening.
        seed: draws the filter bank.
        batch: images featurised at a time (bounds memory).
    """

    BLOCKS = ("colour", "hog", "random_conv", "thumbnail")

    def __init__(
        self,
        n_components: int = 32,
        n_filters: int = 32,
        whiten: float = 0.0,
        seed: int = 0,
        batch: int = 2048,
    ) -> None:
        self.n_components = int(n_components)
        self.n_filters = int(n_filters)
        self.whiten = float(whiten)
        self.seed = int(seed)
        self.batch = int(batch)
        rng = stream_rng(self.seed, Stream.EMBEDDING_FILTERS)
        f = rng.normal(size=(self.n_filters, 3, 5, 5))
        f -= f.mean(axis=(1, 2, 3), keepdims=True)
        f /= np.linalg.norm(f.reshape(self.n_filters, -1), axis=1)[:, None, None, None]
        self.filters = f.astype(np.float32)
        self.name = f"handcrafted(pca={self.n_components}, filters={self.n_filters}, seed={seed})"
        self._fitted = False

    def features(self, images: np.ndarray) -> list[np.ndarray]:
        """The raw feature blocks (before standardisation and PCA), one array per block."""
        images = _check_images(images, "HandcraftedEmbedding")
        blocks: list[list[np.ndarray]] = [[] for _ in self.BLOCKS]
        for start in range(0, len(images), self.batch):
            xf = images[start : start + self.batch].astype(np.float32) / 255.0
            gray = _gray(xf)
            parts = (
                _colour_stats(xf, gray),
                _hog(gray),
                _random_conv(xf, self.filters),
                _thumbnail(gray),
            )
            for acc, part in zip(blocks, parts, strict=True):
                acc.append(part.astype(np.float64))
        return [np.concatenate(b) for b in blocks]

    def _scaled(self, blocks: list[np.ndarray]) -> np.ndarray:
        # standardise each feature, then give each block the same total variance
        out = []
        for b, mu, sd in zip(blocks, self.mean_, self.std_, strict=True):
            out.append((b - mu) / sd / np.sqrt(b.shape[1]))
        return np.concatenate(out, axis=1)

    def _fit_blocks(self, blocks: list[np.ndarray]) -> None:
        if len(blocks[0]) < 2:
            raise ValueError("HandcraftedEmbedding.fit needs at least 2 training images")
        self.mean_ = [b.mean(0) for b in blocks]
        self.std_ = [np.where(b.std(0) > 1e-8, b.std(0), 1.0) for b in blocks]
        z = self._scaled(blocks)
        self.center_ = z.mean(0)
        _, s, vt = np.linalg.svd(z - self.center_, full_matrices=False)
        k = min(self.n_components, vt.shape[0])
        self.components_ = vt[:k]
        var = s[:k] ** 2 / max(1, len(z) - 1)
        self.scale_ = np.where(var > 1e-12, var, 1.0) ** (-0.5 * self.whiten)
        self._fitted = True

    def _project(self, blocks: list[np.ndarray]) -> np.ndarray:
        return (self._scaled(blocks) - self.center_) @ self.components_.T * self.scale_

    def fit(self, images: np.ndarray) -> HandcraftedEmbedding:
        """Fit the standardisation and the PCA on (training) images."""
        self._fit_blocks(self.features(images))
        return self

    def transform(self, images: np.ndarray) -> np.ndarray:
        """Embed images: (N, n_components) float64."""
        if not self._fitted:
            raise RuntimeError("call fit(train_images) before transform")
        return self._project(self.features(images))

    def fit_transform(self, images: np.ndarray) -> np.ndarray:
        return self.fit_transform_subset(images, np.arange(len(images)))

    def fit_transform_subset(self, images: np.ndarray, fit_index: np.ndarray) -> np.ndarray:
        """Fit on `images[fit_index]` only and embed all `images`, featurising each once."""
        blocks = self.features(images)
        self._fit_blocks([b[fit_index] for b in blocks])
        return self._project(blocks)


def fit_embed(embedding, images: np.ndarray, fit_index: np.ndarray) -> np.ndarray:
    """Fit `embedding` on `images[fit_index]` (the training images) and embed all `images`.

    An `ArrayEmbedding` simply returns its rows (it must have one row per image).
    """
    fit_index = np.asarray(fit_index)
    if isinstance(embedding, ArrayEmbedding):
        z = embedding.array
        if len(z) != len(images):
            raise ValueError(
                f"the embedding array has {len(z)} rows but there are {len(images)} images; "
                "give one embedding row per image, in the same order"
            )
    elif hasattr(embedding, "fit_transform_subset"):
        z = embedding.fit_transform_subset(images, fit_index)
    else:
        embedding.fit(images[fit_index])
        z = embedding.transform(images)
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 2 or len(z) != len(images):
        raise ValueError(
            f"an embedding must return an (n_images, dim) array; got shape {z.shape} for "
            f"{len(images)} images"
        )
    if not np.isfinite(z).all():
        raise ValueError("the embedding contains NaN or inf")
    return z


# ---------------------------------------------------------------------------------------


def get_embedding(spec="default", seed: int = 0, **kwargs):
    """Resolve an embedding spec.

    ``"default"`` / ``"handcrafted"`` -> `HandcraftedEmbedding(seed=seed, **kwargs)`;
    ``"timm:<model>"`` / ``"torchvision:<model>"`` -> `PretrainedEmbedding` (raises
    `EmbeddingUnavailableError` if not installed or no local weights); an (N, d) array ->
    `ArrayEmbedding`; an object with `fit` and `transform` is returned as is.
    """
    if isinstance(spec, str):
        if spec in ("default", "handcrafted"):
            return HandcraftedEmbedding(seed=seed, **kwargs)
        library, sep, model_name = spec.partition(":")
        if sep and library in _LIBRARIES and model_name:
            return PretrainedEmbedding(library, model_name, **kwargs)
        raise ValueError(
            f"unknown embedding {spec!r}: use 'default', 'timm:<model>', "
            "'torchvision:<model>', an (n_samples, dim) array, or an object with fit/transform"
        )
    if isinstance(spec, ArrayEmbedding):
        return spec
    if isinstance(spec, np.ndarray | list | tuple):
        return ArrayEmbedding(spec)
    if isinstance(spec, ImageEmbedding):
        return spec
    raise TypeError(
        f"embeddings must be a string, an array or an object with fit/transform, got "
        f"{type(spec).__name__}"
    )
