"""DARTS baselines: a one-shot differentiable search of one cell, DARTS x K, DARTS oracle MoE.

The one-shot search (Liu et al., 2019, first-order variant) is implemented here, on the
same skeleton the experts use (`sgem.space.darts.DartsSkeleton`), so the searched cell is
evaluated in exactly the network it was searched in:

* supernet: every edge (state s -> node j, s <= j) is a mixed op, the softmax(alpha_e)-
  weighted sum of all ops (BatchNorm without affine parameters, as in DARTS); both normal
  cells share alpha;
* alternating updates: one Adam step on alpha on a validation batch (lr 3e-4, betas
  (0.5, 0.999), weight decay 1e-3), then one step on the weights on a training batch with
  the weight `TrainConfig` (DARTS: SGD lr 0.025, momentum 0.9, weight decay 3e-4, cosine,
  clip 5), for `epochs` passes over the training data;
* genotype (`derive_genotype`): node j keeps its two strongest incoming edges (strength =
  the edge's largest op weight), each with its argmax op; node 0 has one incoming edge (the
  cell input) and keeps that edge's two strongest ops.

Methods built on it (all end in `sgem.final.run_final`, like SGEM):

* DARTS x K: one cell searched on the whole training mixture, used for all K experts, on a
  random cluster split (`random_partition`, the split Random-MoE uses);
* DARTS oracle MoE: the clusters routed by their majority source (`task.oracle_partition`,
  it uses the source labels), one cell searched per source on that source's clusters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data.task import ClusteredTask
from ..methods.budget import MethodBudget
from ..methods.result import MethodResult
from ..random_streams import Stream, stream_rng
from ..space.arch import Arch
from ..space.darts import DartsSkeleton, DartsSpace, ReLUConvBN, make_op
from ..train.losses import per_sample_nll
from ..train.trainer import (
    TrainConfig,
    Trainer,
    autocast,
    clip_and_step,
    epoch_batches,
    make_optimizer,
    schedule_lr,
)
from .base import cluster_moe_result, make_trainer, random_partition

#: DARTS' weight optimiser for the supernet.
DARTS_WEIGHTS = TrainConfig(
    epochs=50,
    batch_size=64,
    optimizer="sgd",
    lr=0.025,
    momentum=0.9,
    nesterov=False,
    weight_decay=3e-4,
    schedule="cosine",
    grad_clip=5.0,
)


@dataclass(frozen=True)
class DartsConfig:
    """The one-shot search: `weights` trains the supernet (its `epochs` and `batch_size`
    set the search length); alpha uses Adam with `alpha_lr` / `alpha_weight_decay`.
    `warmup_epochs` train the weights only, before alpha starts moving."""

    weights: TrainConfig = DARTS_WEIGHTS
    alpha_lr: float = 3e-4
    alpha_weight_decay: float = 1e-3
    warmup_epochs: int = 0

    def __post_init__(self) -> None:
        if self.weights.epochs is None:
            raise ValueError("DartsConfig.weights needs epochs (the search length), got None")
        if self.alpha_lr <= 0 or self.alpha_weight_decay < 0 or self.warmup_epochs < 0:
            raise ValueError(f"need alpha_lr > 0, alpha_weight_decay >= 0, warmup >= 0: {self}")


class MixedOp(nn.Module):
    def __init__(self, op_names: tuple[str, ...], channels: int) -> None:
        super().__init__()
        self.ops = nn.ModuleList(make_op(op, channels, affine=False) for op in op_names)

    def forward(self, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return sum(w * op(x) for w, op in zip(weights, self.ops, strict=True))


def edge_index(n_cell_nodes: int) -> list[tuple[int, int]]:
    """(node j, input state s) of every supernet edge, in alpha's row order."""
    return [(j, s) for j in range(n_cell_nodes) for s in range(j + 1)]


class MixedCell(nn.Module):
    """The continuous relaxation of a DARTS cell: every admissible edge, all ops mixed."""

    def __init__(self, op_names: tuple[str, ...], n_cell_nodes: int, channels: int) -> None:
        super().__init__()
        self.n_nodes = n_cell_nodes
        self.edges = edge_index(n_cell_nodes)
        self.pre = ReLUConvBN(channels, channels, 1)
        self.mixed = nn.ModuleList(MixedOp(op_names, channels) for _ in self.edges)
        self.out = nn.Sequential(
            nn.Conv2d(n_cell_nodes * channels, channels, 1, bias=False), nn.BatchNorm2d(channels)
        )

    def forward(self, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        states = [self.pre(x)]
        e = 0
        for j in range(self.n_nodes):
            total = 0
            for s in range(j + 1):
                total = total + self.mixed[e](states[s], weights[e])
                e += 1
            states.append(total)
        return self.out(torch.cat(states[1:], dim=1))


class DartsSupernet(DartsSkeleton):
    """The DARTS skeleton with mixed cells and one shared architecture parameter alpha."""

    def __init__(
        self, space: DartsSpace, n_out: int, x_mean: np.ndarray | None, x_std: np.ndarray | None
    ) -> None:
        ops, b = space.op_names, space.n_cell_nodes
        super().__init__(
            lambda c: MixedCell(ops, b, c),
            space.in_channels,
            space.init_channels,
            n_out,
            x_mean,
            x_std,
        )
        self.alpha = nn.Parameter(1e-3 * torch.randn(len(edge_index(b)), len(ops)))

    def weight_parameters(self) -> list[nn.Parameter]:
        return [p for name, p in self.named_parameters() if name != "alpha"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x, F.softmax(self.alpha, dim=-1)))


def derive_genotype(alpha: np.ndarray | torch.Tensor, space: DartsSpace) -> Arch:
    """The discrete cell of a relaxed one (see the module docstring for the rule)."""
    w = F.softmax(torch.as_tensor(np.asarray(alpha, dtype=np.float64)), dim=-1).numpy()
    edges = edge_index(space.n_cell_nodes)
    if w.shape != (len(edges), len(space.op_names)):
        raise ValueError(
            f"alpha must have shape {(len(edges), len(space.op_names))} for this space, "
            f"got {w.shape}"
        )
    ops: list[str] = []
    inputs: list[int] = []
    for j in range(space.n_cell_nodes):
        rows = [e for e, (node, _) in enumerate(edges) if node == j]
        if len(rows) == 1:
            order = np.argsort(-w[rows[0]], kind="stable")[:2]
            picks = [(space.op_names[int(o)], 0) for o in order]
        else:
            strength = np.array([w[e].max() for e in rows])
            best = [rows[int(i)] for i in np.argsort(-strength, kind="stable")[:2]]
            picks = [(space.op_names[int(w[e].argmax())], edges[e][1]) for e in best]
        for op, src in picks:
            ops.append(op)
            inputs.append(src)
    return space.canonical(Arch(tuple(ops), tuple(inputs)))


@dataclass
class DartsSearchOutcome:
    arch: Arch
    alpha: np.ndarray
    seconds: float
    history: list[dict] = field(default_factory=list)  # per epoch: train / val loss

    def to_json(self) -> dict:
        return {
            "arch": self.arch.to_json(),
            "alpha": np.round(self.alpha, 5).tolist(),
            "seconds": round(self.seconds, 3),
            "history": self.history,
        }


def darts_search(
    trainer: Trainer,
    mask: np.ndarray | None = None,
    config: DartsConfig | None = None,
    seed: int = 0,
) -> DartsSearchOutcome:
    """One-shot DARTS search of one cell on the training / validation samples of the
    clusters in `mask` (None: all clusters). `trainer.space` must be a `DartsSpace`."""
    space = trainer.space
    if not isinstance(space, DartsSpace):
        raise ValueError(
            f"darts_search searches DartsSpace cells; the trainer's space is {type(space).__name__}"
        )
    cfg = config or DartsConfig()
    task = trainer.task
    m = task.n_clusters
    mask = np.ones(m, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if mask.shape != (m,) or not mask.any():
        raise ValueError(f"mask must be a non-empty boolean vector of length {m}, got {mask}")
    start = time.perf_counter()
    dev = trainer.device
    sel_tr = torch.as_tensor(mask, device=dev)[trainer.c_train]
    sel_va = torch.as_tensor(mask, device=dev)[trainer.c_val]
    x_tr, y_tr = trainer.x_train[sel_tr], trainer.y_train[sel_tr]
    x_va, y_va = trainer.x_val[sel_va], trainer.y_val[sel_va]
    if len(x_va) == 0:
        raise ValueError("the mask's clusters have no validation samples to fit alpha on")

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    net = DartsSupernet(space, trainer.n_out, trainer.x_mean, trainer.x_std).to(dev)
    if trainer.uses_channels_last:
        net = net.to(memory_format=torch.channels_last)
    wcfg = cfg.weights
    w_opt = make_optimizer(net.weight_parameters(), wcfg)
    a_opt = torch.optim.Adam(
        [net.alpha], lr=cfg.alpha_lr, betas=(0.5, 0.999), weight_decay=cfg.alpha_weight_decay
    )
    amp = autocast(dev, wcfg, task.loss)
    bs = wcfg.minibatch
    epochs = int(wcfg.epochs or 1)
    per_epoch = max(1, -(-len(x_tr) // bs))
    total, step = epochs * per_epoch, 0
    history = []

    def loss_on(xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        with amp:
            out = net(trainer.to_model_layout(xb))
        return per_sample_nll(out.float(), yb, task.loss).mean()

    net.train()
    for epoch in range(epochs):
        val_iter = epoch_batches(len(x_va), bs, gen)
        tr_sum, va_sum, n_b = 0.0, 0.0, 0
        for idx in epoch_batches(len(x_tr), bs, gen):
            if epoch >= cfg.warmup_epochs:
                vidx = next(val_iter, None)
                if vidx is None:
                    val_iter = epoch_batches(len(x_va), bs, gen)
                    vidx = next(val_iter)
                vidx = vidx.to(dev)
                a_loss = loss_on(x_va[vidx], y_va[vidx])
                a_opt.zero_grad(set_to_none=True)
                a_loss.backward()
                a_opt.step()
                va_sum += float(a_loss.detach())
            idx = idx.to(dev)
            schedule_lr(w_opt, wcfg, step, total)
            w_loss = loss_on(x_tr[idx], y_tr[idx])
            w_opt.zero_grad(set_to_none=True)
            net.alpha.grad = None
            w_loss.backward()
            net.alpha.grad = None  # alpha moves only on validation batches
            clip_and_step(net.weight_parameters(), w_opt, wcfg)
            tr_sum += float(w_loss.detach())
            n_b += 1
            step += 1
        history.append(
            {
                "epoch": epoch + 1,
                "train_loss": round(tr_sum / max(n_b, 1), 5),
                "val_loss": round(va_sum / max(n_b, 1), 5) if epoch >= cfg.warmup_epochs else None,
            }
        )
    alpha = net.alpha.detach().double().cpu().numpy()
    return DartsSearchOutcome(
        derive_genotype(alpha, space), alpha, time.perf_counter() - start, history
    )


# -- the methods ----------------------------------------------------------------------------
def cached_darts_search(
    task: ClusteredTask,
    budget: MethodBudget,
    mask: np.ndarray | None,
    config: DartsConfig,
    seed: int,
) -> DartsSearchOutcome:
    """`darts_search` on `mask`'s clusters, cached in `budget.cache` per (task, mask, config,
    seed): DARTS x K, the oracle MoE and the decomposition ablation share their searches."""
    m = task.n_clusters
    mask = np.ones(m, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    key = ("darts", id(task), mask.tobytes(), config, seed)
    if key not in budget.cache:
        trainer = make_trainer(task, budget, "DARTS")
        budget.cache[key] = darts_search(trainer, mask, config, seed)
    return budget.cache[key]


def oracle_assignment(task: ClusteredTask, n_experts: int) -> np.ndarray:
    """The cluster -> expert table of the true source split (majority source per cluster)."""
    if task.oracle_partition is None:
        raise ValueError(
            f"task {task.name!r} has no oracle partition: the oracle baselines need source "
            "ids (build the task with sources, e.g. make_image_task(..., source=...))"
        )
    oracle = np.asarray(task.oracle_partition, dtype=np.int64)
    groups = np.unique(oracle)
    if len(groups) != n_experts:
        raise ValueError(
            f"the oracle partition has {len(groups)} groups ({groups.tolist()}) but "
            f"n_experts={n_experts}; the oracle MoE has one expert per source"
        )
    return np.searchsorted(groups, oracle)


class DartsXK:
    """DARTS x K: one cell searched on the full mixture, shared by K experts, on a random
    cluster split (`random_partition`, as Random-MoE)."""

    name = "darts_x_k"
    uses_domain_labels = False

    def __init__(self, config: DartsConfig | None = None) -> None:
        self.config = config or DartsConfig()

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        start = time.perf_counter()
        found = cached_darts_search(task, budget, None, self.config, seed)
        rng = stream_rng(seed, Stream.BASELINE_PARTITION)
        assignment = random_partition(task.n_clusters, budget.n_experts, rng)
        return cluster_moe_result(
            self.name,
            task,
            budget,
            assignment,
            [found.arch] * budget.n_experts,
            0,
            start,
            extra={"darts": found.to_json(), "search_seconds": round(found.seconds, 3)},
        )


class DartsOracleMoE:
    """DARTS oracle MoE: the true source split, one DARTS cell searched per source on that
    source's clusters. Uses the source labels: a reference ceiling, not a competitor."""

    name = "darts_oracle"
    uses_domain_labels = True

    def __init__(self, config: DartsConfig | None = None) -> None:
        self.config = config or DartsConfig()

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        seed = budget.seed
        start = time.perf_counter()
        assignment = oracle_assignment(task, budget.n_experts)
        searches = [
            cached_darts_search(task, budget, assignment == k, self.config, seed)
            for k in range(budget.n_experts)
        ]
        return cluster_moe_result(
            self.name,
            task,
            budget,
            assignment,
            [s.arch for s in searches],
            0,
            start,
            uses_domain_labels=True,
            extra={
                "darts": [s.to_json() for s in searches],
                "search_seconds": round(sum(s.seconds for s in searches), 3),
            },
        )


def _register() -> None:
    """Self-registration with the package registry (`sgem.baselines.get_baseline`)."""
    from . import register_baseline

    register_baseline(DartsXK.name, DartsXK)
    register_baseline(DartsOracleMoE.name, DartsOracleMoE)


_register()
