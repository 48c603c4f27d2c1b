"""A finished run's calibration: honest validation predictions, the fit, the card's numbers.

Where the out-of-sample predictions come from. The final MoE is retrained on train +
validation, so its own validation residuals are in-sample (too small) and would calibrate
nothing. Instead each expert is trained once more, on its region's TRAINING samples only,
with the final protocol's own recipe (same cell, seed and length: the fixed step count, or
with a validation-chosen length the tracking run's best step count, fine-tuning the global
network of its cell trained on the training samples for its best step count with warm
starts), and predicts the validation samples it never saw. The corrections fitted on those
predictions (`sgem.moe.calibration`) are applied to the refitted model, as AutoGluon does
for its refit_full models: the refit saw more data, so if anything it is slightly better
than the networks calibrated, and the intervals err on the wide side. With a "-norefit"
length the final networks ARE trained on the training samples only, so they predict
validation directly and nothing is trained. With a validation-chosen length each expert's
own tracking run (its region's training samples, scored on validation at every evaluation)
already holds those predictions at the chosen length (`LengthChoice.val_output`): they are
used as they are and nothing is trained either (training again for the best step count
gave a network of the same data and length, at the cost of one more final retrain, which
under a time budget on series left no time for the leaderboard). Otherwise the extra
trainings cost about one final retrain on 80 % of the data (tiny for tables);
`FinalCalibration.seconds` reports it and result.json's timing carries it as "calibration".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..data.task import ClusteredTask, Split
from ..data.timeseries import validation_at_random
from ..execution.jobs import job_seed
from ..moe.calibration import (
    HOLDOUT_SOURCE,
    IntervalCalibration,
    clip_to_support,
    coverage,
    expected_calibration_error,
    fit_probability_calibration,
    fit_temperature,
    nll,
    probability_nll,
    softmax,
    support_of,
    t_quantiles,
    with_floor,
)
from ..moe.scoring import in_target_units
from ..random_streams import expert_seed
from ..space.arch import Arch
from ..train.step_probe import StepCost
from ..train.time_fence import fence_passed
from ..train.trainer import Trainer
from .expert_fit import steps_for_epochs
from .length import resolve_length
from .warm_start import needs_warm_start

#: the central interval the card reports
CARD_LEVEL = 0.8


@dataclass(frozen=True)
class FinalCalibration:
    """`state`: what model.json's info["calibration"] holds (plain numbers and strings);
    `report`: result.json's "calibration"; `units`: result.json's regression scores in the
    target's units (tables); `seconds`: what it all cost."""

    state: dict
    report: dict
    units: dict
    seconds: float

    def result_fields(self) -> dict:
        return {"calibration": self.report, **self.units}


def validation_outputs(
    task: ClusteredTask,
    trainer: Trainer,
    final,
    seed: int,
    length: str = "fixed",
    epochs: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-sample outputs of `final` (a `MethodResult`) on `task.val`, as float64
    (n_val, ...), and which validation samples have one (a region without training
    samples has none). See the module docstring for where they come from."""
    rule = resolve_length(length)
    if rule is not None and not rule.refit:  # the final networks never saw validation
        return split_outputs(final.moe, task.val, trainer.device), np.ones(len(task.val), bool)
    dev = trainer.device
    data = (
        torch.as_tensor(task.train.x, dtype=torch.float32, device=dev),
        torch.as_tensor(task.train.y, device=dev),
        torch.as_tensor(task.val.x, dtype=torch.float32, device=dev),
    )
    out: np.ndarray | None = None
    has = np.zeros(len(task.val), dtype=bool)
    starts: dict[str, dict] = {}
    for k, region, va in _validated_experts(task, final):
        pred = _kept_output(final, k, va)  # its tracking run's, as is
        if pred is None:
            pred = _train_only(task, trainer, final, seed, rule, epochs, k, region, data, starts)
        if out is None:
            out = np.zeros((len(task.val), *pred.shape[1:]))
        out[va], has[va] = pred, True
    if out is None:
        raise ValueError("no expert has both training and validation samples to calibrate on")
    return out, has


def _train_only(task, trainer, final, seed, rule, epochs, k, region, data, starts) -> np.ndarray:
    """Expert k trained once more on its region's training samples with the final protocol's
    recipe (`data`: train x, train y, validation x on the device; `starts`: the warm starts
    made so far, by cell); its outputs on the region's validation samples, float64."""
    dev, arch = trainer.device, final.architectures[k]
    x_tr, y_tr, x_va = data
    tr, va = region[task.train.cluster], region[task.val.cluster]
    steps, warm = _retrain_steps(task, trainer, final, rule, epochs, k, region)
    init = None
    if warm:
        if arch.key not in starts:
            starts[arch.key] = _global_state(task, trainer, final, arch, seed, x_tr, y_tr)
        init = starts[arch.key]
    sel = torch.as_tensor(tr, device=dev)
    net = trainer.fit(
        arch, x_tr[sel], y_tr[sel], seed=expert_seed(seed, k), steps=steps, init_state=init
    )
    with torch.no_grad():
        pred = trainer.predict(net.eval(), x_va[torch.as_tensor(va, device=dev)])
    return pred.double().cpu().numpy()


def retrains(task: ClusteredTask, final, length: str = "fixed") -> bool:
    """Whether `validation_outputs` must train a network (some expert's tracking run left
    no validation outputs): after the budget's fence it could not, and is not asked to."""
    rule = resolve_length(length)
    if rule is not None and not rule.refit:
        return False
    experts = _validated_experts(task, final)
    return any(_kept_output(final, k, va) is None for k, _, va in experts)


def _validated_experts(task: ClusteredTask, final):
    """(k, region, its validation mask) of every used expert whose region has training and
    validation samples: the experts with out-of-sample validation outputs."""
    assignment = np.asarray(final.assignment)
    for k in range(len(final.architectures)):
        region = assignment == k
        tr, va = region[task.train.cluster], region[task.val.cluster]
        if final.moe.used[k] and tr.any() and va.any():
            yield k, region, va


def _kept_output(final, k: int, va: np.ndarray) -> np.ndarray | None:
    """Expert k's tracking-run outputs on its validation samples, where the final stage
    kept them (`MoEReport.val_outputs`)."""
    kept = (final.report.val_outputs or [None] * (k + 1))[k]
    return kept if kept is not None and len(kept) == int(va.sum()) else None


def _retrain_steps(task, trainer, final, rule, epochs, k, region) -> tuple[int, bool]:
    """(optimiser steps, whether it fine-tunes its cell's global network) of expert k's
    retrain on its region's training samples (`_train_only`)."""
    report = final.report
    tracked = (report.final_length or [None] * (k + 1))[k]
    if tracked is not None:
        steps = int(tracked["best_step"])
    elif epochs is not None:
        n = int(region[task.train.cluster].sum())
        steps = steps_for_epochs(n, epochs, trainer.config.batch_size)
    else:
        steps = int(report.steps[k])
    warm = rule is not None and rule.warm_start and needs_warm_start(region)
    if warm and tracked is None:  # untracked: the start as is
        steps = 0
    return steps, bool(warm)


def _global_steps(final, arch) -> int:
    """The steps of `arch`'s global network that a warm-started retrain fine-tunes."""
    tracked = (final.report.global_networks or {}).get(arch.key)
    steps = int(tracked["best_step"]) if tracked else int(max(s or 0 for s in final.report.steps))
    return max(steps, 1)


def retrain_seconds(
    task: ClusteredTask,
    trainer: Trainer,
    final,
    length: str,
    epochs: float | None,
    cost_of: Callable[[Arch], StepCost],
) -> float:
    """What `validation_outputs` will train, in seconds: each expert's retrain on its
    region's training samples (and each warm start's global network once), at its cell's
    timed step cost `cost_of(cell)`; 0 where the final networks or their tracking runs
    already hold the outputs (`retrains`)."""
    rule = resolve_length(length)
    if rule is not None and not rule.refit:  # the final networks never saw validation
        return 0.0
    total, warmed = 0.0, set()
    for k, region, va in _validated_experts(task, final):
        if _kept_output(final, k, va) is not None:
            continue
        arch = final.architectures[k]
        steps, warm = _retrain_steps(task, trainer, final, rule, epochs, k, region)
        if warm and arch.key not in warmed:
            warmed.add(arch.key)
            total += cost_of(arch).seconds(_global_steps(final, arch))
        total += cost_of(arch).seconds(steps)
    return total


def _global_state(task, trainer, final, arch, seed, x_tr, y_tr) -> dict:
    """The global network of `arch` (every cluster) trained on the training samples for its
    tracking run's best step count: what a warm-started expert's tracking run fine-tuned."""
    every = np.ones(task.n_clusters, dtype=bool)
    steps = _global_steps(final, arch)
    net = trainer.fit(arch, x_tr, y_tr, seed=job_seed(seed, arch, every), steps=steps)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


@torch.no_grad()
def split_outputs(moe, split: Split, device) -> np.ndarray:
    """A cluster-gated MoE's outputs on a split (its clusters known), float64."""
    x = torch.as_tensor(split.x, dtype=torch.float32, device=device)
    out = moe.eval()(x, torch.as_tensor(split.cluster, device=device))
    return out.double().cpu().numpy()


def holdout_label(task: ClusteredTask) -> str:
    """What the test split is, in words for the model card. A forecaster's or a user's
    table's combination fits its weights there (`sgem.leaderboard.combining`); nothing else
    is fitted or chosen on it."""
    n = len(task.train) + len(task.val) + len(task.test)
    share = 100 * len(task.test) / max(n, 1)
    of = "the training file" if task.name in ("table", "series") else "the task's data"
    steps = np.shape(task.test.y)[1] if np.ndim(task.test.y) == 2 else 1
    if task.name in ("table", "series") or (task.loss == "student_t" and steps > 1):
        return (
            f"holdout: {share:.0f} % of {of} (no network or reference fitted or chosen on "
            "it; a saved combination's weights are)"
        )
    return f"holdout: {share:.0f} % of {of} (never used to fit or choose)"


def calibrate_final(
    task: ClusteredTask,
    trainer: Trainer,
    final,
    seed: int,
    *,
    length: str = "fixed",
    epochs: float | None = None,
    validation: tuple[np.ndarray, np.ndarray] | None = None,
) -> FinalCalibration:
    """Fit the calibration of `final` (a `MethodResult` of a cluster-gated MoE) and measure
    it on validation (before / after) and on the holdout (the test split). `validation`:
    its out-of-sample validation outputs and which samples have one, when already made
    (the leaderboard makes them); else they are made here."""
    start = time.perf_counter()
    test_out = split_outputs(final.moe, task.test, trainer.device)
    units = target_units(task, final, test_out)
    # one or two series: the validation windows overlap training windows and would make the
    # intervals too narrow; the holdout at the series' ends calibrates them
    on_holdout = validation_at_random(task)
    calibrating = task.test if on_holdout else task.val
    if on_holdout:
        validation = (test_out, np.ones(len(task.test), dtype=bool))
    elif validation is None:  # to be made here: training time is needed
        if fence_passed():  # a time budget's end: no time to train, the model stays raw
            why = "the time budget ended before it (no training time left)"
            return _skipped(task, why, units, start)
        validation = validation_outputs(task, trainer, final, seed, length, epochs)
        if fence_passed():  # its trainings were cut short: their predictions would mislead
            return _skipped(task, "the time budget ended during its trainings", units, start)
    val_out, has = validation
    val = calibrating.subset(np.flatnonzero(has))
    val_out = val_out[has]
    if task.loss == "cross_entropy":
        state, report = _probabilities(val, val_out, task.test, test_out)
    else:
        state, report = _intervals(task, val, val_out, test_out)
    seconds = time.perf_counter() - start
    source = (
        "the final networks (trained on the training split only)"
        if (rule := resolve_length(length)) is not None and not rule.refit
        else "each expert retrained on its region's training split only"
    )
    if on_holdout:  # (its holdout coverage is then in-sample)
        source = HOLDOUT_SOURCE
    report = {"source": source, "seconds": round(seconds, 3), **report}
    label = holdout_label(task)
    report["holdout"] = {"label": label, **report["holdout"]}
    state = {**state, "holdout": label, "target_units": units, "report": report}
    return FinalCalibration(state, report, units, seconds)


def target_units(task: ClusteredTask, final, test_out: np.ndarray | None = None) -> dict:
    """A table regression's holdout scores of `final` (and its reference networks) in the
    target's units; {} for other tasks. `test_out`: its holdout outputs, if at hand."""
    target = task.meta.get("target_standardisation")
    if not target or task.loss != "student_t":
        return {}
    if test_out is None:
        test_out = split_outputs(final.moe, task.test, next(final.moe.parameters()).device)
    std = float(target["std"])
    units = in_target_units(final.report.to_json(), test_out, task.test.y, std)
    return units | _references_in_units(final.report.global_networks_test, std)


def _references_in_units(references: dict | None, std: float) -> dict:
    """The reference networks' RMSE and CRPS in the target's units too, so the card
    compares like with like."""
    if not references:
        return {}
    names = ("test_rmse", "test_crps", "test_crps_closed_form")
    return {
        "global_networks_test": {
            key: {k: (v * std if k in names and v is not None else v) for k, v in ref.items()}
            for key, ref in references.items()
        }
    }


def _skipped(task: ClusteredTask, why: str, units: dict, start: float) -> FinalCalibration:
    """No calibration (the model keeps its raw outputs, as a model saved before it did)."""
    seconds = time.perf_counter() - start
    report = {"skipped": why, "seconds": round(seconds, 3)}
    state = {"holdout": holdout_label(task), "target_units": units, "report": report}
    return FinalCalibration(state, report, units, seconds)


def _probabilities(val: Split, val_out, test: Split, test_out) -> tuple[dict, dict]:
    """The temperature and floor (`fit_probability_calibration`), and how calibrated the
    probabilities are before and after: ECE, and the NLL raw, with the temperature only
    and calibrated (what the floor adds)."""
    temperature, floor = fit_probability_calibration(val_out, val.y)
    alone = fit_temperature(val_out, val.y)

    def scores(split: Split, logits) -> dict:
        raw, calibrated = softmax(logits), with_floor(softmax(logits, temperature), floor)
        return {
            "n": len(split),
            "ece_15": {
                "raw": expected_calibration_error(raw, split.y),
                "calibrated": expected_calibration_error(calibrated, split.y),
            },
            "nll": {
                "raw": nll(logits, split.y),
                "temperature_only": nll(logits / alone, split.y),
                "calibrated": probability_nll(calibrated, split.y),
            },
        }

    report: dict = {"temperature": temperature, "floor": floor, "temperature_only": alone}
    report["validation"] = scores(val, val_out)
    report["holdout"] = scores(test, test_out)
    return {"temperature": temperature, "floor": floor}, report


def _intervals(task, val: Split, val_out, test_out) -> tuple[dict, dict]:
    loc, scale, df = (val_out[..., i] for i in range(3))
    cal = IntervalCalibration.fit(val.y, loc, scale, df, val.cluster)
    target = task.meta.get("target_standardisation")
    state: dict = {"intervals": cal.to_json()}
    if target:  # a table: the support of the target in its own units
        y_fit = np.concatenate([task.train.y, task.val.y]).astype(np.float64)
        state["support"] = support_of(y_fit * target["std"] + target["mean"])
    names = task.meta.get("domain_names")
    by_domain = task.name != "table" and val.source is not None

    def card(split: Split, out: np.ndarray) -> dict:
        group = None
        if by_domain and split.source is not None:
            group = np.asarray([names[int(s)] if names else int(s) for s in split.source])
        entry: dict = {"n": len(split)}
        for kind, c in (("raw", None), ("calibrated", cal)):
            qs = (0.5 - CARD_LEVEL / 2, 0.5 + CARD_LEVEL / 2)
            q = t_quantiles(out[..., 0], out[..., 1], out[..., 2], qs, split.cluster, c)
            lo, hi = q[qs[0]], q[qs[1]]
            if c is not None:
                lo, hi = _clipped(task, split, lo, state), _clipped(task, split, hi, state)
            entry.setdefault("coverage_80", {})[kind] = coverage(
                split.y, lo, hi, split.cluster, "cluster"
            ) | (coverage(split.y, lo, hi, group, "domain") if by_domain else {})
        return entry

    report = {"validation": card(val, val_out), "holdout": card(task.test, test_out)}
    return state, report


def _clipped(task, split: Split, values: np.ndarray, state: dict) -> np.ndarray:
    """Values in model units clipped as the saved model clips them: a table at its
    target's support, a window at 0 when its context is never below 0."""
    target = task.meta.get("target_standardisation")
    if target:
        mean, std = float(target["mean"]), float(target["std"])
        return (clip_to_support(values * std + mean, state.get("support")) - mean) / std
    nonneg = (split.x.reshape(len(split), -1) >= 0).all(1)
    return np.where(nonneg.reshape((-1,) + (1,) * (values.ndim - 1)), np.maximum(values, 0), values)


__all__ = [
    "CARD_LEVEL",
    "FinalCalibration",
    "calibrate_final",
    "holdout_label",
    "retrain_seconds",
    "split_outputs",
    "validation_outputs",
]
