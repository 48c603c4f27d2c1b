"""More seeds of the final experts while a time budget has room for them.

Why: a budgeted fit prices its final stage before it runs, and the price is off by up to 2x
either way, so a fit often ends with a third or half of its budget unused (a 5-minute fit
of the M3 quarterly file ended at 147 s). The cheapest sure gain left is a seed ensemble:
the final MoE's experts trained again with other seeds and averaged (`sgem.moe.averaged`).
Measured on a 2-minute fit of the 174 M3 "other" series (its own holdout windows), three
final stages with seeds 0, 1, 2 scored MASE 0.829 / 0.805 / 0.806 alone, 0.789 with two
averaged and 0.788 with three; on the yearly file 3.61 / 3.52 / 3.45 alone, 3.49 and 3.45
averaged (wQL and NLL alike).

A round needs no tracking run: the lengths the final stage chose on validation are known,
so every network of a round is a refit on train + validation for that length, scaled to
the larger data (`ValidationLength.refit_steps`), with another seed:

1. each warm-started cell's global network is refitted from scratch (a new start);
2. each expert fine-tunes its cell's new global network (from scratch where the expert
   had no warm start) and joins its expert's average.

Rounds run while the next one (priced at what the last took, the first at its share of
the final stage's seconds, of which half must fit: `FIRST_ROUND_PRICE_SHARE`) ends before
`until`; the trainings of a round stop at `until`
(`ExpertJob.stop_at`, on the workers too), and a round cut there is dropped whole. An
expert holds at most `MAX_NETWORKS` networks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from torch import nn

from ..data.task import ClusteredTask
from ..execution.jobs import job_seed
from ..methods.result import MethodResult
from ..moe.averaged import MAX_NETWORKS, AveragedExpert, n_networks
from ..moe.cluster_gated import ClusterGatedMoE
from ..random_streams import expert_seed
from ..space.arch import Arch
from ..train.time_fence import fence_passed
from ..train.trainer import Trainer
from .expert_fit import ExpertJob, WarmStart, fit_expert_jobs
from .length import ValidationLength
from .moe_fit import MoEReport, rescored
from .warm_start import needs_warm_start

log = logging.getLogger(__name__)

#: a round is started only where this many times its expected seconds fit before `until`
SAFETY = 1.2
#: ... the first where this share of its price does. Its price (its share of the final
#: stage's steps times the stage's seconds) counts work no round repeats - the tracking
#: runs' validation passes, second looks, champion runs, scoring - and ran about 3x high on
#: the M3 yearly file at 5 minutes (priced 37 s, rounds took 13 s): with the full price, no
#: round ran on three of the four competition files. A round that does not end in time is
#: cut at `until` and dropped, which costs only time the final stage would have left unused
FIRST_ROUND_PRICE_SHARE = 0.5
#: the seed of round r is the run's seed plus r times this (far from every other seed's)
ROUND_SEED_STRIDE = 100_003
#: every network of a round: a refit on train + validation at a known, data-scaled length
_REFIT = ValidationLength(refit=True)


@dataclass(frozen=True)
class _Network:
    """One network of a round: its region, seed, length and (for experts) whose start."""

    index: int  # the expert (or, for a global network, the cell's position)
    arch: Arch
    region: np.ndarray
    steps: int  # optimiser steps on the region of train + validation
    warm: bool = False  # fine-tunes its cell's global network of this round


def add_seed_rounds(
    task: ClusteredTask,
    trainer: Trainer,
    final: MethodResult,
    *,
    until: float,
    executor: object | None = None,
) -> dict:
    """Add rounds of seeds to the experts of `final`'s MoE in place, until `until` (a
    `time.perf_counter()` value), and test it again (`final.report`, whose `seed_rounds`
    records the rounds, their seconds, the networks per expert and why they stopped). The
    first round is priced at its share of the final stage's seconds (`final.seconds`)."""
    assert final.moe is not None and final.report is not None, "seed rounds need a final MoE"
    started = time.perf_counter()
    moe, report = final.moe, final.report
    warm_start = report.global_networks is not None
    experts, globals_ = _round_plan(task, moe, report, warm_start)
    record: dict = {"rounds": 0, "seconds": 0.0, "holdout_nll_before": report.test_nll}
    stopped = f"every expert holds {MAX_NETWORKS} networks"
    room = min((MAX_NETWORKS - n_networks(moe.experts[n.index]) for n in experts), default=0)
    if not experts:
        stopped = "no final expert has a length to train again"
    expected = final.seconds * _round_share(report, experts, globals_)
    record["first_round_priced_seconds"] = round(expected, 2)
    for r in range(1, max(room, 0) + 1):
        now = time.perf_counter()
        if now + (SAFETY if r > 1 else FIRST_ROUND_PRICE_SHARE) * expected > until:
            stopped = (
                f"the next round (about {expected:.0f} s) would not end before the final "
                f"stage's share of the time budget does ({max(until - now, 0.0):.0f} s left)"
            )
            break
        stop_at = time.time() + (until - now)  # (its trainings stop there, on any worker)
        round_seed = final.seed + ROUND_SEED_STRIDE * r
        trained = _one_round(task, trainer, experts, globals_, round_seed, executor, r, stop_at)
        if fence_passed() or time.time() >= stop_at:
            stopped = "a round was cut at the time budget's fence (dropped)"
            break
        for k, network in trained.items():
            moe.experts[k] = AveragedExpert([moe.experts[k], network], task.loss)
        expected = time.perf_counter() - now
        record["rounds"] = r
    if record["rounds"]:
        report = rescored(task, trainer, moe, report, final.crps_samples, final.seed)
        log.info(
            "time budget: %d more seed(s) of every final expert in %.0f s (holdout NLL "
            "%.4g -> %.4g)",
            record["rounds"],
            time.perf_counter() - started,
            record["holdout_nll_before"],
            report.test_nll,
        )
    record["holdout_nll_after"] = report.test_nll
    record["seconds"] = round(time.perf_counter() - started, 2)
    record["networks_per_expert"] = [
        n_networks(e) if used else 0 for e, used in zip(moe.experts, moe.used, strict=True)
    ]
    record["stopped"] = stopped
    final.report = replace(report, seed_rounds=record)
    return record


def _round_plan(
    task: ClusteredTask, moe: ClusterGatedMoE, report: MoEReport, warm_start: bool
) -> tuple[list[_Network], list[_Network]]:
    """(the experts of a round, the global networks they fine-tune): each at the length the
    final stage chose for it, as a refit on train + validation."""
    assignment = moe.assignment.cpu().numpy()
    archs = list(moe.architectures)
    lengths = report.final_length or [None] * len(archs)
    experts: list[_Network] = []
    warm_cells: dict[str, Arch] = {}
    for k, used in enumerate(moe.used):
        if not used or not (assignment == k).any():
            continue
        region = np.asarray(assignment == k)
        warm = warm_start and needs_warm_start(region) and lengths[k] is not None
        steps = _refit_steps(lengths[k], report.steps[k] if k < len(report.steps) else None)
        if steps is None or (steps == 0 and not warm):
            continue  # (no length known, or none trained: nothing to repeat)
        experts.append(_Network(k, archs[k], region, steps, warm=warm))
        if warm:
            warm_cells.setdefault(archs[k].key, archs[k])
    every = np.ones(task.n_clusters, dtype=bool)
    known = report.global_networks or {}
    globals_: list[_Network] = []
    for i, (key, arch) in enumerate(warm_cells.items()):
        steps = _refit_steps(known.get(key), None)
        if not steps:  # no global network length known: its experts' lengths mean nothing
            experts = [e for e in experts if e.arch.key != key]
            continue
        globals_.append(_Network(i, arch, every, steps))
    return experts, globals_


def _refit_steps(length: dict | None, fixed: int | None) -> int | None:
    """The steps of a refit on train + validation at a chosen length (`length`: a tracking
    run's record), or the fixed length an expert trained (`fixed`); None if neither."""
    if length is None or "best_step" not in length:
        return fixed if fixed else None
    return _REFIT.refit_steps(
        int(length["best_step"]), int(length["n_train"]), int(length["n_val"])
    )


def _round_share(
    report: MoEReport, experts: Sequence[_Network], globals_: Sequence[_Network]
) -> float:
    """A round's steps as a share of the steps the final stage trained (its tracking runs,
    refits and global networks; the second look's and champion's runs left out, so the
    first round is priced high rather than low)."""
    lengths = report.final_length or [None] * len(report.steps)
    records = [r for r in lengths if r]
    records += [r for r in (report.global_networks or {}).values() if r]
    stage = sum(int(r.get("stopped_at") or 0) + int(r.get("refit_steps") or 0) for r in records)
    stage += sum(s or 0 for s, r in zip(report.steps, lengths, strict=False) if not r)
    round_steps = sum(n.steps for n in experts) + sum(n.steps for n in globals_)
    return min(1.0, round_steps / stage) if stage > 0 else 1.0


def _one_round(
    task: ClusteredTask,
    trainer: Trainer,
    experts: list[_Network],
    globals_: list[_Network],
    seed: int,
    executor: object | None,
    r: int,
    stop_at: float,
) -> dict[int, nn.Module]:
    """One round's networks by expert index (global networks first, then the experts)."""
    starts: dict[str, WarmStart] = {}
    if globals_:
        jobs = [_job(n, job_seed(seed, n.arch, n.region), None, stop_at) for n in globals_]
        fits = fit_expert_jobs(task, trainer, jobs, executor, desc=f"seed round {r}: global")
        for n, fit in zip(globals_, fits, strict=True):
            state = fit.weights()
            starts[n.arch.key] = WarmStart(track_state=state, refit_state=state)
    jobs = [
        _job(n, expert_seed(seed, n.index), starts[n.arch.key] if n.warm else None, stop_at)
        for n in experts
    ]
    fits = fit_expert_jobs(task, trainer, jobs, executor, desc=f"seed round {r}: experts")
    return {
        n.index: fit.materialise(trainer, n.arch)[0].eval()
        for n, fit in zip(experts, fits, strict=True)
    }


def _job(network: _Network, seed: int, init: WarmStart | None, stop_at: float) -> ExpertJob:
    """A refit of `network.steps` steps (a known length, so no tracking run)."""
    known = {"refit_steps": network.steps, "best_step": network.steps}
    return ExpertJob(
        network.index,
        network.arch,
        network.region,
        seed,
        network.steps,
        None,
        _REFIT,
        known_length=known,
        init=init,
        stop_at=stop_at,
    )


__all__ = ["add_seed_rounds"]
