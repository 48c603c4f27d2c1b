"""One final expert, retrained: the job a worker needs, what comes back, and the loop.

Every network of a cluster-gated MoE's final protocol goes through `fit_expert`: an expert
on its region, the finalists' second look (its tracking runs only), and the global networks
that warm-started experts fine-tune (`sgem.final.warm_start`). `fit_expert_jobs` runs a list
of them side by side on a processes executor's workers, or here, with the same numbers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask
from ..execution.progress import stage_bar
from ..moe.averaged import AveragedExpert
from ..space.arch import Arch
from ..train.time_fence import fence, fence_passed, training_fence
from ..train.trainer import Trainer
from .length import LengthChoice, ValidationLength, expert_length

#: a final expert whose training the budget's fence stopped before this share of its steps
#: (with no tracked network to keep instead) is untrained: the leaderboard gives the MoE no
#: weight in the saved model. Why: a 2-minute fit of 120 daily weather series (6.6 s a
#: candidate) reached its final stage past the fence; its experts got 1 of 100 steps, and
#: the saved MoE forecast temperatures near 33 degrees at 0-2 (MASE 3.16 for the MoE alone,
#: AutoETS 1.34)
MIN_TRAINED_FRACTION = 0.2


def steps_for_epochs(n_samples: int, epochs: float, batch_size: int | None) -> int:
    """Optimiser steps that make `epochs` passes over `n_samples` in minibatches."""
    if epochs <= 0:
        raise ValueError(f"epochs must be > 0, got {epochs}")
    bs = batch_size or n_samples
    return max(1, math.ceil(epochs * n_samples / min(bs, n_samples)))


@dataclass(frozen=True)
class WarmStart:
    """Where a warm-started expert starts: a global network of its cell.

    `track_state`: the global network at its validation-chosen length, trained on the
    training samples only (the expert's tracking run fine-tunes it, so the length it picks
    never saw validation data); `refit_state`: the global network refitted on train +
    validation (the final expert fine-tunes it for that length)."""

    track_state: dict[str, torch.Tensor]
    refit_state: dict[str, torch.Tensor]
    length: dict | None = None  # the global network's tracking run (its summary)


@dataclass(frozen=True)
class ExpertJob:
    """One expert of the final MoE to retrain: all a worker needs besides the task."""

    index: int
    arch: Arch
    region: np.ndarray  # (M,) bool: the clusters routed to this expert
    seed: int
    steps: int
    epochs: float | None
    rule: ValidationLength | None
    #: only the tracking run (no retraining): what the finalists' second look measures
    track_only: bool = False
    #: a tracking run already made for this (arch, region, seed) (`LengthChoice.to_json()`):
    #: retrain for its length without tracking again
    known_length: dict | None = None
    #: fine-tune a global network of the cell instead of starting from scratch
    init: WarmStart | None = None
    #: send back the tracking run's weights at the chosen length (a global network's)
    keep_track_state: bool = False
    #: a final expert under `rule.twins`: shipped as its refit and its tracked network
    #: averaged (`sgem.moe.averaged`); `known_state`: the tracked weights of the `known_length`
    #: run (the second look's), where this job does not track again
    twin: bool = False
    known_state: dict[str, torch.Tensor] | None = None
    #: a wall-clock time (`time.time()`) this job's trainings stop at, besides the budget's
    #: fence, in whichever process runs it (`sgem.final.seed_rounds`: a round's end)
    stop_at: float | None = None


@dataclass
class ExpertFit:
    """A retrained expert: the module (in this process) or its weights (from a worker),
    its step count and, with a validation-chosen length, the tracking run's summary (and,
    when the job asked, the tracking run's weights at that length)."""

    steps: int
    length: dict | None
    module: nn.Module | None = None
    state: dict[str, torch.Tensor] | None = None
    track_state: dict[str, torch.Tensor] | None = None
    #: the tracking run's outputs on the region's validation samples at the chosen length
    #: (`LengthChoice.val_output`): the expert's out-of-sample validation predictions
    val_output: np.ndarray | None = None
    #: a twin's tracked network (`ExpertJob.twin`): the expert is both, averaged
    twin_state: dict[str, torch.Tensor] | None = None
    #: the fence cut its training short: {"steps": made, "of": asked}
    cut: dict | None = None

    def portable(self) -> ExpertFit:
        """The weights on the CPU instead of the module, to send between processes."""
        track = _cpu(self.track_state) if self.track_state is not None else None
        twin = _cpu(self.twin_state) if self.twin_state is not None else None
        # a tracking run only has no module: nothing to send but its summary
        state = self.state if self.module is None else _cpu(self.module.state_dict())
        return ExpertFit(
            self.steps,
            self.length,
            state=state,
            track_state=track,
            val_output=self.val_output,
            twin_state=twin,
            cut=self.cut,
        )

    def weights(self) -> dict[str, torch.Tensor]:
        """The retrained weights, on the CPU (what a warm start fine-tunes)."""
        if self.module is not None:
            return _cpu(self.module.state_dict())
        assert self.state is not None, "a tracking-only fit has no retrained weights"
        return self.state

    def materialise(self, trainer: Trainer, arch: Arch) -> tuple[nn.Module, int, dict | None]:
        module = self.module
        if module is None:
            assert self.state is not None
            module = _loaded(trainer, arch, self.state)
        if self.twin_state is not None:  # the refit and the tracked network, averaged
            tracked = _loaded(trainer, arch, self.twin_state).eval()
            module = AveragedExpert([module, tracked], trainer.task.loss)
        return module, self.steps, self.length


def _loaded(trainer: Trainer, arch: Arch, state: dict[str, torch.Tensor]) -> nn.Module:
    """A network of `arch` on the trainer's device holding `state`."""
    with torch.random.fork_rng(devices=[]):  # building draws throwaway weights
        module = trainer.build(arch)
    module.load_state_dict(state)
    return module


def _cpu(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu() for k, v in state.items()}


def train_val_tensors(task: ClusteredTask, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Train + validation inputs and targets, concatenated in that order, on `device`."""
    x = torch.as_tensor(np.concatenate([task.train.x, task.val.x]), dtype=torch.float32)
    y = torch.as_tensor(np.concatenate([task.train.y, task.val.y]))
    return x.to(device), y.to(device)


def fit_expert(
    task: ClusteredTask,
    trainer: Trainer,
    job: ExpertJob,
    data: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> ExpertFit:
    """Retrain one expert on its region of train + validation: the fixed length, or the
    length its validation tracking run chose (`job.rule`); from scratch, or fine-tuning
    `job.init`; stopped at `job.stop_at` where it is set."""
    if job.stop_at is None:
        return _fit_expert(task, trainer, job, data)
    at = fence()
    with training_fence(job.stop_at if at is None else min(at, job.stop_at)):
        return _fit_expert(task, trainer, job, data)


def _fit_expert(
    task: ClusteredTask,
    trainer: Trainer,
    job: ExpertJob,
    data: tuple[torch.Tensor, torch.Tensor] | None,
) -> ExpertFit:
    x, y = data if data is not None else train_val_tensors(task, trainer.device)
    c = np.concatenate([task.train.cluster, task.val.cluster])
    sel = torch.as_tensor(job.region[c], device=trainer.device)
    k_steps = (
        job.steps
        if job.epochs is None
        else steps_for_epochs(int(sel.sum()), job.epochs, trainer.config.batch_size)
    )
    keep_tracked = job.rule is not None and not job.rule.refit
    # without a refit the final network is the tracked one: track again to have its weights
    length = None if keep_tracked else job.known_length
    track_state, val_output = (job.known_state if length is not None else None), None
    tracked_steps: int | None = None  # set where the refit is skipped: the tracked length
    if length is None and job.rule is not None:
        began = time.perf_counter()
        choice = _validation_length(task, trainer, job, x, y)
        if choice is not None:
            length, track_state = choice.to_json(), choice.best_state
            val_output = choice.val_output
            late = not _refit_ends_in_time(length, time.perf_counter() - began)
            if late and track_state is not None and job.init is None and not keep_tracked:
                keep_tracked, tracked_steps = True, int(length["best_step"])
                length["refit_skipped"] = "it would not end before the time budget's fence"
    if length is not None:
        k_steps = int(length["refit_steps"])
    elif job.init is not None:  # nothing to choose a fine-tuning length on: keep the start
        k_steps = 0
    kept = track_state if job.keep_track_state else None  # (sent back where asked for)
    if job.track_only:
        return ExpertFit(k_steps, length, track_state=kept, val_output=val_output)
    if keep_tracked and track_state is not None:  # the tracked network is the final one
        # (also where a refit from scratch would be cut at the budget's fence before its
        # length: it would end less trained than the tracked network, or barely trained)
        steps = k_steps if tracked_steps is None else tracked_steps
        return ExpertFit(steps, length, state=track_state, track_state=kept, val_output=val_output)
    init = job.init.refit_state if job.init is not None else None
    done = _StepCount()
    module = trainer.fit(
        job.arch, x[sel], y[sel], seed=job.seed, steps=k_steps, init_state=init, monitor=done
    )
    if done.steps < k_steps and fence_passed() and track_state is not None and length:
        # the fence cut the refit mid-schedule (its learning rate still high, its weights
        # between the start and the length): the tracked network is the better one (a
        # 5-minute fit of 174 M3 "other" series shipped experts fine-tuned from a cut
        # refit, holdout CRPS 0.136 against 0.030 on validation)
        cut = f"the time budget's fence stopped it after {done.steps} steps"
        length = {**length, "refit_cut": cut}  # (a copy: a known length is the second look's)
        steps = int(length.get("best_step", k_steps))
        return ExpertFit(steps, length, state=track_state, track_state=kept, val_output=val_output)
    cut_short = {"steps": done.steps, "of": k_steps} if done.steps < k_steps else None
    twin = None
    if job.twin and track_state is not None and length:
        twin = track_state  # (the record copied: a known length is the second look's)
        length = {**length, "twin": "averaged with its tracked network (sgem.moe.averaged)"}
    return ExpertFit(
        done.steps if cut_short else k_steps,
        length,
        module=module,
        track_state=kept,
        val_output=val_output,
        twin_state=twin,
        cut=cut_short,
    )


class _StepCount:
    """A `Trainer` monitor that counts the optimiser steps a training made (a fence may cut
    it short of what it was asked for)."""

    def __init__(self) -> None:
        self.steps = 0

    def __call__(self, model: nn.Module, steps_done: int, total: int) -> bool:
        self.steps = steps_done
        return False


def _refit_ends_in_time(length: dict, tracked_seconds: float) -> bool:
    """Whether a refit of `length["refit_steps"]` steps ends before the time budget's fence,
    at the tracking run's seconds per step (always, without a fence)."""
    at = fence()
    if at is None:
        return True
    per_step = tracked_seconds / max(int(length.get("stopped_at") or 1), 1)
    return time.time() + per_step * int(length["refit_steps"]) <= at


def fit_expert_jobs(
    task: ClusteredTask,
    trainer: Trainer,
    jobs: list[ExpertJob],
    executor: object | None = None,
    desc: str = "experts",
) -> list[ExpertFit]:
    """Every job's `fit_expert`: side by side on the workers of an executor with
    `fit_experts` (the processes executor), here for any job that failed there or without
    one. The same numbers either way. `desc` names the stage's progress bar
    (`sgem.execution.progress`)."""
    fits: list[ExpertFit | None] = [None] * len(jobs)
    with stage_bar(len(jobs), desc) as bar:
        if executor is not None and len(jobs) > 1 and hasattr(executor, "fit_experts"):
            fits = executor.fit_experts(jobs, on_done=bar.update)  # None: failed there
        data = train_val_tensors(task, trainer.device) if any(f is None for f in fits) else None
        out: list[ExpertFit] = []
        for job, fit in zip(jobs, fits, strict=True):
            if fit is None:
                fit = fit_expert(task, trainer, job, data)
                bar.update()
            out.append(fit)
    return out


def _validation_length(
    task: ClusteredTask,
    trainer: Trainer,
    job: ExpertJob,
    x: torch.Tensor,
    y: torch.Tensor,
) -> LengthChoice | None:
    """The tracking run of one expert (`expert_length`) on its region's training samples
    (the first len(task.train) rows of x, y) against its validation samples; None when the
    region has no training or no validation sample. The cap is `rule.max_factor` times the
    fixed length (`steps`, or `epochs` passes over the region's training samples)."""
    assert job.rule is not None
    n_train = len(task.train)
    tr = torch.as_tensor(job.region[task.train.cluster], device=trainer.device)
    va = torch.as_tensor(job.region[task.val.cluster], device=trainer.device)
    if not tr.any() or not va.any():
        return None
    x_tr, y_tr = x[:n_train][tr], y[:n_train][tr]
    x_va, y_va = x[n_train:][va], y[n_train:][va]
    base = (
        job.steps
        if job.epochs is None
        else steps_for_epochs(len(x_tr), job.epochs, trainer.config.batch_size)
    )
    return expert_length(
        trainer,
        job.arch,
        x_tr,
        y_tr,
        x_va,
        y_va,
        job.seed,
        base,
        job.rule,
        init_state=job.init.track_state if job.init is not None else None,
        # (under a time budget also: where the refit cannot end in time, this is kept)
        keep_best_state=job.keep_track_state
        or job.twin
        or not job.rule.refit
        or fence() is not None,
    )
