"""Scaling mixtures: K groups of 2-D clouds that want different operations.

A generalisation of the toy task (`sgem.data.toy`) to more groups and experts. Group g is a
cloud centred on a circle (adjacent centres 12 apart, clear of each other) with its
own pair of classes (2g, 2g + 1) and a labelling rule that cycles through three kinds:

* ``linear``: which side of a line through the centre (random direction): a linear map;
* ``ring``: inner (radius 1) or outer (radius 2) ring around the centre: a radial basis
  function around the region's centre;
* ``parabola``: above or below a parabola in the group's rotated frame: a squared feature.

``xor`` (same or opposite signs of the two rotated coordinates: a product of features, no
single half-plane or radius separates it) is not in the default cycle; `sample_mixture`
takes it through `kinds`.

With K = 2 the groups are the toy's linear cloud and ring. The oracle partition is the
group of each cluster's majority source (every group its own expert). By default the task
has M = 10 K k-means clusters and 1000 points per group (~100 per cluster, as the toy at
M = 20).
"""

from __future__ import annotations

import numpy as np

from ..random_streams import Stream, mixture_rng, mixture_test_rng, stream_rng
from .build import build_task
from .task import ClusteredTask

KINDS = ("linear", "ring", "parabola")
#: every labelling rule `_sample_group` draws (the default cycle is `KINDS`)
ALL_KINDS = (*KINDS, "xor")


def group_layout(n_groups: int, spacing: float = 12.0) -> np.ndarray:
    """Centres of `n_groups` clouds on a circle with `spacing` between neighbours."""
    if n_groups < 1:
        raise ValueError(f"n_groups must be >= 1, got {n_groups}")
    if n_groups == 1:
        return np.zeros((1, 2))
    radius = spacing / (2.0 * np.sin(np.pi / n_groups))
    angle = 2.0 * np.pi * np.arange(n_groups) / n_groups
    return np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)


def _sample_group(
    kind: str, n: int, centre: np.ndarray, theta: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(x, y in {0, 1}) for one group around `centre`, rotated by `theta`."""
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    if kind == "linear":
        local = rng.normal(0.0, 2.0, size=(n, 2))
        y = (local[:, 0] > local[:, 1]).astype(np.int64)
    elif kind == "ring":
        n_inner = n // 2
        radius = np.concatenate([np.full(n_inner, 1.0), np.full(n - n_inner, 2.0)])
        angle = rng.uniform(0.0, 2.0 * np.pi, size=n)
        local = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
        local += rng.normal(0.0, 0.3, size=local.shape)
        y = (radius == 2.0).astype(np.int64)
    elif kind == "parabola":
        local = rng.normal(0.0, 1.5, size=(n, 2))
        y = (local[:, 1] > 0.5 * local[:, 0] ** 2 - 1.0).astype(np.int64)
    elif kind == "xor":
        local = rng.normal(0.0, 1.5, size=(n, 2))
        y = (local[:, 0] * local[:, 1] > 0).astype(np.int64)
    else:
        raise ValueError(f"unknown kind {kind!r}; kinds are {list(ALL_KINDS)}")
    return local @ rot.T + centre, y


def sample_mixture(
    n_groups: int,
    n_per_group: int,
    rng: np.random.Generator,
    layout_seed: int,
    kinds: tuple[str, ...] = KINDS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw (x, y, source) for `n_groups` groups of `n_per_group` points each; group g
    follows rule `kinds[g % len(kinds)]`.

    The geometry (rotations) comes from `layout_seed`, so the training and test draws
    share it; the points come from `rng`."""
    centres = group_layout(n_groups)
    thetas = stream_rng(layout_seed, Stream.MIXTURE_LAYOUT).uniform(0.0, 2.0 * np.pi, n_groups)
    xs, ys, src = [], [], []
    for g in range(n_groups):
        kind = kinds[g % len(kinds)]
        theta = 0.0 if n_groups == 2 else thetas[g]
        x, y = _sample_group(kind, n_per_group, centres[g], theta, rng)
        xs.append(x)
        ys.append(2 * g + y)
        src.append(np.full(n_per_group, g))
    return (
        np.concatenate(xs),
        np.concatenate(ys).astype(np.int64),
        np.concatenate(src).astype(np.int64),
    )


def make_mixture_task(
    seed: int = 0,
    n_groups: int = 4,
    n_per_group: int = 1000,
    n_test_per_group: int = 500,
    n_clusters: int | None = None,
    val_fraction: float = 0.2,
) -> ClusteredTask:
    """A `ClusteredTask` of `n_groups` clouds (M = 10 * n_groups clusters by default)."""
    rng = mixture_rng(seed, n_groups)
    x, y, source = sample_mixture(n_groups, n_per_group, rng, seed)
    test_rng = mixture_test_rng(seed, n_groups)
    test = sample_mixture(n_groups, n_test_per_group, test_rng, seed)
    task = build_task(
        x,
        y,
        n_clusters=10 * n_groups if n_clusters is None else n_clusters,
        source=source,
        test=test,
        val_fraction=val_fraction,
        seed=seed,
        name=f"mixture{n_groups}",
    )
    task.meta["kinds"] = [KINDS[g % len(KINDS)] for g in range(n_groups)]
    return task


__all__ = ["ALL_KINDS", "KINDS", "group_layout", "make_mixture_task", "sample_mixture"]
