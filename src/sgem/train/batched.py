"""Train many small tabular candidates at once, as one vectorised program.

Small experts are dominated by Python and kernel-launch overhead, not arithmetic, so one
program over C candidates is far faster than C programs. How:

* Each candidate's network is first built exactly as one-at-a-time training builds it
  (same seed, same data-dependent RBF start on its own region), then its parameters are
  copied into stacked per-node, per-op tensors. Initial states are therefore identical.
* Features are zero-padded to a common width. Every op maps zero padding to zero padding
  and padded parameters start at zero, so their gradients are exactly zero and Adam
  (elementwise, zero gradient -> zero step) never moves them: the padding is inert.
* At each node, candidates are grouped by (op, input state); each op runs once per group.
* Each candidate trains on its own region's rows (padded to the largest region of its chunk
  with zero-weight rows; chunks group similar region sizes). Its loss is the mean over its
  rows, so the summed loss has, for each candidate's parameters, exactly that candidate's
  gradient; Adam then gives each the update it would get alone.

The result equals one-at-a-time training up to floating-point summation order, except for
`dropout`, whose random draws cannot follow the same stream (statistically equivalent).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..space.arch import Arch
from ..space.tabular import RBF, Shift, TabularNet, squared_distances
from .losses import bucket_by_cluster
from .trainer import Trainer, TrainOutcome


class _Stack:
    """Stacked parameters of C candidates for one node."""

    def __init__(self, c: int, n_nodes: int, width: int, hidden: int, centres: int, n_out: int):
        z = torch.zeros
        self.linear = [z(c, width, hidden) for _ in range(n_nodes)]
        self.centres = [z(c, centres, width) for _ in range(n_nodes)]
        self.log_gamma = [z(c, centres) for _ in range(n_nodes)]
        self.shift = [z(c, width) for _ in range(n_nodes)]
        self.head = z(c, n_nodes, width, n_out)
        self.bias = z(c, n_out)

    def parameters(self) -> list[torch.Tensor]:
        return [*self.linear, *self.centres, *self.log_gamma, *self.shift, self.head, self.bias]


def _load(stack: _Stack, c: int, net: TabularNet, in_dim: int) -> None:
    """Copy candidate c's freshly initialised network into the stacked tensors."""
    arch = net.cell.arch
    widths = [in_dim]
    with torch.no_grad():
        for i, (module, src) in enumerate(zip(net.cell.ops, arch.inputs, strict=True)):
            w_in = widths[src]
            if isinstance(module, torch.nn.Linear):
                stack.linear[i][c, :w_in, :] = module.weight.T
                widths.append(module.weight.shape[0])
            elif isinstance(module, RBF):
                stack.centres[i][c, :, :w_in] = module.centres
                stack.log_gamma[i][c] = module.log_gamma
                widths.append(module.centres.shape[0])
            else:
                if isinstance(module, Shift):
                    stack.shift[i][c, :w_in] = module.shift
                widths.append(w_in)
        offset = 0
        for leaf in arch.leaves:
            w = widths[leaf + 1]
            stack.head[c, leaf, :w, :] = net.head.weight[:, offset : offset + w].T
            offset += w
        stack.bias[c] = net.head.bias


class BatchedTabularTrainer:
    """Trains a list of (arch, mask, seed) jobs together; same results as `Trainer.train`."""

    def __init__(self, trainer: Trainer, max_batch: int = 16) -> None:
        if trainer.task.loss != "cross_entropy":
            raise ValueError("batched training supports classification (cross_entropy) only")
        self.trainer = trainer
        self.space = trainer.space
        self.max_batch = max_batch
        self.in_dim = int(np.prod(trainer.task.input_shape))
        self.width = max(self.in_dim, self.space.hidden, self.space.rbf_centres)
        self.device = trainer.device

    def train_many(self, jobs: Sequence[tuple[Arch, np.ndarray, int]]) -> list[TrainOutcome]:
        """Train all jobs; chunks group similar region sizes so padding stays small."""
        sizes = [
            int(self.trainer.task.cluster_sizes[np.asarray(m, bool)].sum()) for _, m, _ in jobs
        ]
        order = np.argsort(sizes, kind="stable")
        out: list[TrainOutcome | None] = [None] * len(jobs)
        for start in range(0, len(jobs), self.max_batch):
            chunk = order[start : start + self.max_batch]
            for i, res in zip(chunk, self._train_chunk([jobs[i] for i in chunk]), strict=True):
                out[i] = res
        return out  # type: ignore[return-value]

    def _train_chunk(self, jobs: Sequence[tuple[Arch, np.ndarray, int]]) -> list[TrainOutcome]:
        t0 = time.perf_counter()
        tr, space = self.trainer, self.space
        c = len(jobs)
        n_nodes = space.n_nodes
        for arch, mask, _ in jobs:
            space.validate(arch)
            if not np.asarray(mask, bool).any():
                raise ValueError("mask selects no cluster; a candidate needs training data")
        stack = _Stack(c, n_nodes, self.width, space.hidden, space.rbf_centres, tr.n_out)
        masks = torch.as_tensor(np.stack([np.asarray(m, bool) for _, m, _ in jobs]))
        for j, (arch, _, seed) in enumerate(jobs):
            torch.manual_seed(seed)
            gen = torch.Generator().manual_seed(seed)
            net = tr.build(arch)
            sel = masks[j][tr.c_train]
            net.data_init(tr.x_train[sel], gen)
            _load(stack, j, net, self.in_dim)
        params = [p.to(self.device).requires_grad_() for p in stack.parameters()]
        (linear, centres, log_gamma, shift) = (
            params[:n_nodes],
            params[n_nodes : 2 * n_nodes],
            params[2 * n_nodes : 3 * n_nodes],
            params[3 * n_nodes : 4 * n_nodes],
        )
        head, bias = params[-2], params[-1]
        plan = self._plan([a for a, _, _ in jobs])

        # each candidate's own training rows, padded to the chunk's largest region
        rows = [torch.nonzero(masks[j][tr.c_train]).squeeze(1) for j in range(c)]
        n_max = max(len(r) for r in rows)
        index = torch.zeros(c, n_max, dtype=torch.long)
        weights = torch.zeros(c, n_max)
        for j, r in enumerate(rows):
            index[j, : len(r)] = r
            weights[j, : len(r)] = 1.0 / len(r)
        x = self._standardised(tr.x_train)[index]  # (C, n_max, W)
        y = tr.y_train[index].reshape(-1)

        def forward(x_in: torch.Tensor, train: bool) -> torch.Tensor:
            states = [x_in if x_in.dim() == 3 else x_in.expand(c, *x_in.shape)]
            for i in range(n_nodes):
                parts = []
                for op, src, idx in plan["groups"][i]:
                    xi = states[src].index_select(0, idx)
                    if op == "linear":
                        yi = torch.bmm(xi, linear[i].index_select(0, idx))
                    elif op == "rbf":
                        cen = centres[i].index_select(0, idx)
                        g = log_gamma[i].index_select(0, idx).exp().unsqueeze(1)
                        yi = torch.exp(-g * squared_distances(xi, cen))
                        yi = F.pad(yi, (0, self.width - yi.shape[-1]))
                    elif op == "identity":
                        yi = xi
                    elif op == "square":
                        yi = xi * xi
                    elif op == "shift":
                        yi = xi + shift[i].index_select(0, idx).unsqueeze(1)
                    elif op == "relu":
                        yi = torch.relu(xi)
                    elif op == "dropout":
                        yi = F.dropout(xi, space.dropout, training=train)
                    else:  # pragma: no cover - validated above
                        raise ValueError(op)
                    parts.append(yi)
                # groups are a permutation of the candidates: undo it once
                states.append(torch.cat(parts).index_select(0, plan["inverse"][i]))
            logits = bias.unsqueeze(1)
            for i in range(n_nodes):
                leaf = plan["leaf"][:, i, None, None]
                logits = logits + torch.bmm(states[i + 1], head[:, i]) * leaf
            return logits

        opt = torch.optim.Adam(params, lr=tr.config.lr, weight_decay=tr.config.weight_decay)
        if tr.config.batch_size is not None:
            raise ValueError("batched training runs full-batch (TrainConfig.batch_size=None)")
        for _ in range(tr.config.steps):
            logits = forward(x, train=True)
            nll = F.cross_entropy(logits.reshape(-1, tr.n_out), y, reduction="none")
            loss = (nll.view(c, -1) * weights).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        with torch.no_grad():
            logits = forward(self._standardised(tr.x_val), train=False)
            nll = F.cross_entropy(
                logits.reshape(-1, tr.n_out), tr.y_val.repeat(c), reduction="none"
            ).view(c, -1)
            losses = [
                bucket_by_cluster(nll[j], tr.c_val, tr.task.n_clusters).double().cpu().numpy()
                for j in range(c)
            ]
        per = (time.perf_counter() - t0) / c
        return [TrainOutcome(v, per) for v in losses]

    def _standardised(self, x: torch.Tensor) -> torch.Tensor:
        tr = self.trainer
        mean = torch.as_tensor(tr.x_mean, device=x.device)
        std = torch.as_tensor(tr.x_std, device=x.device)
        return F.pad((x - mean) / std, (0, self.width - self.in_dim))

    def _plan(self, archs: Sequence[Arch]) -> dict:
        """Per node: candidates grouped by (op, input state), and the inverse permutation
        that puts the concatenated group outputs back in candidate order."""
        c, n_nodes = len(archs), self.space.n_nodes
        groups, inverse = [], []
        for i in range(n_nodes):
            by_key: dict[tuple[str, int], list[int]] = {}
            for j, a in enumerate(archs):
                by_key.setdefault((a.ops[i], a.inputs[i]), []).append(j)
            order = [j for idx in by_key.values() for j in idx]
            groups.append([(op, src, torch.tensor(idx)) for (op, src), idx in by_key.items()])
            inv = torch.empty(c, dtype=torch.long)
            inv[torch.tensor(order)] = torch.arange(c)
            inverse.append(inv)
        leaf = torch.zeros(c, n_nodes)
        for j, a in enumerate(archs):
            leaf[j, list(a.leaves)] = 1.0
        return {"groups": groups, "inverse": inverse, "leaf": leaf}
