"""How long the final networks train: a fixed length, or one chosen on validation.

The fixed protocol trains every final expert for the configured number of steps (or
epochs) on train + validation. With `length="validation"` the length is chosen per
network, the way AutoGluon's `refit_full` does it:

1. train a fresh network (same seed, same initialisation) on the TRAINING samples only,
   scoring the mean NLL on the VALIDATION samples every `max_steps / n_evals` steps, up to
   `max_steps = max_factor x` the configured length (early stopping after `patience`
   evaluations without improvement);
2. keep the step count of the lowest validation NLL (`best_step`);
3. retrain from scratch on train + validation for `best_step x (n_train + n_val) /
   n_train` steps (the same number of passes over the larger set), with the same seed.

`track_validation` is the model-agnostic loop (a step function and a validation-loss
function); `expert_length` drives it for a cell expert with the `Trainer`'s own pieces
(`make_optimizer`, `schedule_lr`, `autocast`, `clip_and_step` and the trainer's batch
order), so a tracked expert trains step for step like `Trainer.fit`; `adam_length` does
the same for the direct forecasters' Adam loop (`sgem.baselines.base.fit_network`).

`"validation-warm"` does the same with warm starts (`sgem.final.warm_start`): a global
network of each cell is trained first (its length chosen the same way on all clusters), and
each expert's tracking run fine-tunes that network's best state on its region, scored once
before the first step too, so "no fine-tuning" (0 steps) is a possible choice; the refit
fine-tunes the global network refitted on train + validation for the chosen length.

`"validation-norefit"` / `"validation-warm-norefit"` skip step 3: the final network IS the
tracking run's network at its best step (trained on the training samples only, as AutoGluon
does without `refit_full` and GluonTS always does). Why offer it: a refit is one more
training run, not the one validation scored, and on ts-offline it is where some cells lose
what validation saw (benchmarks/refit_diagnosis.py: the same expert tested 0.106 NLL worse
refitted than tracked, while another cell's refit was neutral).

Caveat: with a cosine schedule the tracking run anneals over `max_steps`, the retraining
over its own length, so the chosen step is only approximately transferable; the
forecasting presets use a constant learning rate, where it transfers exactly.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ..space.arch import Arch
from ..train.losses import per_sample_nll
from ..train.time_fence import fence_passed
from ..train.trainer import Trainer, autocast, clip_and_step, make_optimizer, schedule_lr
from .protocol import FINAL_LENGTHS, FinalProtocol, parse_length, parse_twins

#: what a validation-chosen final training costs, in units of the fixed one, for planning a
#: time budget: the tracking run usually stops (patience) between 1x and 2.5x the length,
#: and the refit on train + validation is the chosen length scaled by the data ratio
PLANNING_FACTOR = 3.5
#: the tracking run's share of that (the rest is the refit): what each further tracking run
#: of the finalists' second look (`sgem.final.check`) costs per expert
TRACKING_FACTOR = 2.3


@dataclass(frozen=True)
class ValidationLength:
    """The validation-chosen final length (see the module docstring).

    Attributes:
        max_factor: the tracking run's cap, in multiples of the configured length.
        n_evals: validation evaluations over the cap (every `max_steps / n_evals` steps).
        patience: stop the tracking run after this many evaluations without a new best
            (None: always run to the cap).
        scale_to_data: retrain for best_step x (n_train + n_val) / n_train steps (AutoGluon
            refit_full); False: exactly best_step.
        warm_start: every expert of a cluster-gated MoE fine-tunes a global network of its
            cell instead of starting from scratch (`sgem.final.warm_start`).
        refit: retrain on train + validation for the chosen length (step 3); False: keep
            the tracking run's network at its best step.
        twins: (with refit) a final expert is its refitted and its tracked network averaged
            (`sgem.moe.averaged`), so the tracking run keeps its best weights.
    """

    max_factor: float = 4.0
    n_evals: int = 20
    patience: int | None = 5
    scale_to_data: bool = True
    warm_start: bool = False
    refit: bool = True
    twins: bool = False

    def __post_init__(self) -> None:
        if not self.max_factor > 0 or self.n_evals < 1:
            raise ValueError(
                f"need max_factor > 0 and n_evals >= 1, got {self.max_factor}, {self.n_evals}"
            )
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1 or None, got {self.patience}")

    def cap(self, base_steps: int) -> tuple[int, int]:
        """(max_steps, eval_every) for a configured length of `base_steps`."""
        max_steps = max(1, math.ceil(self.max_factor * base_steps))
        every = max(1, max_steps // self.n_evals)
        return max_steps, every

    def refit_steps(self, best_step: int, n_train: int, n_val: int) -> int:
        if best_step <= 0:  # a warm start that fine-tuning did not improve: keep it as is
            return 0
        if not self.refit:  # the tracked network is kept: it trained `best_step` steps
            return best_step
        if not self.scale_to_data or n_train <= 0:
            return max(1, best_step)
        return max(1, round(best_step * (n_train + n_val) / n_train))


def tracking_rule(protocol: FinalProtocol) -> ValidationLength | None:
    """The tracking rule of a final protocol (None: a fixed length)."""
    if not protocol.tracked:
        return None
    return ValidationLength(
        warm_start=protocol.warm_start, refit=protocol.refit, twins=protocol.twins
    )


def resolve_length(length: str | ValidationLength | None) -> ValidationLength | None:
    """None for the fixed protocol ("fixed" or None), else the validation rule."""
    if length is None or (isinstance(length, str) and length == "fixed"):
        return None
    if isinstance(length, ValidationLength):
        return length
    if isinstance(length, str) and length in FINAL_LENGTHS:
        _, warm, refit = parse_length(length)
        return ValidationLength(warm_start=warm, refit=refit, twins=parse_twins(length))
    raise ValueError(
        f"unknown final length {length!r}: use one of {list(FINAL_LENGTHS)} or a "
        "ValidationLength(...)"
    )


@dataclass
class LengthChoice:
    """What the tracking run found for one network."""

    best_step: int  # steps on the training samples at the lowest validation NLL
    refit_steps: int  # steps of the retraining on train + validation
    best_val_nll: float
    max_steps: int
    eval_every: int
    n_train: int
    n_val: int
    stopped_at: int  # the last step the tracking run made
    curve: list[tuple[int, float]] = field(default_factory=list)
    #: the weights at `best_step` (only when the caller asked to keep them: a global
    #: network's tracking run, where its experts' tracking runs start)
    best_state: dict[str, torch.Tensor] | None = field(default=None, repr=False)
    #: the network's outputs on the validation samples at `best_step` (float64, model
    #: units): out-of-sample predictions the leaderboard and the calibration use as they are
    #: instead of training the network once more on the training samples
    val_output: np.ndarray | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        return {
            "best_step": self.best_step,
            "refit_steps": self.refit_steps,
            "best_val_nll": self.best_val_nll,
            "max_steps": self.max_steps,
            "eval_every": self.eval_every,
            "n_train": self.n_train,
            "n_val": self.n_val,
            "stopped_at": self.stopped_at,
            "curve": [[s, round(v, 5)] for s, v in self.curve],
        }


def track_validation(
    step: Callable[[int], None],
    val_loss: Callable[[], float],
    max_steps: int,
    eval_every: int,
    patience: int | None = None,
    eval_start: bool = False,
) -> tuple[int, float, int, list[tuple[int, float]]]:
    """Run `step(i)` for i = 0, 1, ... up to `max_steps`, scoring `val_loss()` after every
    `eval_every` steps and after the last; returns (best step count, its loss, the steps
    made, the curve [(steps, loss)]). Ties keep the earlier (shorter) length; a non-finite
    loss never counts as best. Stops early after `patience` evaluations without a new best.
    `eval_start`: also score before the first step (a warm start), so 0 steps can win.
    """
    if max_steps < 1 or eval_every < 1:
        raise ValueError(f"need max_steps, eval_every >= 1, got {max_steps}, {eval_every}")
    best_step: int | None = None
    best = math.inf
    curve: list[tuple[int, float]] = []
    since_best = 0
    done = 0
    if eval_start:
        loss = float(val_loss())
        curve.append((0, loss))
        if math.isfinite(loss):
            best_step, best = 0, loss
    for i in range(max_steps):
        step(i)
        done = i + 1
        cut = fence_passed()  # the time budget's hard end: score where it stands, stop
        if done % eval_every and done != max_steps and not cut:
            continue
        loss = float(val_loss())
        curve.append((done, loss))
        if math.isfinite(loss) and loss < best:
            best_step, best, since_best = done, loss, 0
        else:
            since_best += 1
            if patience is not None and since_best >= patience:
                break
        if cut:
            break
    if best_step is None:  # every evaluation diverged: fall back to the first one
        best_step = curve[0][0]
    return best_step, best, done, curve


def _batches(trainer: Trainer, n: int, total: int, gen: torch.Generator) -> Iterator:
    """The batch order of `Trainer.optimise` for `total` steps (step or epoch mode)."""
    if trainer.config.epochs is None:
        return trainer._step_batches(n, total, gen)
    return itertools.islice(trainer._shuffled_batches(n, gen), total)


def expert_length(
    trainer: Trainer,
    arch: Arch,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_val: torch.Tensor,
    y_val: torch.Tensor,
    seed: int,
    base_steps: int,
    rule: ValidationLength,
    init_state: dict[str, torch.Tensor] | None = None,
    keep_best_state: bool = False,
) -> LengthChoice:
    """Track the validation NLL of `arch` trained on (x_train, y_train) as `Trainer.fit`
    would (same seed, initialisation, optimiser, schedule over the cap, batches), and
    choose its length (`rule`). `init_state`: fine-tune these weights instead (scored
    before the first step too); `keep_best_state`: return the weights at the chosen length
    in `best_state`."""
    if len(x_train) == 0 or len(x_val) == 0:
        raise ValueError("the validation-chosen length needs training and validation samples")
    cfg = trainer.config
    max_steps, every = rule.cap(base_steps)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = trainer.build(arch)
    if init_state is not None:
        model.load_state_dict(init_state)
    elif hasattr(model, "data_init"):
        model.data_init(x_train, gen)
    opt = make_optimizer(model.parameters(), cfg)
    model.train()
    batches = _batches(trainer, len(x_train), max_steps, gen)
    best = _BestWeights(model, keep_best_state)
    amp = autocast(trainer.device, cfg, trainer.task.loss)

    def step(i: int) -> None:
        idx = next(batches)
        dev = x_train.device
        xb, yb = (x_train, y_train) if idx is None else (x_train[idx.to(dev)], y_train[idx.to(dev)])
        schedule_lr(opt, cfg, i, max_steps)
        with amp:
            out = model(trainer.to_model_layout(xb))
        loss = per_sample_nll(out.float(), yb, trainer.task.loss).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        clip_and_step(model.parameters(), opt, cfg)

    def val_loss() -> float:
        model.eval()
        with torch.no_grad():
            out = trainer.predict(model, x_val)
            nll = float(per_sample_nll(out, y_val, trainer.task.loss).double().mean())
        best.offer(nll, out)
        model.train()
        return nll

    tracked = track_validation(
        step, val_loss, max_steps, every, rule.patience, eval_start=init_state is not None
    )
    choice = _choice(rule, tracked, max_steps, every, len(x_train), len(x_val))
    choice.best_state = best.weights()
    choice.val_output = best.output
    return choice


def adam_length(
    model: nn.Module,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_val: torch.Tensor,
    y_val: torch.Tensor,
    seed: int,
    base_steps: int,
    rule: ValidationLength,
    make_step: Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Generator], Callable],
    loss: str = "student_t",
    keep_best_state: bool = False,
) -> LengthChoice:
    """The same for a ready-built network trained by `make_step(model, x, y, generator)`
    (which returns a one-step function); `model` itself is not touched (a deep copy
    trains), so the retraining starts from the same initial weights. `keep_best_state`:
    return the copy's weights at the chosen length in `best_state`."""
    if len(x_train) == 0 or len(x_val) == 0:
        raise ValueError("the validation-chosen length needs training and validation samples")
    max_steps, every = rule.cap(base_steps)
    net = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    net.train()
    one_step = make_step(net, x_train, y_train, gen)

    best = _BestWeights(net, keep_best_state)

    def val_loss() -> float:
        net.eval()
        with torch.no_grad():
            nll = float(per_sample_nll(net(x_val), y_val, loss).double().mean())
        best.offer(nll)
        net.train()
        return nll

    tracked = track_validation(lambda i: one_step(), val_loss, max_steps, every, rule.patience)
    choice = _choice(rule, tracked, max_steps, every, len(x_train), len(x_val))
    choice.best_state = best.weights()
    return choice


class _BestWeights:
    """A copy of `model`'s weights at the lowest finite validation loss offered so far (both
    tracking loops keep one when asked: the global network's, or a network kept unrefitted);
    `weights()` falls back to the current weights when no loss was finite. The validation
    outputs offered with that loss are always kept (`output`, float64 on the CPU)."""

    def __init__(self, model: nn.Module, enabled: bool) -> None:
        self.model, self.enabled = model, enabled
        self.loss = math.inf
        self.state: dict[str, torch.Tensor] | None = None
        self.output: np.ndarray | None = None

    def _copy(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def offer(self, loss: float, output: torch.Tensor | None = None) -> None:
        """`loss` (and the outputs it was scored on) at one evaluation; kept if the best."""
        if not (math.isfinite(loss) and loss < self.loss):  # track_validation's rule
            return
        self.loss = loss
        if self.enabled:
            self.state = self._copy()
        if output is not None:
            self.output = output.double().cpu().numpy()

    def weights(self) -> dict[str, torch.Tensor] | None:
        if not self.enabled:
            return None
        return self.state or self._copy()


def _choice(rule, tracked: tuple, max_steps: int, every: int, n_train: int, n_val: int):
    """The `LengthChoice` of a tracked validation curve (one place for both loops)."""
    best_step, best, done, curve = tracked
    return LengthChoice(
        best_step,
        rule.refit_steps(best_step, n_train, n_val),
        best,
        max_steps,
        every,
        n_train,
        n_val,
        done,
        curve,
    )
