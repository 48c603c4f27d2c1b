"""M-step on the routing: gradient ascent of Q over the routing logits.

The surrogate consumes binary masks b_k ~ Bernoulli(r_k); a straight-through binary
Gumbel-Softmax (logistic noise) sample passes the hard mask forward and the relaxed
gradient backward, which is a stochastic estimate of the gradient of the multilinear
extension (eq. mask_extension).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..space.arch import Arch
from ..surrogate.model import LossModel
from ..train.adam import Adam
from .objective import load_balance, q_function


def straight_through_bernoulli(
    r: torch.Tensor, n: int, temperature: float, generator: torch.Generator
) -> torch.Tensor:
    """n hard masks per row of r (shape (..., M) -> (..., n, M)) with relaxed gradients."""
    r = r.clamp(1e-6, 1 - 1e-6).unsqueeze(-2)
    logit = torch.log(r) - torch.log1p(-r)
    shape = (*r.shape[:-2], n, r.shape[-1])
    u = torch.rand(shape, generator=generator, dtype=r.dtype).clamp(1e-9, 1 - 1e-9)
    noise = torch.log(u) - torch.log1p(-u)
    soft = torch.sigmoid((logit + noise) / temperature)
    hard = (soft > 0.5).to(soft.dtype)
    return hard + (soft - soft.detach())  # exactly 0/1 forward, relaxed gradient backward


def expected_losses(
    surrogate: LossModel, archs: Sequence[Arch], routing: np.ndarray, uniforms: np.ndarray
) -> np.ndarray:
    """Monte-Carlo estimate of U[m, k] = u_m(alpha_k, r_k) with masks b = 1[uniforms < r_k].

    `uniforms` (K, S, M) are shared between the quantities being compared (common random
    numbers), so differences are not drowned by mask-sampling noise.
    """
    k_experts, n_samples, m = uniforms.shape
    masks = (uniforms < routing.T[:, None, :]).astype(np.float64).reshape(k_experts * n_samples, m)
    rep = [a for a in archs for _ in range(n_samples)]
    pred = surrogate.predict(rep, masks).reshape(k_experts, n_samples, m).mean(axis=1)
    return pred.T


def routing_m_step(
    logits: np.ndarray,
    q: np.ndarray,
    surrogate: LossModel,
    archs: Sequence[Arch],
    sizes: np.ndarray,
    *,
    steps: int,
    lr: float,
    n_samples: int,
    temperature: float,
    seed: int,
    check_uniforms: np.ndarray | None = None,
    lb_weight: float = 0.0,
    lb_kind: str = "clusters",
) -> tuple[np.ndarray, dict]:
    """Ascend Q(R) at fixed responsibilities q; returns new logits and diagnostics.

    Generalised-EM safeguard: when `check_uniforms` is given, the new logits are kept only
    if they do not lower the (common-random-number) estimate of Q, so the candidate set
    always contains the incumbent (Assumption 3).

    `lb_weight` > 0 subtracts lb_weight * LB(R) (eq. loadbalance), needed only by the scalar
    surrogate ablation.
    """
    k_experts = len(archs)
    m = logits.shape[0]
    weights = torch.as_tensor(sizes[:, None] * q / sizes.sum())
    adj, feats = surrogate.graphs(archs)
    adj = adj.repeat_interleave(n_samples, 0)
    feats = feats.repeat_interleave(n_samples, 0)
    gen = torch.Generator().manual_seed(seed)
    params = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    opt = Adam([params], lr=lr)  # torch.optim.Adam's update (see sgem.train.adam)
    surrogate.net.eval()
    for _ in range(steps):
        log_r = torch.log_softmax(params, dim=1)
        masks = straight_through_bernoulli(log_r.exp().T, n_samples, temperature, gen)
        pred = surrogate.forward(adj, feats, masks.reshape(k_experts * n_samples, m))
        u = pred.reshape(k_experts, n_samples, m).mean(1).T
        q_value = (weights * (log_r - u)).sum()
        if lb_weight:
            q_value = q_value - lb_weight * load_balance(log_r.exp(), sizes, lb_kind)
        opt.zero_grad(set_to_none=True)
        (-q_value).backward()
        opt.step()
    new_logits = params.detach().numpy().copy()
    info: dict = {"accepted": True}
    if check_uniforms is not None:
        old_r, new_r = _softmax(logits), _softmax(new_logits)
        q_old = q_function(
            q, old_r, expected_losses(surrogate, archs, old_r, check_uniforms), sizes
        )
        q_new = q_function(
            q, new_r, expected_losses(surrogate, archs, new_r, check_uniforms), sizes
        )
        info.update(q_old=q_old, q_new=q_new, accepted=q_new >= q_old)
        if q_new < q_old:
            new_logits = logits.copy()
    return new_logits, info


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
