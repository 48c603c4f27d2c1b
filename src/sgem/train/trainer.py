"""Train one architecture on a cluster mask; return its per-cluster validation NLL vector.

One training run yields the whole M-vector from a single pass over the validation set,
including clusters outside the mask (the out-of-region evidence the routing search needs).

One loop serves every modality. The defaults (full-batch Adam for a fixed number of steps)
suit the small tabular tasks; image CNNs set `epochs` (shuffled minibatch epochs), SGD with
Nesterov momentum, a cosine schedule and gradient clipping (the paper's protocol), and a
validation batch size so a large validation set is scored in chunks. The optimiser, the
schedule and the mixed-precision context are small public helpers, so other loops (the
learnable-gate MoE, the DARTS supernet) train exactly the same way.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import torch
from torch import nn

from ..config_fields import check_bool, check_choice, check_float, check_int, config_from_dict
from ..data.task import ClusteredTask
from ..errors import SgemUserError
from ..space.arch import Arch
from .adam import Adam
from .early_stop import RegionEarlyStopping
from .losses import bucket_by_cluster, per_sample_nll
from .time_fence import fence_passed

#: `Trainer.optimise`'s per-step callback: (model, steps done, total steps) -> stop?
Monitor: TypeAlias = Callable[[nn.Module, int, int], bool]
#: what `make_optimizer` returns: sgem's Adam or a `torch.optim` optimiser
Optimizer: TypeAlias = Adam | torch.optim.Optimizer

OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class TrainConfig:
    """How a candidate is trained. Full-batch Adam suits the small tabular tasks.

    `steps` counts optimiser steps; when `epochs` is set it wins and training makes
    `epochs` shuffled passes over the data in minibatches of `batch_size` (128 if None).
    The paper's image protocol is
    ``TrainConfig(epochs=100, batch_size=128, optimizer="sgd", lr=0.05, momentum=0.9,
    nesterov=True, weight_decay=3e-4, schedule="cosine", grad_clip=5.0)``.
    `eval_batch_size` splits the validation pass into chunks (None: one pass). `amp` and
    `channels_last` only act on a CUDA device (bfloat16 autocast for classification;
    channels-last memory for 4-D image inputs).

    `batch_candidates`: up to this many candidates train together as one vectorised program
    where the space allows it (tabular cells trained full-batch, `sgem.train.batched`); 1
    trains one at a time. Small candidates are dominated by per-kernel overhead, so this is
    the main lever on the search's speed. The grouping follows from the job list alone, so
    every executor computes the same numbers. `batch_threads`: intra-op threads for such a
    program (its tensors are large enough to use more than one core; one small network is
    slower on several threads). Results depend on it through summation order, so it is part
    of the config. `min_chunks`: a batch of at least that many jobs is cut into at least
    that many programs of balanced size, so the inline executor's threads (or workers) can
    train them side by side; the numbers depend on the grouping (dropout streams), so it is
    part of the config too, and the thread count is not.

    `early_stop_evals`: score the validation set this many times over `steps` and report a
    candidate's per-cluster losses at the evaluation where its own region (the mask) scored
    best, stopping after `early_stop_patience` evaluations without a new best (None: run to
    `steps`). Candidates are then ranked on what they reach, not on how fast: see
    `sgem.train.early_stop`. None: the losses after `steps`.
    """

    steps: int = 150
    lr: float = 0.03
    weight_decay: float = 0.0
    batch_size: int | None = None  # None: full batch (steps) / 128 (epochs)
    epochs: int | None = None
    optimizer: str = "adam"
    momentum: float = 0.9
    nesterov: bool = True
    schedule: str = "constant"
    grad_clip: float | None = None
    eval_batch_size: int | None = None
    amp: bool = True
    channels_last: bool = True
    batch_candidates: int = 16
    batch_threads: int = 1
    min_chunks: int = 2
    early_stop_evals: int | None = None
    early_stop_patience: int | None = None

    def __post_init__(self) -> None:
        check_int(self, "steps", 1)
        check_float(self, "lr", 0.0, low_open=True)
        check_float(self, "weight_decay", 0.0)
        check_int(self, "batch_size", 1, optional=True)
        check_int(self, "epochs", 1, optional=True)
        check_choice(self, "optimizer", OPTIMIZERS)
        check_float(self, "momentum", 0.0, 1.0, high_open=True)
        check_bool(self, "nesterov")
        check_choice(self, "schedule", SCHEDULES)
        check_float(self, "grad_clip", 0.0, low_open=True, optional=True)
        check_int(self, "eval_batch_size", 1, optional=True)
        check_bool(self, "amp")
        check_bool(self, "channels_last")
        check_int(self, "batch_candidates", 1)
        check_int(self, "batch_threads", 1)
        check_int(self, "min_chunks", 1)
        check_int(self, "early_stop_evals", 1, optional=True)
        check_int(self, "early_stop_patience", 1, optional=True)

    @classmethod
    def from_dict(cls, data: dict, where: str = "train") -> TrainConfig:
        """From a mapping (a YAML section); unknown keys are errors naming the known ones."""
        return config_from_dict(cls, data, where)

    @property
    def minibatch(self) -> int:
        """The training batch size in epoch mode."""
        return self.batch_size or 128


@dataclass(frozen=True)
class TrainOutcome:
    losses: np.ndarray  # (M,) mean per-sample validation NLL on every cluster
    seconds: float


# -- shared pieces of every training loop ------------------------------------------------------
def resolve_device(device: str | torch.device = "cpu") -> torch.device:
    """ "auto" -> the first CUDA GPU when one is present, else the CPU. A device this torch
    cannot use is refused here, before any data is read or trained."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise SgemUserError(
            f"unknown device {device!r}: use cpu, cuda, cuda:N or auto (a GPU when present)"
        ) from exc
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise SgemUserError(
                f"device {device!r} asked for, but this torch ({torch.__version__}) sees no CUDA "
                "GPU: use --device cpu, or auto (a GPU when present)"
            )
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise SgemUserError(
                f"device {device!r} asked for, but torch sees {torch.cuda.device_count()} "
                "CUDA GPU(s) (cuda:0 is the first)"
            )
    elif resolved.type != "cpu":
        raise SgemUserError(f"device {device!r} is not supported: use cpu, cuda[:N] or auto")
    return resolved


def make_optimizer(params: Iterable[nn.Parameter], cfg: TrainConfig) -> Optimizer:
    """The config's optimiser. Adam runs fused (one kernel for all tensors) on CPU and CUDA:
    small networks are dominated by per-kernel overhead, and the multi-tensor version
    launches several kernels per step. Adam is `sgem.train.adam.Adam` (torch's kernels
    without `torch.optim`'s one-second import of `torch._dynamo`) wherever it can fuse."""
    params = list(params)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params,
            lr=cfg.lr,
            momentum=cfg.momentum,
            nesterov=cfg.nesterov and cfg.momentum > 0,
            weight_decay=cfg.weight_decay,
            foreach=True,
        )
    if all(p.device.type in ("cpu", "cuda") for p in params):
        return Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True)


def schedule_lr(opt: Optimizer, cfg: TrainConfig, step: int, total: int) -> None:
    """Set the learning rate for optimiser step `step` of `total` (cosine: lr -> 0)."""
    if cfg.schedule == "constant":
        return
    lr = 0.5 * cfg.lr * (1.0 + math.cos(math.pi * step / max(total, 1)))
    for group in opt.param_groups:
        group["lr"] = lr


@contextlib.contextmanager
def intra_op_threads(n: int) -> Iterator[None]:
    """Run the block on `n` torch intra-op threads, then restore the caller's count (a
    switch costs well under a microsecond)."""
    before = torch.get_num_threads()
    if n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def autocast(
    device: torch.device, cfg: TrainConfig, loss: str
) -> contextlib.AbstractContextManager:
    """bfloat16 autocast on CUDA for classification (no loss scaler needed); else nothing.

    The Student-t NLL (log-gamma, small scales) stays in float32: that is not safe in bf16.
    """
    if cfg.amp and device.type == "cuda" and loss == "cross_entropy":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def clip_and_step(params: Iterable[nn.Parameter], opt: Optimizer, cfg: TrainConfig) -> None:
    """Clip the gradient norm of `params` (when the config says so), then step."""
    if cfg.grad_clip is not None:
        nn.utils.clip_grad_norm_(params, cfg.grad_clip, foreach=True)
    opt.step()


def epoch_batches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Index batches of one shuffled pass; a last batch of one sample is dropped (BatchNorm
    cannot normalise a single sample)."""
    perm = torch.randperm(n, generator=generator)
    for start in range(0, n, batch_size):
        idx = perm[start : start + batch_size]
        if len(idx) == 1 and batch_size > 1 and n > 1:
            continue
        yield idx


class Trainer:
    """Holds the task's tensors once; trains candidates on masks of clusters.

    `device` may be "auto" (a CUDA GPU when present, else the CPU).
    """

    def __init__(
        self, task: ClusteredTask, space, config: TrainConfig | None = None, device: str = "cpu"
    ) -> None:
        self.task = task
        self.space = space
        self.config = config or TrainConfig()
        self.device = resolve_device(device)
        tr, va = task.train, task.val
        self.x_train = torch.as_tensor(tr.x, dtype=torch.float32, device=self.device)
        self.y_train = torch.as_tensor(tr.y, device=self.device)
        self.c_train = torch.as_tensor(tr.cluster, device=self.device)
        self.x_val = torch.as_tensor(va.x, dtype=torch.float32, device=self.device)
        self.y_val = torch.as_tensor(va.y, device=self.device)
        self.c_val = torch.as_tensor(va.cluster, device=self.device)
        flat = tr.x.reshape(len(tr.x), -1)
        self.x_mean = flat.mean(0)
        # one scale for all features: distances (and so radial ops) keep their geometry
        self.x_std = np.full(flat.shape[1], float(flat.std(0).mean()) + 1e-6, dtype=np.float32)
        if hasattr(space, "output_size"):  # a space that knows it decides (3 * horizon)
            self.n_out = int(space.output_size(task))
        elif task.loss == "cross_entropy":
            self.n_out = int(task.n_classes)
        else:
            raise ValueError(
                f"cannot tell the network's output size for loss {task.loss!r}: the space "
                f"{type(space).__name__} has no output_size(task) method. Give the space an "
                "output_size(task) (e.g. TimeSeriesSpace returns 3 * horizon)."
            )

    @property
    def uses_channels_last(self) -> bool:
        """Channels-last memory (faster convolutions on GPUs) for image batches on CUDA."""
        return self.config.channels_last and self.device.type == "cuda" and self.x_train.ndim == 4

    def to_model_layout(self, x: torch.Tensor) -> torch.Tensor:
        """`x` in the memory layout the models were built in (see `uses_channels_last`)."""
        return x.contiguous(memory_format=torch.channels_last) if self.uses_channels_last else x

    def build(self, arch: Arch) -> nn.Module:
        model = self.space.build(
            arch, int(np.prod(self.task.input_shape)), self.n_out, self.x_mean, self.x_std
        ).to(self.device)
        if self.uses_channels_last:
            model = model.to(memory_format=torch.channels_last)
        return model

    def fit(
        self,
        arch: Arch,
        x: torch.Tensor,
        y: torch.Tensor,
        seed: int,
        steps: int | None = None,
        epochs: int | None = None,
        monitor: Monitor | None = None,
        init_state: dict[str, torch.Tensor] | None = None,
    ) -> nn.Module:
        """Train a fresh network for `arch` on (x, y) with a deterministic seed, or, with
        `init_state`, fine-tune those weights (`steps=0`: return them as they are).

        Step mode (the config has no `epochs` and none is passed): `steps` (default
        `config.steps`) minibatches drawn with replacement, or full batches. Epoch mode:
        shuffled passes in minibatches of `config.minibatch`, for `epochs` passes (default
        `config.epochs`) or, when `steps` is given, for exactly that many optimiser steps
        (what `train_final_moe(epochs=...)` asks for per expert).
        """
        if len(x) == 0:
            raise ValueError("cannot train on an empty set of samples")
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = self.build(arch)
        if init_state is not None:
            model.load_state_dict(init_state)
            if steps == 0:
                return model.eval()
        elif hasattr(model, "data_init"):
            model.data_init(x, gen)
        return self.optimise(model, x, y, gen, steps=steps, epochs=epochs, monitor=monitor)

    def optimise(
        self,
        model: nn.Module,
        x: torch.Tensor,
        y: torch.Tensor,
        generator: torch.Generator,
        steps: int | None = None,
        epochs: int | None = None,
        monitor: Monitor | None = None,
    ) -> nn.Module:
        """The training loop shared by every model trained here (experts, gated MoEs):
        minimise the task's mean per-sample NLL of `model(x)` with the config's optimiser,
        schedule, clipping and mixed precision. Batches are drawn from `generator`.
        `monitor(model, steps_done, total)` is called after every step; True stops."""
        if len(x) == 0:
            raise ValueError("cannot train on an empty set of samples")
        cfg = self.config
        opt = make_optimizer(model.parameters(), cfg)
        model.train()
        n = len(x)
        batches: Iterator[torch.Tensor | None]
        if epochs is None and cfg.epochs is None:
            total = steps or cfg.steps
            batches = self._step_batches(n, total, generator)
        else:
            if steps is not None:
                total = steps
            else:
                total = (epochs or cfg.epochs or 1) * _batches_per_epoch(n, cfg.minibatch)
            batches = itertools.islice(self._shuffled_batches(n, generator), total)
        amp = autocast(self.device, cfg, self.task.loss)
        for step, idx in enumerate(batches):
            xb, yb = (x, y) if idx is None else (x[idx.to(x.device)], y[idx.to(x.device)])
            schedule_lr(opt, cfg, step, total)
            with amp:
                out = model(self.to_model_layout(xb))
            loss = per_sample_nll(out.float(), yb, self.task.loss).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            clip_and_step(model.parameters(), opt, cfg)
            if monitor is not None and monitor(model, step + 1, total):
                break
            if fence_passed():  # the time budget's hard end (sgem.train.time_fence)
                break
        model.eval()
        return model

    def _step_batches(
        self, n: int, steps: int, gen: torch.Generator
    ) -> Iterator[torch.Tensor | None]:
        bs = self.config.batch_size or n
        for _ in range(steps):
            yield None if bs >= n else torch.randint(n, (bs,), generator=gen)

    def _shuffled_batches(self, n: int, gen: torch.Generator) -> Iterator[torch.Tensor]:
        while True:
            yield from epoch_batches(n, self.config.minibatch, gen)

    @torch.no_grad()
    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """The model's float32 outputs on `x`, in chunks of `eval_batch_size` (None: one)."""
        bs = self.config.eval_batch_size or max(len(x), 1)
        amp = autocast(self.device, self.config, self.task.loss)
        outs = []
        for start in range(0, len(x), bs):
            with amp:
                outs.append(model(self.to_model_layout(x[start : start + bs])).float())
        if not outs:  # no sample (e.g. a region without test windows): an empty batch
            return torch.empty((0, self.n_out), device=self.device)
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    @torch.no_grad()
    def cluster_losses(self, model: nn.Module) -> np.ndarray:
        """Mean validation NLL per cluster: one forward pass, losses bucketed by cluster."""
        if self.config.eval_batch_size is None:
            nll = per_sample_nll(model(self.x_val), self.y_val, self.task.loss)
        else:
            nll = per_sample_nll(self.predict(model, self.x_val), self.y_val, self.task.loss)
        return bucket_by_cluster(nll, self.c_val, self.task.n_clusters).double().cpu().numpy()

    def train(self, arch: Arch, mask: np.ndarray, seed: int) -> TrainOutcome:
        """Train `arch` on the training samples of the clusters selected by `mask`."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (self.task.n_clusters,):
            raise ValueError(f"mask must have shape ({self.task.n_clusters},), got {mask.shape}")
        if not mask.any():
            raise ValueError("mask selects no cluster; a candidate needs training data")
        start = time.perf_counter()
        sel = torch.as_tensor(mask, device=self.device)[self.c_train]
        if self.config.early_stop_evals is None:
            model = self.fit(arch, self.x_train[sel], self.y_train[sel], seed)
            losses = self.cluster_losses(model)
        else:
            stop = RegionEarlyStopping(
                self.cluster_losses,
                np.bincount(self.task.val.cluster, minlength=self.task.n_clusters),
                mask,
                self.config.early_stop_evals,
                self.config.early_stop_patience,
            )
            self.fit(arch, self.x_train[sel], self.y_train[sel], seed, monitor=stop)
            losses = stop.losses
        return TrainOutcome(losses, time.perf_counter() - start)


def _batches_per_epoch(n: int, batch_size: int) -> int:
    full, rest = divmod(n, batch_size)
    return full + (1 if rest > 1 or (rest == 1 and n == 1) else 0)
