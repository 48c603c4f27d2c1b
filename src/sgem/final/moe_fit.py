"""The final stage's retrain: a cluster-gated MoE's experts trained on train + validation,
tested once.

Every method of the benchmarks that routes by clusters (SGEM and the cluster-gated
baselines) goes through `sgem.final.run_final` and so `train_final_moe`, so they differ
only in routing and architectures, never in training.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask
from ..moe.cluster_gated import ClusterGatedMoE
from ..moe.scoring import method_scores
from ..random_streams import expert_seed
from ..space.arch import Arch
from ..train.trainer import Trainer
from .expert_fit import MIN_TRAINED_FRACTION, ExpertJob, WarmStart, fit_expert_jobs
from .length import ValidationLength, resolve_length
from .reference import score_networks, warm_start_networks
from .warm_start import global_starts, needs_warm_start


@dataclass
class MoEReport:
    """Test scores of the final model. CRPS fields are set for "student_t" tasks only.

    `test_crps` is the sample-based CRPS (the paper's metric), `test_crps_closed_form` the
    exact Student-t CRPS of the same predictions (agrees within sampling error);
    `per_domain_test_nll` is keyed by domain id when the test split carries sources (an
    evaluation breakdown: the model never sees them).
    """

    test_accuracy: float | None
    test_nll: float
    per_expert_test_accuracy: list[float | None]
    seconds: float
    test_crps: float | None = None
    test_crps_closed_form: float | None = None
    per_domain_test_nll: dict[int, float] = field(default_factory=dict)
    steps: list[int | None] = field(default_factory=list)
    test_rmse: float | None = None  # of the Student-t location, in the model's target units
    final_length: list[dict | None] | None = None  # per expert, with length="validation"
    forecast: dict | None = None  # MASE / wQL in original units (forecasting tasks)
    #: with warm starts: the global network of each cell (its tracking run's summary)
    global_networks: dict[str, dict | None] | None = None
    #: with warm starts: each cell's global network alone (no experts) scored on the same
    #: test samples, a reference for what the experts' specialisation bought; never used
    #: for any choice
    global_networks_test: dict[str, dict] | None = None
    #: the raw 80 % interval's coverage of the test targets (Student-t outputs)
    test_coverage_80: float | None = None
    #: the MoE's raw test outputs (model units), what `MethodResult.row` scores; not saved
    output: torch.Tensor | None = field(default=None, repr=False, compare=False)
    #: per expert, its tracking run's outputs on its region's validation samples (None
    #: where it had none); `sgem.final.calibration.validation_outputs` uses them; not saved
    val_outputs: list[np.ndarray | None] | None = field(default=None, repr=False, compare=False)
    #: under a time budget: the seeds added to every expert afterwards (`sgem.final.seed_rounds`)
    seed_rounds: dict | None = None
    #: experts whose training the budget's fence cut short, {expert: {"steps", "of"}}
    #: (`untrained_experts` says which are too short to ship)
    final_training_cut: dict[str, dict] | None = None

    def untrained_experts(self) -> list[int]:
        """The experts the fence stopped before `MIN_TRAINED_FRACTION` of their steps."""
        cut = self.final_training_cut or {}
        return sorted(int(k) for k, c in cut.items() if c["steps"] < MIN_TRAINED_FRACTION * c["of"])

    def to_json(self) -> dict:
        extra: dict = {}
        if self.test_coverage_80 is not None:
            extra["test_coverage_80"] = self.test_coverage_80
        if self.final_length is not None:
            extra["final_length"] = self.final_length
        if self.global_networks is not None:
            extra["global_networks"] = self.global_networks
        if self.global_networks_test is not None:
            extra["global_networks_test"] = self.global_networks_test
        if self.forecast is not None:
            extra["forecast"] = self.forecast
        if self.seed_rounds is not None:
            extra["seed_rounds"] = self.seed_rounds
        if self.final_training_cut:
            extra["final_training_cut"] = self.final_training_cut
        return extra | {
            "test_accuracy": self.test_accuracy,
            "test_nll": self.test_nll,
            "test_crps": self.test_crps,
            "test_crps_closed_form": self.test_crps_closed_form,
            "per_domain_test_nll": {str(k): v for k, v in self.per_domain_test_nll.items()},
            "per_expert_test_accuracy": self.per_expert_test_accuracy,
            "test_rmse": self.test_rmse,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
        }


def train_final_moe(
    task: ClusteredTask,
    trainer: Trainer,
    assignment: np.ndarray,
    architectures: list[Arch],
    steps: int,
    seed: int,
    epochs: float | None = None,
    crps_samples: int = 100,
    length: str | ValidationLength = "fixed",
    executor: object | None = None,
    known_lengths: list[dict | None] | None = None,
    starts: dict[str, WarmStart] | None = None,
    known_outputs: list[np.ndarray | None] | None = None,
    known_states: list[dict | None] | None = None,
) -> tuple[ClusterGatedMoE, MoEReport]:
    """Retrain each expert from scratch on its region of train + validation; test once.

    `executor`: one with `fit_experts` (the processes executor) trains the experts side by
    side on its workers, with the same numbers as training them here one after another.

    `length="fixed"` (default): every expert trains `steps` optimiser steps, or, with
    `epochs`, as many as make that many passes over its own region in minibatches of the
    trainer's batch size (the paper's "50 epochs": a small region then gets fewer steps,
    not more passes).

    `length="validation"` (or a `ValidationLength`): each expert's length is chosen on
    validation first (`sgem.final.length`): trained on its region's training samples
    with the validation NLL of its region's validation samples tracked up to 4x the fixed
    length, the best step count scaled by (n_train + n_val) / n_train is what the expert
    then trains on train + validation (same seed as the fixed protocol). The report's
    `steps` are those lengths, `final_length` the tracking runs. An expert whose region has
    no training or no validation sample keeps the fixed length. `known_lengths[k]`: expert
    k's tracking run was already made (the finalists' second look, `sgem.final.check`,
    same architecture, region and seed), so it is retrained for that length directly;
    `known_outputs[k]`: that tracking run's validation outputs (`report.val_outputs`);
    `known_states[k]`: its weights (the tracked half of a twin, with `twins`).

    A rule with `twins` ships each refitted expert as the average of its refit and its
    tracked network (`sgem.moe.averaged`; its `final_length` record says "twin").

    `length="validation-warm"`: the same, with every expert fine-tuning a global network of
    its cell (`sgem.final.warm_start`); `starts` are global networks already trained (by the
    second look), any missing cell's is trained here.

    Forecasting tasks also get MASE and wQL in original units (`report.forecast`,
    `sgem.forecast.task_test_scores`).
    """
    start = time.perf_counter()
    assignment = np.asarray(assignment)
    rule = resolve_length(length)
    c = np.concatenate([task.train.cluster, task.val.cluster])
    known = list(known_lengths) if known_lengths is not None else [None] * len(architectures)
    used = [
        k
        for k in range(len(architectures))
        if (assignment == k).any() and (assignment == k)[c].any()
    ]
    warm_start = rule is not None and rule.warm_start
    warm = [k for k in used if warm_start and needs_warm_start(assignment == k)]
    starts = dict(starts or {})
    missing = [architectures[k] for k in warm if architectures[k].key not in starts]
    if missing:
        assert rule is not None
        trained = global_starts(
            task, trainer, missing, seed, steps=steps, epochs=epochs, rule=rule, executor=executor
        )
        starts |= trained
    global_lengths = (
        {architectures[k].key: starts[architectures[k].key].length for k in warm} if warm else None
    )
    jobs = [
        ExpertJob(
            k,
            architectures[k],
            assignment == k,
            expert_seed(seed, k),
            steps,
            epochs,
            rule,
            known_length=known[k] if rule is not None else None,
            init=starts[architectures[k].key] if k in warm else None,
            twin=rule is not None and rule.twins,
            known_state=known_states[k] if known_states is not None else None,
        )
        for k in used
    ]
    fits = fit_expert_jobs(task, trainer, jobs, executor, desc="final experts")
    experts: list[nn.Module | None] = [None] * len(architectures)
    used_steps: list[int | None] = [None] * len(architectures)
    lengths: list[dict | None] = [None] * len(architectures)
    val_outputs: list[np.ndarray | None] = [None] * len(architectures)
    cut = {str(job.index): fit.cut for job, fit in zip(jobs, fits, strict=True) if fit.cut}
    for job, fit in zip(jobs, fits, strict=True):
        kept = known_outputs[job.index] if known_outputs is not None else None
        val_outputs[job.index] = fit.val_output if fit.val_output is not None else kept
        experts[job.index], used_steps[job.index], lengths[job.index] = fit.materialise(
            trainer, job.arch
        )
    moe = ClusterGatedMoE(experts, assignment, list(architectures)).to(trainer.device).eval()
    report = MoEReport(
        None,
        float("nan"),
        [],
        time.perf_counter() - start,
        steps=used_steps,
        final_length=lengths if rule is not None else None,
        val_outputs=val_outputs if rule is not None else None,
        global_networks=global_lengths,
        final_training_cut=cut or None,
        global_networks_test=score_networks(
            task,
            trainer,
            warm_start_networks(trainer, [architectures[k] for k in warm], starts),
            crps_samples,
            seed,
        )
        if warm
        else None,
    )
    return moe, rescored(task, trainer, moe, report, crps_samples, seed)


def rescored(
    task: ClusteredTask,
    trainer: Trainer,
    moe: ClusterGatedMoE,
    report: MoEReport,
    crps_samples: int,
    seed: int,
) -> MoEReport:
    """`report` with `moe`'s test scores and outputs (tested once: after the retrain, and
    again where seed rounds changed the experts, `sgem.final.seed_rounds`)."""
    assignment = moe.assignment.cpu().numpy()
    x_test = torch.as_tensor(task.test.x, dtype=torch.float32, device=trainer.device)
    c_test = torch.as_tensor(task.test.cluster, device=trainer.device)
    with torch.no_grad():
        out = moe.eval()(x_test, c_test)
    scores = method_scores(
        task,
        out,
        expert_of=assignment[task.test.cluster],
        n_experts=len(moe.experts),
        crps_samples=crps_samples,
        seed=seed,
    )
    return replace(
        report,
        test_accuracy=scores["test_accuracy"],
        test_nll=scores["test_nll"],
        per_expert_test_accuracy=scores["per_expert_test_accuracy"],
        test_crps=scores["test_crps"],
        test_crps_closed_form=scores["test_crps_closed_form"],
        per_domain_test_nll=scores["per_domain_test_nll"],
        test_rmse=scores["test_rmse"],
        test_coverage_80=scores["test_coverage_80"],
        output=out.detach().cpu(),
        forecast=scores["forecast"],
    )


__all__ = ["MoEReport", "rescored", "train_final_moe"]
