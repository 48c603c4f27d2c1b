"""The finalists' second look (sgem.final.check): contenders, ranking, the choice
by the final protocol, and tracking runs handed on to the final retrain exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers import short_train, small_ts_space, small_ts_task

from sgem.errors import SgemUserError
from sgem.final.check import contenders, final_check, ranked_architectures
from sgem.final.length import ValidationLength
from sgem.final.moe_fit import train_final_moe
from sgem.search.config import SearchConfig
from sgem.search.store import Observation, ObservationStore
from sgem.train.trainer import Trainer

RULE = ValidationLength(max_factor=2.0, n_evals=4, patience=2)


@pytest.fixture(scope="module")
def task():
    return small_ts_task(context=32, horizon=8)


@pytest.fixture(scope="module")
def space():
    return small_ts_space()


@pytest.fixture(scope="module")
def trainer(task, space):
    return Trainer(task, space, short_train())


def _row(partition, measured, chosen=False, geometry=False) -> dict:
    return {
        "partition": list(partition),
        "measured_objective": measured,
        "chosen": chosen,
        "geometry": geometry,
    }


def test_contenders_put_the_choice_then_geometry_then_the_best_others() -> None:
    selection = {
        "finalists": [
            _row([0, 0, 1, 1], -5.0),
            _row([1, 1, 0, 0], -1.0),  # the grouping above relabelled, measured better: once
            _row([0, 1, 0, 1], -3.0, chosen=True),
            _row([0, 1, 1, 0], -9.0, geometry=True),
            _row([0, 0, 0, 1], None),
        ]
    }
    got = contenders(selection, 4)
    assert got == [(0, 1, 0, 1), (0, 1, 1, 0), (1, 1, 0, 0), (0, 0, 0, 1)]
    assert contenders(selection, 2) == [(0, 1, 0, 1), (0, 1, 1, 0)]
    assert contenders({}, 2) == []


def test_ranked_architectures_are_the_lowest_validation_losses_on_exactly_the_region(
    space, task
) -> None:
    m = task.n_clusters
    store = ObservationStore(m)
    archs = space.sample_many(4, np.random.default_rng(1))
    region = np.arange(m) < 3
    for i, (arch, loss) in enumerate(zip(archs, [3.0, 1.0, 2.0, 0.5], strict=True)):
        mask = region if i < 3 else ~region  # the last one trained elsewhere
        store.add(Observation(arch, mask, np.full(m, loss), 0.0, 0, "refit", 0))
    val_sizes = task.val_cluster_sizes.astype(np.float64)
    assert ranked_architectures(store, region, val_sizes, 2) == [archs[1], archs[2]]
    assert ranked_architectures(store, region, val_sizes, 9) == [archs[1], archs[2], archs[0]]


def _store_with(task, space, partitions, n_archs: int = 3) -> tuple[ObservationStore, list]:
    """Candidate trainings of a few random cells on every region of `partitions`."""
    m = task.n_clusters
    store = ObservationStore(m)
    archs = space.sample_many(n_archs, np.random.default_rng(2))
    rng = np.random.default_rng(3)
    for partition in partitions:
        labels = np.array(partition)
        for k in range(labels.max() + 1):
            for arch in archs:
                region = labels == k
                if store.lookup(arch, region) is None:
                    losses = rng.uniform(0.5, 2.0, m)
                    store.add(Observation(arch, region, losses, 0.0, 0, "refit", 0))
    return store, archs


def _two_contenders(task, space, trainer, rule, n_archs: int = 3):
    """The second look over the return rule's choice (alternating clusters) and a geometry
    split (the first three clusters apart), both with candidate trainings of a few cells."""
    chosen = tuple(int(v) for v in np.arange(task.n_clusters) % 2)
    geometry = tuple(int(v) for v in (np.arange(task.n_clusters) < 3).astype(int))
    store, archs = _store_with(task, space, [chosen, geometry], n_archs=n_archs)
    selection = {
        "finalists": [_row(chosen, -1.0, chosen=True), _row(geometry, -2.0, geometry=True)]
    }
    check = final_check(
        task,
        trainer,
        store,
        selection,
        (np.array(chosen), [archs[0], archs[0]]),
        seed=5,
        steps=6,
        epochs=None,
        rule=rule,
        n_partitions=2,
        n_archs=2,
    )
    return chosen, geometry, archs, check


def test_the_contender_of_lowest_validation_nll_wins_and_its_runs_are_reused_exactly(
    task, space, trainer
) -> None:
    chosen, geometry, _, check = _two_contenders(task, space, trainer, RULE)
    rows = check.report["contenders"]
    assert [tuple(r["partition"]) for r in rows] == [chosen, geometry]
    best = min(rows, key=lambda r: r["validation_nll"])
    assert best["chosen"] and sum(r["chosen"] for r in rows) == 1
    assert tuple(check.assignment.tolist()) == tuple(best["partition"])
    for k, region in enumerate(best["regions"]):
        tracked = {t["arch"]: t["best_val_nll"] for t in region["tracked"]}
        assert len(tracked) <= 2
        assert region["chosen_arch"] == min(tracked, key=tracked.get)
        assert check.architectures[k].key == region["chosen_arch"]
    # the validation NLL is the val-size-weighted mean of the regions' tracked minima
    labels = check.assignment
    n_val = [int((labels == k)[task.val.cluster].sum()) for k in range(2)]
    mins = [min(t["best_val_nll"] for t in r["tracked"]) for r in best["regions"]]
    assert best["validation_nll"] == pytest.approx(np.dot(n_val, mins) / sum(n_val))
    # handing the tracking runs on gives the very weights of tracking again
    reused, with_known = train_final_moe(
        task,
        trainer,
        check.assignment,
        check.architectures,
        steps=6,
        seed=5,
        length=RULE,
        known_lengths=check.known_lengths,
    )
    fresh, again = train_final_moe(
        task, trainer, check.assignment, check.architectures, steps=6, seed=5, length=RULE
    )
    assert with_known.steps == again.steps
    assert with_known.final_length == again.final_length
    for a, b in zip(reused.state_dict().values(), fresh.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_nothing_to_judge_keeps_the_return_rules_answer(task, space, trainer) -> None:
    chosen = tuple(int(v) for v in np.arange(task.n_clusters) % 2)
    archs = space.sample_many(2, np.random.default_rng(4))
    check = final_check(
        task,
        trainer,
        ObservationStore(task.n_clusters),  # no candidate trainings on any region
        {"finalists": [_row(chosen, -1.0, chosen=True)]},
        (np.array(chosen), archs),
        seed=0,
        steps=4,
        epochs=None,
        rule=RULE,
    )
    # the return rule's own cells are still tracked, so the answer is its own
    assert tuple(check.assignment.tolist()) == chosen
    assert check.architectures == archs
    assert not check.report["changed_partition"]
    assert not check.report["changed_architectures"]


def test_config_checks_the_second_look_settings() -> None:
    assert SearchConfig(final_check_partitions=0).final_check_partitions == 0
    with pytest.raises(SgemUserError, match="final_check_archs"):
        SearchConfig(final_check_archs=0)
    with pytest.raises(SgemUserError, match="final_check_partitions"):
        SearchConfig(final_check_partitions=-1)


def test_a_warm_second_look_hands_its_global_networks_and_runs_on_exactly(
    task, space, trainer
) -> None:
    """With warm starts the tracking runs fine-tune each cell's global network; the final
    retrain reuses both the runs and the networks, giving the weights of doing it afresh."""
    warm = dataclasses.replace(RULE, warm_start=True)
    _, _, archs, check = _two_contenders(task, space, trainer, warm, n_archs=2)
    assert check.starts is not None and set(check.starts) == {a.key for a in archs}
    for row in check.report["contenders"]:
        for region in row["regions"]:
            assert region["judged"]
    args = (task, trainer, check.assignment, check.architectures)
    reused, with_known = train_final_moe(
        *args,
        steps=6,
        seed=5,
        length=warm,
        known_lengths=check.known_lengths,
        starts=check.starts,
    )
    fresh, again = train_final_moe(*args, steps=6, seed=5, length=warm)
    assert with_known.final_length == again.final_length
    assert with_known.global_networks == again.global_networks  # handed on, reported alike
    assert again.global_networks is not None
    for a, b in zip(reused.state_dict().values(), fresh.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
