"""Train many small tabular candidates at once, as one vectorised program.

A toy candidate is microseconds of arithmetic wrapped in ~100 kernel launches per step, so
one program over C candidates costs about what one candidate costs alone. The layout keeps
the program cheap:

* **features x samples.** Each state is a (C, W, n) tensor: candidate, feature, sample.
  Reductions over features and classes run over a short *outer* dimension with the samples
  contiguous, which CPUs vectorise well (log-softmax over a last dimension of 2-10 classes
  costs ~100 ns per row; here it is a few elementwise passes).
* **one gather per node.** A node's input is picked from the earlier states by one
  `index_select` that also sorts the candidates by op; `split` hands each op its contiguous
  slice (its backward is one `cat`), one `cat` joins the outputs and one `index_select`
  restores candidate order. The cost per step is fixed by the number of ops, not by C.
* **parameters per node in op order.** A node's linear weights, RBF centres and shifts are
  stored only for the candidates that use that op there, already sorted, so no parameter is
  gathered per step; all of them step together in one fused Adam.
* **inert padding.** Features are zero-padded to a common width W. Every op maps zero
  padding to zero padding and padded parameters start at zero and get zero gradients, so
  Adam never moves them. Each candidate trains on its own region's rows, padded with
  zero-weight rows to the chunk's largest region; its loss is the mean over its own rows,
  so each candidate gets exactly its own gradient.

Every network is first built exactly as one-at-a-time training builds it (same seed, same
data-dependent RBF start on its own region), so initial states are identical, and training
matches `Trainer.train` up to floating-point summation order and Adam's fused kernel, except
for `dropout`, whose random draws come from one generator per chunk (`sgem.train.dropout`:
statistically the same). Chunks share no mutable state but the lock around network
construction, so an executor may train several in threads.
Chunks are formed from the job list alone (`plan_chunks`), so every executor that hands the
same jobs to this trainer gets the same numbers.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..data.task import ClusteredTask
from ..forecast import student_t_nll
from ..space.arch import Arch, CellSpace
from ..space.tabular import RBF, Shift, TabularNet, TabularSpace
from .adam import Adam
from .cell_program import CellProgram, Node
from .global_rng import GLOBAL_RNG_LOCK
from .time_fence import fence_passed
from .trainer import TrainConfig, Trainer, TrainOutcome, intra_op_threads

Job = tuple[Arch, np.ndarray, int]  # (architecture, training mask, seed)

#: feature x sample cells per state tensor above which a chunk is split further (memory)
MAX_CELLS = 2_000_000


def supports(task: ClusteredTask, space: CellSpace, config: TrainConfig) -> bool:
    """Whether candidates can train as one vectorised program: a tabular space, full-batch
    Adam steps at a constant rate (no minibatches, epochs, clipping or early stopping), a
    classifier or a Student-t head."""
    return (
        isinstance(space, TabularSpace)
        and config.batch_size is None
        and config.epochs is None
        and config.optimizer == "adam"
        and config.schedule == "constant"
        and config.grad_clip is None
        and config.early_stop_evals is None
        and task.loss in ("cross_entropy", "student_t")
    )


def job_chunks(
    task: ClusteredTask, space: CellSpace, config: TrainConfig, masks: Sequence[np.ndarray]
) -> list[list[int]]:
    """How a list of jobs (given by their masks) is grouped into vectorised programs: one
    job per chunk where the space cannot be vectorised or `batch_candidates` is 1. Every
    executor groups this way, so the numbers never depend on where the jobs run."""
    if config.batch_candidates == 1 or not supports(task, space, config):
        return [[i] for i in range(len(masks))]
    assert isinstance(space, TabularSpace)
    width = max(int(np.prod(task.input_shape)), space.hidden, space.rbf_centres)
    rows = [int(task.cluster_sizes[np.asarray(m, bool)].sum()) for m in masks]
    return plan_chunks(rows, config.batch_candidates, width, config.min_chunks)


def plan_chunks(
    region_rows: Sequence[int], max_batch: int, width: int, min_chunks: int = 1
) -> list[list[int]]:
    """Job indices grouped into chunks: jobs sorted by region size (stable), so padding
    stays small, cut into ceil(n / max_batch) but at least `min_chunks` (at most n) chunks of
    near-equal length, and cut again where a chunk's padded states would exceed `MAX_CELLS`.
    Depends on the job list only, never on where the jobs run."""
    n = len(region_rows)
    if n == 0:
        return []
    order = np.argsort(np.asarray(region_rows), kind="stable")
    n_chunks = min(n, max(-(-n // max_batch), min_chunks))
    chunks: list[list[int]] = []
    for part in np.array_split(order, n_chunks):
        current: list[int] = []
        for i in part:
            rows = int(region_rows[i])  # sorted: the newest job has the chunk's largest region
            if current and (len(current) + 1) * width * rows > MAX_CELLS:
                chunks.append(current)
                current = []
            current.append(int(i))
        chunks.append(current)
    return chunks


class BatchedTabularTrainer:
    """Trains a list of (arch, mask, seed) jobs together; results as `Trainer.train`."""

    def __init__(self, trainer: Trainer, max_batch: int | None = None) -> None:
        if not supports(trainer.task, trainer.space, trainer.config):
            raise ValueError(
                "batched training needs a tabular space trained full-batch with Adam at a "
                "constant learning rate (TrainConfig batch_size=None, epochs=None, "
                "optimizer='adam', schedule='constant', grad_clip=None) and a classifier or "
                "Student-t head"
            )
        self.trainer = trainer
        self.space: TabularSpace = trainer.space
        self.max_batch = max(1, int(max_batch or trainer.config.batch_candidates))
        self.in_dim = int(np.prod(trainer.task.input_shape))
        self.width = max(self.in_dim, self.space.hidden, self.space.rbf_centres)
        self.device = trainer.device
        tr = trainer
        # the trainer's (whole split's) statistics: every input below is standardised with
        # them once; a network in its own frame is reached from there (`_frames`)
        self.mean = torch.as_tensor(tr.x_mean, dtype=torch.float32, device=self.device)
        self.std = torch.as_tensor(tr.x_std, dtype=torch.float32, device=self.device)
        self.x_train = self._standardised(tr.x_train)  # (N, W)
        self.x_val = self._standardised(tr.x_val).T.contiguous()  # (W, N_val)
        self.student_t = self.space.head == "student_t"

    # -- public ------------------------------------------------------------------------------
    def train_many(self, jobs: Sequence[Job]) -> list[TrainOutcome]:
        """Train all jobs, chunk by chunk (`plan_chunks`); results in job order."""
        tr = self.trainer
        for arch, mask, _ in jobs:
            self.space.validate(arch)
            mask = np.asarray(mask, bool)
            if mask.shape != (tr.task.n_clusters,):
                raise ValueError(f"mask must have shape ({tr.task.n_clusters},), got {mask.shape}")
            if not mask.any():
                raise ValueError("mask selects no cluster; a candidate needs training data")
        rows = [int(tr.task.cluster_sizes[np.asarray(m, bool)].sum()) for _, m, _ in jobs]
        out: list[TrainOutcome | None] = [None] * len(jobs)
        with intra_op_threads(tr.config.batch_threads):
            for chunk in plan_chunks(rows, self.max_batch, self.width):
                for i, res in zip(chunk, self._train_chunk([jobs[i] for i in chunk]), strict=True):
                    out[i] = res
        return out  # type: ignore[return-value]

    # -- one chunk ---------------------------------------------------------------------------
    def _train_chunk(self, jobs: Sequence[Job]) -> list[TrainOutcome]:
        t0 = time.perf_counter()
        tr, cfg = self.trainer, self.trainer.config
        archs = [a for a, _, _ in jobs]
        nets = []
        rows = []
        with GLOBAL_RNG_LOCK:  # chunks may train in threads; initial weights use the global RNG
            for arch, mask, seed in jobs:  # exactly as Trainer.fit starts a network
                sel = torch.as_tensor(np.asarray(mask, bool), device=self.device)[tr.c_train]
                torch.manual_seed(seed)
                gen = torch.Generator().manual_seed(seed)
                net = tr.build(arch)
                net.data_init(tr.x_train[sel], gen)
                nets.append(net)
                rows.append(torch.nonzero(sel).squeeze(1))
        nodes = self._plan(archs)
        params = self._stack(nets, nodes)
        c, n_max = len(jobs), max(len(r) for r in rows)
        index = torch.zeros(c, n_max, dtype=torch.long, device=self.device)
        weights = torch.zeros(c, n_max, device=self.device)
        for j, r in enumerate(rows):
            index[j, : len(r)] = r
            weights[j, : len(r)] = 1.0 / len(r)
        frames = self._frames(nets)
        x = self.x_train[index].transpose(1, 2).contiguous()  # (C, W, n)
        if frames is not None:
            x = x * frames[0] + frames[1]
        target = self._targets(tr.y_train[index])
        # the chunk's own dropout stream (threads must not share torch's global one)
        drops = torch.Generator(device=self.device).manual_seed(jobs[0][2])
        program = CellProgram(nodes, params, self.width, self.space.hidden, self.space.dropout)
        opt = Adam(params["all"], lr=cfg.lr, weight_decay=cfg.weight_decay, fused=self._fused())
        for _ in range(cfg.steps):
            out = program.forward(x, drops)
            grads = program.backward(self._loss_gradient(out, target, weights))
            for tensor, (key, part) in zip(params["all"], params["keys"], strict=True):
                tensor.grad = grads[key] if part is None else grads[key][part]
            opt.step()
            if fence_passed():  # the time budget's hard end (sgem.train.time_fence)
                break
        with torch.no_grad():
            x_val = self.x_val.expand(c, *self.x_val.shape)
            if frames is not None:
                x_val = x_val * frames[0] + frames[1]
            target = self._targets(tr.y_val.expand(c, *tr.y_val.shape))
            nll = self._nll(program.forward(x_val, None), target)
            m = tr.task.n_clusters
            sums = torch.zeros(c, m, dtype=nll.dtype, device=nll.device)
            sums.index_add_(1, tr.c_val, nll)
            counts = torch.bincount(tr.c_val, minlength=m).to(nll.dtype)
            losses = (sums / counts).double().cpu().numpy()
        per = (time.perf_counter() - t0) / c
        return [TrainOutcome(losses[j], per) for j in range(c)]

    def _fused(self) -> bool:
        return self.device.type in ("cpu", "cuda")

    def _targets(self, y: torch.Tensor) -> torch.Tensor:
        """Classification: a one-hot (C, classes, n) float mask; Student-t: (C, H, n)."""
        if self.student_t:
            return y.transpose(1, 2).float()
        return F.one_hot(y, self.trainer.n_out).transpose(1, 2).float()

    def _loss_gradient(
        self, out: torch.Tensor, target: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        """d(sum of each candidate's mean NLL over its rows)/d(outputs), (C, n_out, n):
        softmax minus one-hot for a classifier, autograd through the Student-t NLL."""
        if not self.student_t:
            z = out - out.amax(1, keepdim=True)
            e = z.exp()
            return (e / e.sum(1, keepdim=True) - target) * weights.unsqueeze(1)
        with torch.enable_grad():
            leaf = out.detach().requires_grad_()
            loss = (self._nll(leaf, target) * weights).sum()
            (grad,) = torch.autograd.grad(loss, leaf)
        return grad

    def _nll(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-sample NLL, (C, n): cross-entropy over the class dimension, or the
        Student-t NLL averaged over outputs, as `per_sample_nll` computes it."""
        if self.student_t:
            c, _, n = out.shape
            raw = out.view(c, -1, 3, n)
            scale = 1e-3 + F.softplus(raw[:, :, 1])
            df = 2.0 + F.softplus(raw[:, :, 2])
            return student_t_nll(raw[:, :, 0], scale, df, target).mean(1)
        shift = out.detach().amax(1, keepdim=True)
        z = out - shift
        return z.exp().sum(1).log() - (z * target).sum(1)

    # -- layout ------------------------------------------------------------------------------
    def _plan(self, archs: Sequence[Arch]) -> list[Node]:
        """Per node: candidates sorted by op (stable), the gather rows into the stacked
        states (state s of candidate j is row s * C + j), the inverse permutation, and per
        state read, its readers (candidate order) with their sorted positions."""
        c = len(archs)
        nodes = []
        for i in range(self.space.n_nodes):
            by_op: dict[str, list[int]] = {}
            for j, a in enumerate(archs):
                by_op.setdefault(a.ops[i], []).append(j)
            order = [j for members in by_op.values() for j in members]
            gather = torch.tensor([archs[j].inputs[i] * c + j for j in order])
            restore = torch.empty(c, dtype=torch.long)
            restore[torch.tensor(order)] = torch.arange(c)
            sources = []
            for s in sorted({archs[j].inputs[i] for j in order}):
                rows = [p for p, j in enumerate(order) if archs[j].inputs[i] == s]
                readers = torch.tensor([order[p] for p in rows], device=self.device)
                sources.append((s, readers, torch.tensor(rows, device=self.device)))
            nodes.append(
                Node(
                    gather.to(self.device),
                    restore.to(self.device),
                    torch.tensor(order, device=self.device),
                    sources,
                    list(by_op),
                    [len(m) for m in by_op.values()],
                    list(by_op.values()),
                )
            )
        return nodes

    def _stack(self, nets: list[TabularNet], nodes: list[Node]) -> dict:
        """The chunk's trainable tensors, copied from the freshly initialised networks."""
        w, c, n_nodes = self.width, len(nets), self.space.n_nodes
        n_out = self.trainer.n_out
        z = functools.partial(torch.zeros, device=self.device)
        params: dict = {}
        widths = [[self.in_dim] for _ in nets]  # per candidate: the width of each state
        with torch.no_grad():
            for i, node in enumerate(nodes):
                for op, members in zip(node.ops, node.members, strict=True):
                    g = len(members)
                    if op == "linear":
                        params[("linear", i)] = z(g, self.space.hidden, w)
                    elif op == "rbf":
                        r = self.space.rbf_centres
                        params[("rbf", i)] = (z(g, r, w, 1), z(g, r))
                    elif op == "shift":
                        params[("shift", i)] = z(g, w, 1)
                    for slot, j in enumerate(members):
                        module = nets[j].cell.ops[i]
                        w_in = widths[j][nets[j].cell.arch.inputs[i]]
                        if isinstance(module, torch.nn.Linear):
                            params[("linear", i)][slot, :, :w_in] = module.weight
                            widths[j].append(module.weight.shape[0])
                        elif isinstance(module, RBF):
                            centres, log_gamma = params[("rbf", i)]
                            centres[slot, :, :w_in, 0] = module.centres
                            log_gamma[slot] = module.log_gamma
                            widths[j].append(module.centres.shape[0])
                        else:
                            if isinstance(module, Shift):
                                params[("shift", i)][slot, :w_in, 0] = module.shift
                            widths[j].append(w_in)
            head = z(c, n_out, n_nodes * w)
            leaf = z(c, 1, n_nodes * w)
            bias = z(c, n_out, 1)
            for j, net in enumerate(nets):
                offset = 0
                for leaf_node in net.cell.arch.leaves:
                    width = widths[j][leaf_node + 1]
                    cols = slice(leaf_node * w, leaf_node * w + width)
                    head[j, :, cols] = net.head.weight[:, offset : offset + width]
                    leaf[j, 0, cols] = 1.0
                    offset += width
                bias[j, :, 0] = net.head.bias
        params["head"], params["leaf"], params["bias"] = head, leaf, bias
        trainable = [head, bias]
        #: per trainable tensor: its key in `params` and, for a pair (RBF), which part
        keys: list[tuple[str | tuple[str, int], int | None]] = [("head", None), ("bias", None)]
        for key, value in params.items():
            if isinstance(key, tuple):
                if isinstance(value, tuple):  # (RBF centres, log-widths)
                    trainable.extend(value)
                    keys.extend((key, k) for k in range(len(value)))
                else:
                    trainable.append(value)
                    keys.append((key, None))
        # gradients come from `CellProgram.backward`, not autograd
        params["all"], params["keys"] = trainable, keys
        return params

    def _frames(self, nets: list[TabularNet]) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(gain, offset), each (C, W, 1), that take the trainer's standardised inputs into
        each network's own frame (`TabularNet` with `frame="region"`): (x - m) / s =
        x_std * (s0 / s) + (m0 - m) / s for the trainer's (m0, s0). None: all keep the
        trainer's. Zero padding stays zero (gain 1, offset 0 there)."""
        m0, s0 = self.mean.reshape(-1), self.std.reshape(-1)
        if all(torch.equal(n.x_mean, m0) and torch.equal(n.x_std, s0) for n in nets):
            return None
        gain = torch.ones(len(nets), self.width, 1, device=self.device)
        offset = torch.zeros(len(nets), self.width, 1, device=self.device)
        for j, net in enumerate(nets):
            gain[j, : self.in_dim, 0] = s0 / net.x_std
            offset[j, : self.in_dim, 0] = (m0 - net.x_mean) / net.x_std
        return gain, offset

    def _standardised(self, x: torch.Tensor) -> torch.Tensor:
        """(x - mean) / std as every `TabularNet` in the global frame computes it,
        zero-padded to W features."""
        flat = x.reshape(len(x), -1)
        return F.pad((flat - self.mean) / self.std, (0, self.width - self.in_dim))


__all__ = ["MAX_CELLS", "BatchedTabularTrainer", "job_chunks", "plan_chunks", "supports"]
