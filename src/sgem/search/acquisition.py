"""The S-step: which candidates to really train, chosen by a lower confidence bound.

Per expert, the incumbent is measured on its hard region (optional), then the pool members
with the lowest LCB of their routing-weighted predicted loss are trained, each on a mask
drawn from the expert's routing column. The surrogate's ranking quality on what was just
trained (Kendall's tau) is reported, since a surrogate that ranks badly misleads the E- and
M-steps.
"""

from __future__ import annotations

import numpy as np

from ..random_streams import acquisition_seed
from ..surrogate.model import LossModel, Surrogate, kendall_tau, lcb
from .architecture import ExpertPool
from .config import SearchConfig
from .ledger import Job, Ledger
from .masks import nonempty_bernoulli_mask


def acquire(
    u: LossModel,
    config: SearchConfig,
    seed: int,
    pools: list[ExpertPool],
    q: np.ndarray,
    routing: np.ndarray,
    assignment: np.ndarray,
    sizes: np.ndarray,
    rng: np.random.Generator,
    t: int,
) -> list[Job]:
    """Per expert: the incumbent on its hard region, then the lowest-LCB pool members,
    each on a mask drawn from its routing column. `u` is what the E- and M-steps see
    (the surrogate or its scalar reduction)."""
    out: list[Job] = []
    for k, pool in enumerate(pools):
        region = assignment == k
        if config.measure_incumbents and region.any():
            out.append((pool.best, region, "incumbent"))
        if config.acquisitions_per_expert == 0:
            continue
        order = np.argsort(pool.scores)[: config.lcb_shortlist]
        shortlist = [pool.archs[i] for i in order]
        weights = sizes * q[:, k]
        mc = u.predict_mc(
            [a for a in shortlist for _ in range(len(pool.masks))],
            np.tile(pool.masks, (len(shortlist), 1)),
            seed=acquisition_seed(seed, t, k),
        )  # (T, L*S, M)
        n_t = mc.shape[0]
        mc = mc.reshape(n_t, len(shortlist), len(pool.masks), -1).mean(axis=2)
        scalar = mc @ weights / max(weights.sum(), 1e-12)  # (T, L)
        bounds = lcb(scalar.mean(0), scalar.std(0))
        fallback = region if region.any() else np.ones_like(region)
        taken = 0
        for i in np.argsort(bounds):
            if taken == config.acquisitions_per_expert:
                break
            mask = nonempty_bernoulli_mask(routing[:, k], rng, fallback)
            if any(a == shortlist[i] and np.array_equal(b, mask) for a, b, _ in out):
                continue
            out.append((shortlist[i], mask, "s-step"))
            taken += 1
    return out


def train_acquired(ledger: Ledger, surrogate: Surrogate, jobs: list[Job], t: int) -> float:
    """Train the chosen jobs; returns the surrogate's Kendall tau on them (NaN if none)."""
    if not jobs:
        return float("nan")
    predicted = surrogate.predict([j[0] for j in jobs], np.stack([j[1] for j in jobs]))
    done = ledger.train(jobs, t)
    keep = [i for i, o in enumerate(done) if o is not None]
    if not keep:
        return float("nan")
    observed = np.stack([done[i].losses for i in keep])
    clip = surrogate.clip_value_
    return kendall_tau(np.minimum(predicted[keep], clip), np.minimum(observed, clip))
