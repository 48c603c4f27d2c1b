"""Mixing image sources into one labelled pool.

`harmonise_images` brings images to one size and channel count, and `build_image_mixture`
joins several sources into one pool (labels shifted so the classes of different sources
never collide, a source id per image, sizes and channels harmonised) as an `ImageMixture`.
Everything here is also importable from `sgem.data.images`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .image_readers import _labels

__all__ = ["ImageMixture", "build_image_mixture", "harmonise_images"]


def harmonise_images(
    x: np.ndarray,
    size: tuple[int, int] = (32, 32),
    channels: int = 3,
    method: str = "pad",
) -> np.ndarray:
    """Bring uint8 images (N, H, W[, C]) to (N, size[0], size[1], channels).

    Size: with ``method="pad"`` (default) images no larger than `size` are centred and
    zero-padded (black border; the extra pixel of an odd margin goes bottom / right), so
    MNIST 28 x 28 gains a 2-pixel border, which matches its black background exactly; larger
    images, or any with ``method="resize"``, are resized bilinearly (antialiased when
    shrinking). Channels: grey is repeated into R = G = B; colour to grey uses the ITU-R 601
    luma weights.
    """
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.dtype != np.uint8:
        raise ValueError(f"expected uint8 images (N, H, W[, C]), got {x.dtype} {x.shape}")
    if method not in ("pad", "resize"):
        raise ValueError(f"method must be 'pad' or 'resize', got {method!r}")
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels}")
    c = x.shape[-1]
    if c == 4:  # RGBA: drop alpha
        x, c = x[..., :3], 3
    if c != channels:
        if c == 1:
            x = np.repeat(x, channels, axis=-1)
        elif c == 3:
            luma = x.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
            x = np.clip(np.rint(luma), 0, 255).astype(np.uint8)[..., None]
        else:
            raise ValueError(f"cannot convert images with {c} channels (expected 1, 3 or 4)")
    h, w = x.shape[1:3]
    th, tw = int(size[0]), int(size[1])
    if (h, w) == (th, tw):
        return np.ascontiguousarray(x)
    if method == "pad" and h <= th and w <= tw:
        top, left = (th - h) // 2, (tw - w) // 2
        pad = ((0, 0), (top, th - h - top), (left, tw - w - left), (0, 0))
        return np.pad(x, pad)
    import torch
    import torch.nn.functional as F

    out = np.empty((len(x), th, tw, x.shape[-1]), dtype=np.uint8)
    shrink = th < h or tw < w
    with torch.no_grad():
        for start in range(0, len(x), 2048):
            t = torch.from_numpy(np.ascontiguousarray(x[start : start + 2048]))
            t = t.permute(0, 3, 1, 2).float()
            r = F.interpolate(
                t, size=(th, tw), mode="bilinear", align_corners=False, antialias=shrink
            )
            out[start : start + len(t)] = (
                r.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
            )
    return out


@dataclass(frozen=True, eq=False)
class ImageMixture:
    """Images of several sources in one pool.

    Attributes:
        x: uint8 (N, H, W, C) images, sources in order (source 0 first).
        y: int64 labels, source i's labels shifted by `class_offsets[i]`.
        source: int64 source id per image (0, 1, ...).
        n_classes: total number of classes (sum over sources).
        class_offsets: the shift applied to each source's labels.
        names: a name per source.
        index: per source, the indices of the images drawn from it (in `x`'s order).
    """

    x: np.ndarray
    y: np.ndarray
    source: np.ndarray
    n_classes: int
    class_offsets: tuple[int, ...]
    names: tuple[str, ...]
    index: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return len(self.x)


def _mixture_counts(
    sizes: list[int], proportions, counts, total, names: Sequence[str]
) -> list[int]:
    k = len(sizes)
    if counts is not None and proportions is not None:
        raise ValueError("give counts or proportions (with an optional total), not both")
    if counts is not None:
        if np.ndim(counts) == 0:
            counts = [int(counts)] * k
        if len(counts) != k:
            raise ValueError(f"counts has {len(counts)} entries for {k} sources")
        out = [int(c) for c in counts]
    elif proportions is not None:
        p = np.asarray(proportions, dtype=np.float64)
        if p.shape != (k,) or (p < 0).any() or p.sum() <= 0:
            raise ValueError(f"proportions must be {k} non-negative numbers, got {proportions}")
        p = p / p.sum()
        if total is None:  # the largest pool every source can supply without repeats
            total = int(min(n / q for n, q in zip(sizes, p, strict=True) if q > 0))
        raw = p * int(total)
        out = np.floor(raw).astype(int)
        for i in np.argsort(-(raw - out), kind="stable")[: int(total) - out.sum()]:
            out[i] += 1
        out = out.tolist()
    else:
        if total is not None:
            raise ValueError("total needs proportions")
        out = list(sizes)
    for c, n, name in zip(out, sizes, names, strict=True):
        if c < 0 or c > n:
            raise ValueError(
                f"source {name!r} has {n} images, cannot draw {c} (without replacement); "
                "lower its count or proportion"
            )
    return out


def build_image_mixture(
    sources: Sequence[tuple],
    proportions: Sequence[float] | None = None,
    counts: Sequence[int] | int | None = None,
    total: int | None = None,
    seed: int = 0,
    size: tuple[int, int] | None = None,
    channels: int | None = None,
    names: Sequence[str] | None = None,
) -> ImageMixture:
    """Mix image sources into one labelled pool.

    Args:
        sources: a list of ``(images, labels)`` or ``(images, labels, n_classes)``; images
            uint8 (N, H, W[, C]), labels 0..K-1. K defaults to ``labels.max() + 1`` over the
            whole source (before subsampling).
        proportions: fraction of the pool per source (normalised), with an optional `total`
            (default: the largest pool that needs no image twice). Or
        counts: images per source (an int means the same for every source). Neither: all.
        seed: draws the subsets (without replacement).
        size, channels: target (H, W) and C; default the largest H and W among the sources
            and 3 channels if any source is in colour. See `harmonise_images` (smaller images
            are zero-padded, e.g. MNIST 28x28x1 -> 32x32x3 with a 2-pixel border and the grey
            channel repeated).
        names: a name per source (default "source0", ...).

    Labels of later sources are shifted by the number of classes before them, e.g.
    CIFAR-100 + SVHN -> 110 classes (SVHN digit d -> 100 + d), CIFAR-10 + MNIST -> 20.
    """
    if len(sources) < 1:
        raise ValueError("give at least one source")
    names = tuple(names) if names is not None else tuple(f"source{i}" for i in range(len(sources)))
    if len(names) != len(sources):
        raise ValueError(f"{len(names)} names for {len(sources)} sources")
    imgs, labs, n_cls = [], [], []
    for i, src in enumerate(sources):
        if len(src) not in (2, 3):
            raise ValueError(f"source {names[i]!r}: expected (images, labels[, n_classes])")
        x = np.asarray(src[0])
        if x.ndim == 3:
            x = x[..., None]
        if x.ndim != 4 or x.dtype != np.uint8:
            raise ValueError(
                f"source {names[i]!r}: images must be uint8 (N, H, W[, C]), got {x.dtype} {x.shape}"
            )
        y = _labels(src[1], f"source {names[i]!r}", len(x))
        k = int(src[2]) if len(src) == 3 else (int(y.max()) + 1 if len(y) else 0)
        if len(y) and y.max() >= k:
            raise ValueError(
                f"source {names[i]!r}: labels reach {int(y.max())} but n_classes is {k}"
            )
        imgs.append(x)
        labs.append(y)
        n_cls.append(k)
    sizes = [len(x) for x in imgs]
    take = _mixture_counts(sizes, proportions, counts, total, names)
    if size is None:
        size = (max(x.shape[1] for x in imgs), max(x.shape[2] for x in imgs))
    if channels is None:
        channels = 3 if any(x.shape[-1] >= 3 for x in imgs) else 1
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(n_cls)[:-1]]))
    rng = np.random.default_rng(seed)
    xs, ys, ss, index = [], [], [], []
    for i, (x, y, c) in enumerate(zip(imgs, labs, take, strict=True)):
        idx = rng.choice(len(x), size=c, replace=False)
        index.append(idx)
        xs.append(harmonise_images(x[idx], size=size, channels=channels))
        ys.append(y[idx] + offsets[i])
        ss.append(np.full(c, i, dtype=np.int64))
    return ImageMixture(
        x=np.concatenate(xs),
        y=np.concatenate(ys).astype(np.int64),
        source=np.concatenate(ss),
        n_classes=int(sum(n_cls)),
        class_offsets=offsets,
        names=names,
        index=tuple(index),
    )
