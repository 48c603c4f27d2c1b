"""Reference networks: one network of each expert's cell trained on ALL clusters, scored on
the same test samples as the MoE.

Why: the question every user of a routed model asks is what the experts' specialisation
bought over one network of the same kind. With warm starts (`sgem.final.warm_start`) those
networks exist already (each expert fine-tuned its cell's global network), so scoring them
is free; on tabular tasks training them is cheap, so `sgem run` / `sgem fit` train them
under the final protocol's length rule. They are never used for a choice: test is still
seen once by the model, and the reference is reported beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch
from torch import nn

from ..data.task import ClusteredTask
from ..execution.jobs import job_seed
from ..moe.scoring import score_outputs
from ..space.arch import Arch
from ..space.tabular import TabularSpace
from ..train.trainer import Trainer
from .expert_fit import ExpertJob, WarmStart, fit_expert_jobs
from .length import resolve_length

if TYPE_CHECKING:
    from ..search.sgem import SearchResult


class _Reported(Protocol):
    """A final stage's report (`cluster_gated.MoEReport`), as far as references go."""

    global_networks_test: dict[str, dict] | None


_KEYS = ("test_nll", "test_crps", "test_accuracy")


def score_networks(
    task: ClusteredTask,
    trainer: Trainer,
    networks: dict[str, nn.Module],
    crps_samples: int = 100,
    seed: int = 0,
) -> dict[str, dict]:
    """Each network (by cell key) on every test sample: test NLL, CRPS and accuracy."""
    x_test = torch.as_tensor(task.test.x, dtype=torch.float32, device=trainer.device)
    zeros = np.zeros(len(task.test.y), dtype=int)
    out: dict[str, dict] = {}
    for key, net in networks.items():
        with torch.no_grad():
            pred = net.to(trainer.device).eval()(x_test)
        scores = score_outputs(
            pred, task.test.y, task.loss, zeros, 1, crps_samples=crps_samples, seed=seed
        )
        out[key] = {k: scores[k] for k in _KEYS if scores[k] is not None}
    return out


def warm_start_networks(
    trainer: Trainer, cells: Sequence[Arch], starts: dict[str, WarmStart]
) -> dict[str, nn.Module]:
    """The global networks warm-started experts fine-tuned (refitted on train + validation)."""
    out: dict[str, nn.Module] = {}
    for arch in dict.fromkeys(cells):
        with torch.random.fork_rng(devices=[]):  # building draws throwaway weights
            net = trainer.build(arch)
        net.load_state_dict(starts[arch.key].refit_state)
        out[arch.key] = net
    return out


def reference_networks(
    task: ClusteredTask,
    trainer: Trainer,
    cells: Sequence[Arch],
    seed: int,
    *,
    steps: int,
    epochs: float | None = None,
    length: str = "fixed",
    crps_samples: int = 100,
    executor: object | None = None,
) -> dict[str, dict]:
    """Train one network of each distinct cell on every cluster of train + validation with
    the final protocol's length rule (as an expert whose region is everything), and score
    it on test (`score_networks`)."""
    every = np.ones(task.n_clusters, dtype=bool)
    distinct = list(dict.fromkeys(cells))
    rule = resolve_length(length)
    if rule is not None and rule.warm_start:  # an all-cluster expert is never warm-started
        rule = resolve_length("validation")
    jobs = [
        ExpertJob(i, arch, every, job_seed(seed, arch, every), steps, epochs, rule)
        for i, arch in enumerate(distinct)
    ]
    fits = fit_expert_jobs(task, trainer, jobs, executor, desc="reference networks")
    pairs = zip(distinct, fits, strict=True)
    networks = {arch.key: fit.materialise(trainer, arch)[0] for arch, fit in pairs}
    return score_networks(task, trainer, networks, crps_samples, seed)


def add_references(
    report: _Reported,
    task: ClusteredTask,
    trainer: Trainer,
    found: SearchResult,
    seed: int,
    **protocol,
) -> None:
    """Set `report.global_networks_test` for a run without warm starts on a table (the
    experts' cells of `found`, trained with `reference_networks(**protocol)`); other runs
    keep what the final stage scored (warm starts) or nothing (training would be costly)."""
    if report.global_networks_test is not None or not isinstance(trainer.space, TabularSpace):
        return
    used = sorted(set(np.asarray(found.assignment).tolist()))
    cells = [found.architectures[k] for k in used]
    report.global_networks_test = reference_networks(task, trainer, cells, seed, **protocol)


__all__ = ["add_references", "reference_networks", "score_networks", "warm_start_networks"]
