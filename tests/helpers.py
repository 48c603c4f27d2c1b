"""Test helpers shared by several test modules (imported as a plain module)."""

from __future__ import annotations

import numpy as np

from sgem.space import Arch
from sgem.surrogate import SurrogateConfig

# a small, quick surrogate for tests
SMALL_SURROGATE = SurrogateConfig(
    hidden=16, gcn_layers=2, dropout=0.1, epochs_first=150, epochs_refit=50, mc_samples=8
)


def synthetic_losses(archs: list[Arch], masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A learnable (arch, mask) -> per-cluster loss rule: training on a cluster lowers its
    loss, and 'rbf' helps the first half of the clusters."""
    masks = np.asarray(masks, dtype=np.float64)
    n, m = masks.shape
    uses_rbf = np.array([a.uses("rbf") for a in archs], dtype=np.float64)[:, None]
    first_half = (np.arange(m) < m // 2).astype(np.float64)[None, :]
    noise = 0.02 * rng.normal(size=(n, m))
    return 1.5 - 0.8 * masks - 0.6 * uses_rbf * first_half + noise


def random_masks(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    masks = rng.random((n, m)) < 0.5
    masks[~masks.any(axis=1), 0] = True  # a training mask is never empty
    return masks.astype(np.float64)
