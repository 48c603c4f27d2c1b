"""The return rule: which visited partition and which architectures SGEM returns.

The surrogate changes at every refit, so surrogate objective values from different
iterations are not comparable and are never used to pick an iterate. Measured values
(`region_value`) are, provided they were obtained with equal effort: the final iterate's
partition and the best other visited ones (by screening value) are re-measured with one
common set of architectures per expert slot; the best measured objective wins. With
`finalist_champions` (default) the finalists' labels are aligned to the final iterate and
slot k's set is the final incumbent k, the *champions* of region k of every finalist (the
architectures of best measured value on that region's clusters so far, trained on exactly
that region or on any mask covering it) and a few random ones:
an architecture that proved itself on one finalist's region is tried on every finalist's
corresponding region, so a partition is not judged with architectures chosen for another
(without it: every incumbent plus the random ones, on every region). Its regions then get
the rest of the random search (the per-region refit), and each expert the architecture of
lowest measured validation loss on its region.

The geometry split (label-free, a finalist with `geometry_finalist`) is the default the
others must beat clearly: one short training per (architecture, region) is noisy, and a
partition the search chose among many visited carries that noise in its favour. On a CSV of
three mixed structures (benchmarks/mixed_csv.py) the search's partition beat the geometry
split (each structure its own expert) by 0.7 % of J while the two clusters it moved measured
*worse* there: the margin came from the retrained regions' other clusters, whose grouping had
not changed. So a finalist replaces geometry only where its gain exceeds `GEOMETRY_MARGIN`
standard errors, the noise per cluster measured on exactly those clusters: in a region that
changed, but routed to the same expert in both (`geometry_test`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..space.arch import Arch, CellSpace
from ..train.losses import region_loss
from .config import SearchConfig
from .exploration import align_labels, champions
from .ledger import Job, Ledger, region_value
from .store import ObservationStore

Partition = tuple[int, ...]

#: a finalist replaces the geometry split only where it measures better by more than this many
#: standard errors (the leaderboard's margin for a MoE over its global network, too)
GEOMETRY_MARGIN = 2.0


def canonical_partition(partition: Sequence[int] | np.ndarray) -> Partition:
    """Expert labels renumbered by first appearance: equal for partitions that group the
    clusters identically (e.g. [1, 1, 0] and [0, 0, 1] both give (0, 0, 1))."""
    labels: dict[int, int] = {}
    return tuple(labels.setdefault(int(v), len(labels)) for v in partition)


def visited_partitions(
    trace: list[dict], final_assignment: np.ndarray
) -> list[tuple[int, Partition]]:
    """Distinct groupings the run visited (each iteration's hard routing and every
    evaluated jump proposal), with the iteration each was first seen at, other than the
    final iterate's. Partitions that differ only by a relabelling of the experts are one
    grouping (`canonical_partition`)."""
    out: list[tuple[int, Partition]] = []
    seen = {canonical_partition(final_assignment)}
    for row in trace:
        for partition in (row["routing"], (row.get("jump") or {}).get("proposal")):
            if partition is None:
                continue
            key = canonical_partition(partition)
            if key not in seen:
                seen.add(key)
                out.append((row["iteration"], tuple(int(v) for v in partition)))
    return out


def partition_value(
    ledger: Ledger,
    assignment: np.ndarray,
    sizes: np.ndarray,
    n_experts: int,
    archs: Sequence[Arch] | None = None,
    untrained: float | None = None,
) -> float | None:
    """Measured J of a hard partition: per region, the best `region_value` among trainings
    on exactly that region (only of `archs` if given). A region never trained counts as
    `untrained`; if that is None, the partition has no value (None)."""
    total = 0.0
    for k in range(n_experts):
        region = assignment == k
        if not region.any():
            continue
        value = ledger.best_value(region, sizes, archs)
        if value is None:
            if untrained is None:
                return None
            value = untrained
        total += value
    return total


def region_jobs(assignment: np.ndarray, archs: Sequence[Arch], n_experts: int) -> list[Job]:
    """One refit-phase job per (non-empty region of `assignment`, architecture)."""
    jobs: list[Job] = []
    for k in range(n_experts):
        region = assignment == k
        if region.any():
            jobs += [(a, region, "refit") for a in archs]
    return jobs


def _finalists(
    ledger: Ledger,
    config: SearchConfig,
    trace: list[dict],
    final_key: Partition,
    sizes,
    geometry: np.ndarray | None = None,
) -> list[tuple[float | None, int, Partition]]:
    """The final iterate's partition, then the best other visited ones by screening value:
    measured J from whatever was trained on their regions. Screening is biased towards
    partitions tried more often, so it only picks finalists, never decides between them.
    `geometry` (the k-means split of the cluster centroids) joins as one more finalist
    unless it is already among them (first visited at iteration 0: it is a start)."""
    screened = []
    for iteration, partition in visited_partitions(trace, np.array(final_key)):
        value = partition_value(ledger, np.array(partition), sizes, config.n_experts)
        if value is not None:
            screened.append((value, iteration, partition))
    screened.sort(key=lambda v: -v[0])
    out = [(None, config.n_iterations, final_key)] + [
        (v, it, p) for v, it, p in screened[: max(config.final_candidates - 1, 0)]
    ]
    if geometry is not None:
        key = canonical_partition(geometry)
        if all(canonical_partition(p) != key for _, _, p in out):
            out.append((None, 0, tuple(int(v) for v in geometry)))
    return out


def slot_architectures(
    ledger: Ledger,
    partitions: Sequence[Partition],
    archs: Sequence[Arch],
    extra: Sequence[Arch],
    sizes: np.ndarray,
    use_champions: bool,
) -> list[list[Arch]]:
    """The architectures every finalist's region k is trained with (labels aligned):
    with `use_champions`, incumbent k, the `champions` of region k of each finalist and `extra`;
    otherwise every incumbent and `extra` (the same set for every slot)."""
    if not use_champions:
        common = list(dict.fromkeys([*archs, *extra]))
        return [common for _ in archs]
    out = []
    for k, incumbent in enumerate(archs):
        best = [a for p in partitions for a in champions(ledger, np.array(p) == k, sizes)]
        out.append(list(dict.fromkeys([incumbent, *best, *extra])))
    return out


def ranked_on_region(
    store: ObservationStore, region: np.ndarray, val_sizes: np.ndarray
) -> list[tuple[float, Arch]]:
    """(validation loss on `region`, architecture) of every training on exactly `region`,
    lowest loss first (ties: the earlier training)."""
    if not region.any():
        return []
    scored = sorted(
        (region_loss(o.losses, region, val_sizes), i, o.arch)
        for i, o in enumerate(store.on_mask(region))
    )
    return [(loss, arch) for loss, _, arch in scored]


def _best_per_region(
    ledger: Ledger,
    chosen: np.ndarray,
    archs: list[Arch],
    val_sizes: np.ndarray,
) -> tuple[list[Arch], list[float | None]]:
    """Each expert: the architecture of lowest validation loss among everything trained on
    exactly its region (the incumbent, with no loss, if the region is empty)."""
    final: list[Arch] = []
    losses: list[float | None] = []
    for k, incumbent in enumerate(archs):
        ranked = ranked_on_region(ledger.store, chosen == k, val_sizes)
        loss, arch = ranked[0] if ranked else (None, incumbent)
        final.append(arch)
        losses.append(loss)
    return final, losses


def finalise(
    ledger: Ledger,
    space: CellSpace,
    config: SearchConfig,
    trace: list[dict],
    final_assignment: np.ndarray,
    archs: list[Arch],
    sizes: np.ndarray,
    val_sizes: np.ndarray,
    rng: np.random.Generator,
    geometry: np.ndarray | None = None,
) -> tuple[np.ndarray, list[Arch], list[float | None], dict]:
    """Choose the returned partition and architectures on measured outcomes only.

    Every finalist's region k is trained with the *same* architectures
    (`slot_architectures`: with `finalist_champions` the final incumbent k, the champions
    of the finalists' regions k and the first `finalist_budget` of the `refit_budget`
    random ones), so the comparison is fair; the partition with the best measured objective
    wins and its regions get the rest of the random search. Returns (partition,
    architectures, their region validation losses, a selection report).
    """
    k_experts = config.n_experts
    final_key = tuple(final_assignment.tolist())
    finalists = [
        (screening, iteration, _aligned(partition, final_assignment, k_experts))
        for screening, iteration, partition in _finalists(
            ledger, config, trace, final_key, sizes, geometry
        )
    ]
    refit = space.sample_many(config.refit_budget, rng)
    n_common = min(config.finalist_budget, config.refit_budget)
    slots = slot_architectures(
        ledger,
        [p for _, _, p in finalists],
        archs,
        refit[:n_common],
        sizes,
        config.finalist_champions,
    )
    t = config.n_iterations + 1
    jobs: list[Job] = []
    for _, _, partition in finalists:
        assignment = np.array(partition)
        for k, slot in enumerate(slots):
            if (assignment == k).any():
                jobs += [(a, assignment == k, "refit") for a in slot]
    ledger.train(jobs, t)

    report, best = [], None
    geometry_key = canonical_partition(geometry) if geometry is not None else None
    for screening, iteration, partition in finalists:
        value = _slot_value(ledger, np.array(partition), sizes, slots)
        report.append(
            {
                "partition": list(partition),
                "first_visited_at_iteration": iteration,
                "screening_objective": screening,
                "measured_objective": value,
                "geometry": canonical_partition(partition) == geometry_key,
            }
        )
        if best is None or value > best[0]:
            best = (value, partition)
    geometry_row = next((r for r in report if r["geometry"]), None)
    test = None
    if geometry_row is not None and tuple(geometry_row["partition"]) != best[1]:
        geometry_p = np.array(geometry_row["partition"])
        test = geometry_test(
            _cluster_values(ledger, np.array(best[1]), sizes, slots),
            _cluster_values(ledger, geometry_p, sizes, slots),
            np.array(best[1]),
            geometry_p,
        )
        if test is not None and test["keeps_geometry"]:
            best = (float(geometry_row["measured_objective"]), tuple(geometry_row["partition"]))
    chosen = np.array(best[1])
    ledger.train(region_jobs(chosen, refit[n_common:], k_experts), t)
    final, losses = _best_per_region(ledger, chosen, archs, val_sizes)
    for row in report:
        row["chosen"] = tuple(row["partition"]) == best[1]
    selection = {
        "rule": "finalist partitions (labels aligned to the final iterate) re-measured with "
        "one architecture set per expert slot"
        + (" (incumbent, finalists' champions, random)" if config.finalist_champions else "")
        + "; best measured objective wins, the geometry split unless beaten by "
        + f"{GEOMETRY_MARGIN:g} standard errors",
        "common_architectures": max(len(slot) for slot in slots),
        "slot_architectures": [len(slot) for slot in slots],
        "refit_architectures_on_chosen": len(dict.fromkeys([*slots[0], *refit])),
        "finalists": report,
        "geometry_test": test,
        "equals_final_iterate": canonical_partition(best[1]) == canonical_partition(final_key),
    }
    return chosen, final, losses, selection


def _aligned(partition: Partition, final_assignment: np.ndarray, n_experts: int) -> Partition:
    """`partition` relabelled to overlap most with the final iterate's experts."""
    aligned = align_labels(np.asarray(partition), np.asarray(final_assignment), n_experts)
    return tuple(int(v) for v in aligned)


def _slot_value(
    ledger: Ledger, assignment: np.ndarray, sizes: np.ndarray, slots: list[list[Arch]]
) -> float:
    """Measured J of a finalist: per region k, the best of slot k's trainings on it."""
    total = 0.0
    for k, slot in enumerate(slots):
        region = assignment == k
        if not region.any():
            continue
        value = ledger.best_value(region, sizes, slot)
        if value is None:
            return float("-inf")
        total += value
    return total


def _cluster_values(
    ledger: Ledger, assignment: np.ndarray, sizes: np.ndarray, slots: list[list[Arch]]
) -> np.ndarray | None:
    """Per cluster, its part of `_slot_value`: minus its size-weighted validation loss under
    the training that gives its region's value (None where a region has none)."""
    out = np.zeros(len(assignment))
    for k, slot in enumerate(slots):
        region = assignment == k
        if not region.any():
            continue
        trained = [o for a in slot if (o := ledger.store.lookup(a, region)) is not None]
        if not trained:
            return None
        best = max(trained, key=lambda o: region_value(o, region, sizes))
        out[region] = -sizes[region] * best.losses[region]
    return out


def geometry_test(
    values: np.ndarray | None,
    geometry_values: np.ndarray | None,
    partition: np.ndarray,
    geometry: np.ndarray,
    margin: float = GEOMETRY_MARGIN,
) -> dict | None:
    """Whether `partition` (labels aligned to `geometry`'s) beats the geometry split clearly.

    gain: the difference of measured J, summed over the clusters whose expert or region
    changed (the others share one training: no difference). Its noise is measured on the
    clusters of a changed region that keep their expert: their values differ by training
    noise (and by what new neighbours cost them, counted as noise too: the gain must come
    from the clusters that moved). se = sqrt(changed clusters x their mean squared
    difference). None (no test: the plain comparison stands) where fewer than two clusters
    measure the noise or a partition is unmeasured."""
    if values is None or geometry_values is None:
        return None
    shared = np.array(  # the same expert and region in both: the same training
        [
            partition[c] == geometry[c]
            and ((partition == partition[c]) == (geometry == geometry[c])).all()
            for c in range(len(geometry))
        ]
    )
    changed = ~shared
    stayed = changed & (partition == geometry)
    if stayed.sum() < 2:
        return None
    diff = values - geometry_values
    gain = float(diff[changed].sum())
    se = float(np.sqrt(changed.sum() * np.mean(diff[stayed] ** 2)))
    return {
        "gain": gain,
        "standard_error": se,
        "moved_clusters": int((partition != geometry).sum()),
        "gain_on_moved_clusters": float(diff[partition != geometry].sum()),
        "keeps_geometry": bool(gain <= margin * se),
    }


__all__ = [
    "GEOMETRY_MARGIN",
    "canonical_partition",
    "finalise",
    "geometry_test",
    "partition_value",
    "ranked_on_region",
    "region_jobs",
    "slot_architectures",
]
