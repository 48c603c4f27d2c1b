"""The finalists' second look: partitions and architectures judged by the final protocol.

The return rule (`selection.finalise`) ranks finalists and architectures on candidate
trainings: a hundred-odd short steps. On forecasting mixtures that signal disagrees with
the final model (benchmarks/ts_diagnosis.py: within a region, the cells best after short
training were mostly the worst after the final one; fast learners that then overfit), and
the partition it prefers can lose to plain geometry once every expert is trained to its
validation-chosen length. So, when the final experts' length is chosen on validation, the
last decision is made with that very protocol:

1. contenders: the partition the return rule chose, then the geometry split (a finalist of
   the return rule), then the other finalists by measured objective, up to
   `final_check_partitions`;
2. for every contender's region, its `final_check_archs` architectures of lowest validation
   loss among the candidate trainings on exactly that region;
3. each (architecture, region) gets the final protocol's tracking run (trained on the
   region's training samples, validation NLL tracked, early stopping; `final.length`),
   with the seed its final expert would have;
4. the contender with the lowest total validation NLL (each region at its best
   architecture) wins, with those architectures; its tracking runs are handed to the final
   retrain, which then only refits on train + validation (no tracking run is made twice).

Validation samples are used for early stopping and for this choice alike. Measured on
ts-offline (benchmarks/results/ts_main_offline-check.*) that optimism was not small: the
check kept the partition, changed cells, and on the seed also run without it tested worse
(0.2807 vs 0.2617 NLL) at +50-60% wall clock, so it is off by default
(`SearchConfig.final_check_partitions`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.task import ClusteredTask
from ..final.expert_fit import ExpertJob, WarmStart, fit_expert_jobs
from ..final.length import ValidationLength
from ..final.warm_start import global_starts, needs_warm_start
from ..random_streams import expert_seed
from ..search.selection import canonical_partition, ranked_on_region
from ..search.store import ObservationStore
from ..space.arch import Arch
from ..train.trainer import Trainer


@dataclass
class FinalCheck:
    """What the second look chose, the tracking runs its final experts reuse, and why."""

    assignment: np.ndarray
    architectures: list[Arch]
    known_lengths: list[dict | None]  # per expert: its tracking run (None: none made)
    report: dict
    #: with warm starts: the global networks the tracking runs fine-tuned, for the retrain
    starts: dict[str, WarmStart] | None = None
    #: per expert: its tracking run's validation outputs (`LengthChoice.val_output`)
    known_outputs: list[np.ndarray | None] | None = None
    #: per expert, under `rule.twins`: its tracking run's weights (the twin's tracked half)
    known_states: list[dict | None] | None = None


def contenders(selection: dict, n_partitions: int) -> list[tuple[int, ...]]:
    """The chosen finalist, the geometry split, then the other finalists by measured
    objective (best first), as partitions with labels aligned to the final iterate; at
    most `n_partitions`, no grouping twice."""
    rows = selection.get("finalists") or []
    chosen = [r for r in rows if r.get("chosen")]
    geometry = [r for r in rows if r.get("geometry") and not r.get("chosen")]
    rest = sorted(
        (r for r in rows if not r.get("chosen") and not r.get("geometry")),
        key=lambda r: np.inf if r["measured_objective"] is None else -r["measured_objective"],
    )
    out: list[tuple[int, ...]] = []
    seen: set[tuple[int, ...]] = set()
    for row in [*chosen, *geometry, *rest]:
        partition = tuple(int(v) for v in row["partition"])
        if canonical_partition(partition) not in seen:
            seen.add(canonical_partition(partition))
            out.append(partition)
    return out[:n_partitions]


def ranked_architectures(
    store: ObservationStore, region: np.ndarray, val_sizes: np.ndarray, n: int
) -> list[Arch]:
    """The `n` architectures of lowest validation loss among the candidate trainings on
    exactly `region` (the return rule's own per-region ranking)."""
    ranked = ranked_on_region(store, region, val_sizes)
    return list(dict.fromkeys(arch for _, arch in ranked))[:n]


def final_check(
    task: ClusteredTask,
    trainer: Trainer,
    store: ObservationStore,
    selection: dict,
    fallback: tuple[np.ndarray, list[Arch]],
    seed: int,
    *,
    steps: int,
    epochs: float | None,
    rule: ValidationLength,
    n_partitions: int = 2,
    n_archs: int = 2,
    executor: object | None = None,
    extra_cells: Sequence[Arch] = (),
) -> FinalCheck:
    """The second look (module docstring). `fallback`: the return rule's partition and
    architectures, kept for any region the check cannot judge (no training or no
    validation sample, or no candidate training on it). `extra_cells`: judged on every
    region besides its own candidates (ranked after them, so a tie keeps the region's)."""
    start = time.perf_counter()
    assignment0, archs0 = np.asarray(fallback[0]), list(fallback[1])
    n_experts = len(archs0)
    val_sizes = task.val_cluster_sizes.astype(np.float64)
    partitions = contenders(selection, n_partitions) or [tuple(int(v) for v in assignment0)]
    candidates: dict[tuple[int, int], list[Arch]] = {}  # (contender, expert) -> archs
    for p, partition in enumerate(partitions):
        labels = np.array(partition)
        for k in range(n_experts):
            region = labels == k
            if not region.any():
                continue
            archs = ranked_architectures(store, region, val_sizes, n_archs)
            if p == 0 and archs0[k] not in archs:  # the return rule's own pick always runs
                archs = [archs0[k], *archs][:n_archs]
            # e.g. the champion cell (`final.champion`): offered to every region
            candidates[(p, k)] = list(dict.fromkeys([*archs, *extra_cells]))
    starts: dict[str, WarmStart] | None = None
    if rule.warm_start:  # the tracking runs fine-tune each cell's global network
        cells = [a for archs in candidates.values() for a in archs]
        starts = global_starts(
            task, trainer, cells, seed, steps=steps, epochs=epochs, rule=rule, executor=executor
        )
    jobs: dict[tuple, ExpertJob] = {}
    for (p, k), archs in candidates.items():
        region = np.array(partitions[p]) == k
        warm = starts is not None and needs_warm_start(region)
        for arch in archs:
            jobs.setdefault(
                (arch.key, region.tobytes(), k),
                ExpertJob(
                    k,
                    arch,
                    region,
                    expert_seed(seed, k),
                    steps,
                    epochs,
                    rule,
                    True,
                    init=starts[arch.key] if warm and starts is not None else None,
                    keep_track_state=rule.twins,  # the chosen ones' twins (`sgem.moe.averaged`)
                ),
            )
    fits = fit_expert_jobs(task, trainer, list(jobs.values()), executor, desc="tracking runs")
    by_key = dict(zip(jobs, fits, strict=True))

    report_rows, best = [], None
    for p, partition in enumerate(partitions):
        labels = np.array(partition)
        total, n_val = 0.0, 0
        chosen_archs: list[Arch] = []
        lengths: list[dict | None] = []
        outputs: list[np.ndarray | None] = []
        states: list[dict | None] = []
        regions: list[dict[str, Any]] = []
        for k in range(n_experts):
            region = labels == k
            options = []
            for rank, arch in enumerate(candidates.get((p, k), [])):
                length = by_key[(arch.key, region.tobytes(), k)].length
                if length is not None:
                    options.append((length["best_val_nll"], rank, arch, length))
            if not options:  # nothing to judge here: the return rule's choice, no value
                fallback_arch = (candidates.get((p, k)) or [archs0[k]])[0]
                chosen_archs.append(fallback_arch)
                lengths.append(None)
                outputs.append(None)
                states.append(None)
                regions.append({"expert": k, "clusters": int(region.sum()), "judged": False})
                continue
            nll, _, arch, length = min(options, key=lambda o: (o[0], o[1]))
            total += nll * length["n_val"]
            n_val += length["n_val"]
            chosen_archs.append(arch)
            lengths.append(length)
            outputs.append(by_key[(arch.key, region.tobytes(), k)].val_output)
            states.append(by_key[(arch.key, region.tobytes(), k)].track_state)
            regions.append(
                {
                    "expert": k,
                    "clusters": int(region.sum()),
                    "judged": True,
                    "tracked": [
                        {"arch": o[2].key, "best_val_nll": o[0], "best_step": o[3]["best_step"]}
                        for o in sorted(options, key=lambda o: o[1])
                    ],
                    "chosen_arch": arch.key,
                }
            )
        mean = total / n_val if n_val else None
        report_rows.append(
            {
                "partition": list(partition),
                "validation_nll": mean,
                "regions": regions,
                "from_return_rule": p == 0,
            }
        )
        if mean is not None and (best is None or mean < best[0]):
            best = (mean, p, chosen_archs, lengths, outputs, states)
    known: list[dict | None]
    known_outputs: list[np.ndarray | None]
    known_states: list[dict | None]
    if best is None:  # nothing could be judged: keep the return rule's answer
        chosen_p, final_archs, known = 0, archs0, [None] * n_experts
        known_outputs, known_states = [None] * n_experts, [None] * n_experts
        final_assignment = assignment0
    else:
        _, chosen_p, final_archs, known, known_outputs, known_states = best
        final_assignment = np.array(partitions[chosen_p])
    for p, row in enumerate(report_rows):
        row["chosen"] = p == chosen_p
    report = {
        "rule": "contenders (the return rule's choice, the geometry split, other finalists) "
        "judged by the final protocol's tracking run (validation NLL at the early-stopped "
        "length) of each region's best candidate architectures; lowest total wins",
        "tracking_runs": len(jobs),
        "contenders": report_rows,
        "changed_partition": chosen_p != 0,
        "changed_architectures": [a.key for a in final_archs] != [a.key for a in archs0],
        "seconds": round(time.perf_counter() - start, 3),
    }
    return FinalCheck(
        final_assignment,
        list(final_archs),
        list(known),
        report,
        starts,
        list(known_outputs),
        list(known_states) if rule.twins else None,
    )


__all__ = ["FinalCheck", "contenders", "final_check", "ranked_architectures"]
