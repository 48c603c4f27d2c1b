"""M-step on the architectures: score a fresh pool that always contains the incumbent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..space.arch import Arch, CellSpace
from ..surrogate.model import LossModel


@dataclass
class ExpertPool:
    """One expert's scored pool. `scores[i]` is the responsibility-weighted predicted loss
    of `archs[i]` (eq. mstep_alpha, normalised by the total weight); archs[0] is the incumbent."""

    archs: list[Arch]
    scores: np.ndarray
    masks: np.ndarray  # (S, M) the masks the scores were averaged over

    @property
    def best(self) -> Arch:
        return self.archs[int(np.argmin(self.scores))]


def draw_pool(space: CellSpace, incumbent: Arch, size: int, rng: np.random.Generator) -> list[Arch]:
    pool, seen = [incumbent], {incumbent}
    for _ in range(size * 3):
        if len(pool) > size:
            break
        a = space.sample(rng)
        if a not in seen:
            seen.add(a)
            pool.append(a)
    return pool


def score_pool(
    surrogate: LossModel, pool: Sequence[Arch], masks: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """Weighted predicted loss of each arch, averaged over the masks (shape (len(pool),))."""
    n_masks, m = masks.shape
    rep = [a for a in pool for _ in range(n_masks)]
    pred = surrogate.predict(rep, np.tile(masks, (len(pool), 1)))
    pred = pred.reshape(len(pool), n_masks, m).mean(axis=1)
    return pred @ weights / max(weights.sum(), 1e-12)


def architecture_m_step(
    surrogate: LossModel,
    space: CellSpace,
    incumbents: Sequence[Arch],
    q: np.ndarray,
    routing: np.ndarray,
    sizes: np.ndarray,
    uniforms: np.ndarray,
    pool_size: int,
    rng: np.random.Generator,
) -> list[ExpertPool]:
    """For each expert k, argmin over pool of sum_m |C_m| q_mk u_m(alpha, r_k).

    The incumbent is scored with the same masks as the challengers and wins ties, so the
    step never lowers the surrogate objective (a generalised M-step).
    """
    pools = []
    for k, incumbent in enumerate(incumbents):
        pool = draw_pool(space, incumbent, pool_size, rng)
        masks = (uniforms[k] < routing[:, k][None, :]).astype(np.float64)
        weights = sizes * q[:, k]
        pools.append(ExpertPool(pool, score_pool(surrogate, pool, masks, weights), masks))
    return pools
