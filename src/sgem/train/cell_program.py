"""The forward and backward pass of a chunk of tabular cells, with the gradients written out.

Why by hand: a toy candidate's step is ~60 tiny kernels forward and as many backward, so the
autograd engine's per-node bookkeeping and the copies it makes to route gradients (the
zero-fill and scatter behind `index_select`, the `cat` behind `split`) cost more than the
arithmetic. Here the backward pass is the chain rule of the same ops, written once: each
state's gradient is accumulated in place, op groups get their slice of it directly, and
nothing that needs no gradient (the inputs) gets one. It is the same math as autograd on
`BatchedTabularTrainer`'s layout (tests/test_cell_program.py checks the gradients against
autograd); only the summation order of a few reductions differs.

Layout (see `sgem.train.batched`): states are (C, W, n) tensors (candidate, feature, sample);
per node, candidates are grouped by op (`Node.order`), every op maps zero padding to zero
padding, and the head reads the leaves through a 0/1 mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .dropout import keep_scale


@dataclass
class Node:
    """One node of the chunk's cells: who reads which state, grouped by op."""

    gather: torch.Tensor  # (C,) rows of the stacked states, in op-sorted order
    restore: torch.Tensor  # (C,) inverse permutation back to candidate order
    order: torch.Tensor  # (C,) the op-sorted candidates (restore's inverse)
    sources: list[tuple[int, torch.Tensor, torch.Tensor]]  # (state, candidates, sorted rows)
    ops: list[str]  # the op of each group, in sorted order
    sizes: list[int]  # group sizes
    members: list[list[int]]  # candidate indices per group, in sorted order


class CellProgram:
    """`forward` (saving what `backward` needs when training) and `backward`, which returns
    the gradient of every trainable tensor of `params` (keyed as `params`)."""

    def __init__(self, nodes: list[Node], params: dict, width: int, hidden: int, p_drop: float):
        self.nodes, self.params = nodes, params
        self.width, self.hidden, self.p_drop = width, hidden, p_drop
        self._saved: list | None = None

    # -- forward -----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, drops: torch.Generator | None) -> torch.Tensor:
        """(C, W, n) inputs -> (C, n_out, n) outputs; training (dropout on, intermediates
        kept for `backward`) when a generator is given."""
        train = drops is not None
        states = [x]
        saved: list = []
        for i, node in enumerate(self.nodes):
            stacked = torch.cat(states) if len(states) > 1 else states[0]
            inputs = stacked.index_select(0, node.gather).split(node.sizes)
            outs, keep = [], []
            for op, xi in zip(node.ops, inputs, strict=True):
                y, ctx = self._op(op, xi, i, drops)
                outs.append(y)
                keep.append(ctx)
            joined = torch.cat(outs) if len(outs) > 1 else outs[0]
            states.append(joined.index_select(0, node.restore))
            saved.append(keep)
        cell = torch.cat(states[1:], dim=1)  # (C, n_nodes * W, n)
        p = self.params
        head = p["head"] * p["leaf"]
        if train:
            self._saved = [saved, cell, head]
        return torch.baddbmm(p["bias"], head, cell)

    def _op(self, op: str, x: torch.Tensor, i: int, drops: torch.Generator | None):
        """One op group's output and what its gradient needs."""
        p = self.params
        if op == "linear":
            y = torch.bmm(p[("linear", i)], x)
            pad = self.width - self.hidden
            return (torch.nn.functional.pad(y, (0, 0, 0, pad)) if pad else y), x
        if op == "rbf":
            centres, log_gamma = p[("rbf", i)]
            diff = x.unsqueeze(1) - centres  # (G, R, W, n)
            d2 = diff.pow(2).sum(2)  # (G, R, n)
            gamma = log_gamma.exp().unsqueeze(-1)  # (G, R, 1)
            y = torch.exp(-gamma * d2)
            padded = torch.nn.functional.pad(y, (0, 0, 0, self.width - y.shape[1]))
            return padded, (diff, d2, gamma, y)
        if op == "identity":
            return x, None
        if op == "square":
            return x * x, x
        if op == "shift":
            return x + p[("shift", i)], None
        if op == "relu":
            return torch.relu(x), x
        if op == "dropout":
            if drops is None or self.p_drop == 0.0:
                return x, None
            keep = keep_scale(x.shape, self.p_drop, drops, x.device, x.dtype)
            return x * keep, keep
        raise ValueError(op)  # pragma: no cover - validated before training

    # -- backward ----------------------------------------------------------------------------
    def backward(self, grad_out: torch.Tensor) -> dict:
        """Gradients of the trainable tensors for d(loss)/d(outputs) = `grad_out`, from the
        last training `forward`."""
        assert self._saved is not None, "backward needs a training forward first"
        saved, cell, head = self._saved
        self._saved = None
        p, w = self.params, self.width
        grads: dict = {
            "head": torch.bmm(grad_out, cell.transpose(1, 2)) * p["leaf"],
            "bias": grad_out.sum(-1, keepdim=True),
        }
        g_cell = torch.bmm(head.transpose(1, 2), grad_out)  # (C, n_nodes * W, n), fresh
        # state s >= 1 is node s-1's output: its gradient starts as its slice of g_cell
        g_states = [None] + [g_cell[:, i * w : (i + 1) * w] for i in range(len(self.nodes))]
        for i in range(len(self.nodes) - 1, -1, -1):
            node = self.nodes[i]
            g_sorted = g_states[i + 1].index_select(0, node.order).split(node.sizes)
            g_inputs = []
            for op, gy, ctx in zip(node.ops, g_sorted, saved[i], strict=True):
                g_inputs.append(self._op_backward(op, gy, ctx, i, grads))
            g_in = torch.cat(g_inputs) if len(g_inputs) > 1 else g_inputs[0]
            for s, candidates, rows in node.sources:
                if s > 0:  # the inputs (state 0) need no gradient
                    g_states[s].index_add_(0, candidates, g_in.index_select(0, rows))
        return grads

    def _op_backward(self, op: str, gy: torch.Tensor, ctx, i: int, grads: dict) -> torch.Tensor:
        """The gradient at an op group's input; its parameters' gradients go into `grads`."""
        p = self.params
        if op == "linear":
            weight = p[("linear", i)]
            g = gy[:, : self.hidden]
            grads[("linear", i)] = torch.bmm(g, ctx.transpose(1, 2))
            return torch.bmm(weight.transpose(1, 2), g)
        if op == "rbf":
            diff, d2, gamma, y = ctx
            t = gy[:, : y.shape[1]] * y  # (G, R, n)
            g_log_gamma = -(t * d2).sum(-1) * gamma.squeeze(-1)
            g_diff = diff * (-2.0 * gamma * t).unsqueeze(2)  # (G, R, W, n)
            grads[("rbf", i)] = (-g_diff.sum(-1, keepdim=True), g_log_gamma)
            return g_diff.sum(1)
        if op == "identity":
            return gy
        if op == "square":
            return 2.0 * ctx * gy
        if op == "shift":
            grads[("shift", i)] = gy.sum(-1, keepdim=True)
            return gy
        if op == "relu":
            return gy * (ctx > 0)
        if op == "dropout":
            return gy if ctx is None else gy * ctx
        raise ValueError(op)  # pragma: no cover


__all__ = ["CellProgram", "Node"]
