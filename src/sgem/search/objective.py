"""The cluster-aware objective, its Q-function, the E-step, and the mask extension.

Notation (paper): R is (M, K) routing probabilities, U is (M, K) with U[m, k] =
u_m(alpha_k, r_k), sizes are |C_m|.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp, softmax

_EPS = 1e-12


def e_step(routing: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Responsibilities q_mk proportional to r_mk * exp(-u_mk) (eq. estep)."""
    return softmax(np.log(np.maximum(routing, _EPS)) - u, axis=1)


def objective(routing: np.ndarray, u: np.ndarray, sizes: np.ndarray) -> float:
    """J = sum_m |C_m| log sum_k r_mk exp(-u_mk) (eq. moe_objective)."""
    return float(np.sum(sizes * logsumexp(np.log(np.maximum(routing, _EPS)) - u, axis=1)))


def q_function(q: np.ndarray, routing: np.ndarray, u: np.ndarray, sizes: np.ndarray) -> float:
    """Q = sum_m |C_m| sum_k q_mk [log r_mk - u_mk] (eq. qfun_main)."""
    return float(np.sum(sizes[:, None] * q * (np.log(np.maximum(routing, _EPS)) - u)))


def hard_routing(routing: np.ndarray) -> np.ndarray:
    """Expert index per cluster: argmax_k r_mk."""
    return np.asarray(routing).argmax(axis=1)


def one_hot_routing(assignment: np.ndarray, n_experts: int) -> np.ndarray:
    out = np.zeros((len(assignment), n_experts))
    out[np.arange(len(assignment)), assignment] = 1.0
    return out


def measured_hard_objective(
    assignment: np.ndarray, region_losses: np.ndarray, sizes: np.ndarray
) -> float:
    """J at a hard routing from measured losses: -sum_m |C_m| y_m(alpha_k(m), I_k(m)).

    `region_losses` is (K, M): row k is the measured loss vector of expert k trained on its
    own region I_k.
    """
    picked = region_losses[assignment, np.arange(len(assignment))]
    return float(-np.sum(sizes * picked))


def multilinear_extension(
    vertex_fn: Callable[[np.ndarray], np.ndarray], r: np.ndarray
) -> np.ndarray:
    """Exact E_{b ~ Bernoulli(r)}[u(b)] by enumerating all 2^M masks (eq. mask_extension).

    Exponential in M: for tests and small M only; the search estimates it by sampling.
    """
    r = np.asarray(r, dtype=np.float64)
    total = None
    for bits in itertools.product((0.0, 1.0), repeat=len(r)):
        b = np.array(bits)
        weight = float(np.prod(np.where(b == 1.0, r, 1.0 - r)))
        value = weight * np.asarray(vertex_fn(b), dtype=np.float64)
        total = value if total is None else total + value
    return total


def load_balance(routing, sizes=None, kind: str = "clusters"):
    """LB(R) = K * sum_k rbar_k * p_k (eq. loadbalance): 1 for uniform routing, K at collapse.

    kind="clusters": rbar_k is the mean routing mass and p_k the fraction of clusters whose
    argmax is k (the paper's definition). kind="samples": both are weighted by cluster size,
    so a partition balanced in samples but not in clusters is not penalised.
    Works on numpy arrays and on torch tensors (differentiable through rbar_k; p_k is a
    constant of the hard assignment).
    """
    import torch

    m, k = routing.shape
    is_torch = isinstance(routing, torch.Tensor)
    if kind == "clusters":
        w = np.full(m, 1.0 / m)
    elif kind == "samples":
        if sizes is None:
            raise ValueError("load_balance(kind='samples') needs the cluster sizes")
        w = np.asarray(sizes, dtype=np.float64) / np.sum(sizes)
    else:
        raise ValueError(f"unknown load-balance kind {kind!r}; use 'clusters' or 'samples'")
    hard = np.asarray(routing.detach() if is_torch else routing).argmax(axis=1)
    p = np.bincount(hard, weights=w, minlength=k)
    if is_torch:
        w_t = torch.as_tensor(w, dtype=routing.dtype)
        rbar = (w_t[:, None] * routing).sum(0)
        return k * (rbar * torch.as_tensor(p, dtype=routing.dtype)).sum()
    rbar = (w[:, None] * routing).sum(0)
    return float(k * np.sum(rbar * p))
