"""The S-step: which candidates to really train, chosen by a lower confidence bound.

Per expert, the incumbent is measured on its hard region (optional), then the pool members
with the lowest LCB of their routing-weighted predicted loss are trained, each on a mask
drawn from the expert's routing column. The surrogate's ranking quality on what was just
trained (Kendall's tau) is reported, since a surrogate that ranks badly misleads the E- and
M-steps.

With `batch_size` q > 0 the S-step instead proposes q candidates in total, chosen jointly
(`acquire_batch`), so one iteration can keep many workers busy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..random_streams import acquisition_seed
from ..space.arch import Arch
from ..surrogate.model import LossModel, Surrogate, kendall_tau, lcb
from .architecture import ExpertPool
from .config import SearchConfig
from .ledger import Job
from .masks import nonempty_bernoulli_mask
from .store import Observation


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
    (the surrogate or its scalar reduction). With `config.batch_size` > 0: `acquire_batch`."""
    if config.batch_size:
        return acquire_batch(u, config, seed, pools, q, routing, assignment, sizes, rng, t)
    out: list[Job] = []
    for k, pool in enumerate(pools):
        region = assignment == k
        if config.measure_incumbents and region.any():
            out.append((pool.best, region, "incumbent"))
        if config.acquisitions_per_expert == 0:
            continue
        shortlist, mean, std = _shortlist(
            u, pool, sizes * q[:, k], config.lcb_shortlist, acquisition_seed(seed, t, k)
        )
        bounds = lcb(mean, std)
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


def _shortlist(
    u: LossModel, pool: ExpertPool, weights: np.ndarray, size: int, seed: int
) -> tuple[list[Arch], np.ndarray, np.ndarray]:
    """The `size` best pool members by mean score, with the MC-dropout mean and std of
    their weighted predicted loss (averaged over the pool's masks)."""
    order = np.argsort(pool.scores)[:size]
    shortlist = [pool.archs[i] for i in order]
    mc = u.predict_mc(
        [a for a in shortlist for _ in range(len(pool.masks))],
        np.tile(pool.masks, (len(shortlist), 1)),
        seed=seed,
    )  # (T, L*S, M)
    n_t = mc.shape[0]
    mc = mc.reshape(n_t, len(shortlist), len(pool.masks), -1).mean(axis=2)
    scalar = mc @ weights / max(weights.sum(), 1e-12)  # (T, L)
    return shortlist, scalar.mean(0), scalar.std(0)


def arch_similarity(a: Arch, b: Arch) -> float:
    """The overlap kernel of two cells: the fraction of nodes applying the same op to the
    same state (a mean of per-node indicator kernels, so positive semi-definite)."""
    if a.n_nodes != b.n_nodes:
        return 0.0
    same = sum(
        op_a == op_b and in_a == in_b
        for op_a, in_a, op_b, in_b in zip(a.ops, a.inputs, b.ops, b.inputs, strict=True)
    )
    return same / a.n_nodes


def acquire_batch(
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
    """The incumbents (as `acquire`), then `config.batch_size` candidates chosen jointly:
    a kriging believer under a structural kernel, taking the experts in turn.

    Why this form. Choosing the q trainings one LCB at a time would pick q near-copies of
    the same guess. The kriging believer avoids that by adding each chosen candidate as a
    fantasy observation at its predicted mean before choosing the next; refitting the
    surrogate per fantasy would cost q fits per S-step (seconds each at scale, the very
    wait a batch is meant to remove). Under a Gaussian model no refit is needed: a fantasy
    at the mean leaves every posterior mean unchanged and shrinks the variances of the
    candidates correlated with it, var_i -= cov(i, S) cov(S, S)^-1 cov(S, i), a rank-one
    (pivoted Cholesky) update per pick. The MC-dropout surrogate gives each candidate's
    mean and std but no covariance between candidates (dropout is drawn per row), so the
    correlation is structural: `arch_similarity` of the cells times the cosine of the two
    experts' size-weighted routing columns (where their masks are drawn). Similar cells
    for the same expert lose their exploration bonus; the means decide the rest. Each
    expert's shortlist is the max(lcb_shortlist, 2 q / K) best pool members by mean.
    """
    out: list[Job] = []
    for k, pool in enumerate(pools):
        region = assignment == k
        if config.measure_incumbents and region.any():
            out.append((pool.best, region, "incumbent"))
    n_experts = len(pools)
    size = max(config.lcb_shortlist, 2 * -(-config.batch_size // n_experts))
    archs: list[Arch] = []
    expert: list[int] = []
    means, stds = [], []
    for k, pool in enumerate(pools):
        shortlist, mean, std = _shortlist(
            u, pool, sizes * q[:, k], size, acquisition_seed(seed, t, k)
        )
        archs += shortlist
        expert += [k] * len(shortlist)
        means.append(mean)
        stds.append(std)
    mean, std, owner = np.concatenate(means), np.concatenate(stds), np.array(expert)
    columns = sizes[:, None] * routing
    columns = columns / np.maximum(np.linalg.norm(columns, axis=0, keepdims=True), 1e-12)
    similarity = np.array([[arch_similarity(a, b) for b in archs] for a in archs])
    cov = similarity * (columns.T @ columns)[owner][:, owner] * np.outer(std, std)
    var = std**2
    basis = np.zeros((len(archs), 0))
    available = np.ones(len(archs), dtype=bool)
    taken, turn = 0, 0
    while taken < config.batch_size and available.any():
        k = turn % n_experts
        turn += 1
        options = available & (owner == k)
        if not options.any():
            continue
        bounds = np.where(options, lcb(mean, np.sqrt(np.maximum(var, 0.0))), np.inf)
        j = int(np.argmin(bounds))
        available[j] = False
        region = assignment == k
        fallback = region if region.any() else np.ones_like(region)
        mask = nonempty_bernoulli_mask(routing[:, k], rng, fallback)
        if any(a == archs[j] and np.array_equal(b, mask) for a, b, _ in out):
            turn -= 1  # the same expert chooses again
            continue
        out.append((archs[j], mask, "s-step"))
        taken += 1
        if var[j] > 1e-12:  # the believer's fantasy at j: condition every variance on it
            column = (cov[:, j] - basis @ basis[j]) / np.sqrt(var[j])
            basis = np.column_stack([basis, column])
            var = var - column**2
    return out


def predicted_losses(surrogate: Surrogate, jobs: list[Job]) -> np.ndarray:
    """The surrogate's prediction of the S-step jobs before they train, (len(jobs), M):
    what `outcome_tau` compares their outcomes with."""
    if not jobs:
        return np.zeros((0, surrogate.n_clusters))
    return surrogate.predict([j[0] for j in jobs], np.stack([j[1] for j in jobs]))


def outcome_tau(
    predicted: np.ndarray, outcomes: Sequence[Observation | None], clip: float | None
) -> float:
    """Kendall tau between predictions made before training and the outcomes of the jobs
    that trained (both clipped as the surrogate's targets are); NaN if none trained."""
    keep = [i for i, o in enumerate(outcomes) if o is not None]
    if not keep:
        return float("nan")
    observed = np.stack([outcomes[i].losses for i in keep])  # type: ignore[union-attr]
    cap = np.inf if clip is None else clip
    return kendall_tau(np.minimum(predicted[keep], cap), np.minimum(observed, cap))
