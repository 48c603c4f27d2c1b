"""Warm starts (`final_length: validation-warm`, sgem.final.warm_start): experts fine-tune a
global network of their cell, and may keep it unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers import short_train, small_ts_space, small_ts_task

from sgem.execution.jobs import job_seed
from sgem.final.expert_fit import ExpertJob, fit_expert
from sgem.final.length import ValidationLength, resolve_length, track_validation
from sgem.final.moe_fit import train_final_moe
from sgem.final.warm_start import global_starts
from sgem.space.arch import Arch
from sgem.train.trainer import TrainConfig, Trainer


@pytest.fixture(scope="module")
def task():
    return small_ts_task(n_windows=180, n_clusters=4)


@pytest.fixture(scope="module")
def space():
    return small_ts_space()


@pytest.fixture(scope="module")
def trainer(task, space):
    return Trainer(task, space, short_train())


def _arch(space, seed: int = 0) -> Arch:
    return space.sample_many(1, np.random.default_rng(seed))[0]


def _states_equal(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k].cpu(), b[k].cpu()) for k in a)


def test_the_warm_rule_is_a_named_final_length():
    rule = resolve_length("validation-warm")
    assert isinstance(rule, ValidationLength) and rule.warm_start
    assert not resolve_length("validation").warm_start
    assert rule.refit_steps(0, 100, 20) == 0  # the start itself was best: no fine-tuning
    assert rule.refit_steps(10, 100, 20) == 12


def test_a_warm_tracking_run_scores_the_start_and_can_choose_zero_steps():
    calls = []

    def val_loss() -> float:
        calls.append(len(calls))
        return float(len(calls))  # 1.0 at the start, then worse after every step

    best, loss, done, curve = track_validation(lambda i: None, val_loss, 30, 10, 2, True)
    assert (best, loss) == (0, 1.0)
    assert [s for s, _ in curve] == [0, 10, 20]
    assert done == 20


def test_global_network_keeps_its_best_tracked_weights(task, space, trainer):
    arch = _arch(space, 3)
    rule = ValidationLength(max_factor=1.0, n_evals=4, patience=None, warm_start=True)
    starts = global_starts(task, trainer, [arch, arch], 0, steps=12, epochs=None, rule=rule)
    assert list(starts) == [arch.key]  # one global network per distinct cell
    info = starts[arch.key].length
    assert info is not None and info["n_train"] == len(task.train)
    # the kept weights are those of the network trained on the training samples for the
    # chosen length, with the seed derived from the cell (shared across methods)
    every = np.ones(task.n_clusters, bool)
    ref = trainer.fit(
        arch,
        trainer.x_train,
        trainer.y_train,
        seed=job_seed(0, arch, every),
        steps=info["best_step"],
    )
    # a tracking run with a constant learning rate trains step for step like Trainer.fit
    assert _states_equal(ref.state_dict(), starts[arch.key].track_state)
    assert not _states_equal(starts[arch.key].track_state, starts[arch.key].refit_state)


def test_an_expert_that_fine_tuning_cannot_improve_is_the_global_network(task, space, trainer):
    arch = _arch(space, 4)
    rule = ValidationLength(max_factor=1.0, n_evals=2, patience=1, warm_start=True)
    starts = global_starts(task, trainer, [arch], 0, steps=8, epochs=None, rule=rule)
    start = starts[arch.key]
    region = np.zeros(task.n_clusters, bool)
    region[:2] = True
    # a learning rate that destroys the network: 0 fine-tuning steps must win
    wild = Trainer(task, space, TrainConfig(steps=5, lr=50.0, batch_size=32))
    job = ExpertJob(0, arch, region, 1, 8, None, rule, init=start)
    fit = fit_expert(task, wild, job)
    assert fit.length is not None and fit.length["best_step"] == 0
    assert fit.steps == 0
    assert fit.module is not None and _states_equal(fit.module.state_dict(), start.refit_state)


def test_warm_final_moe_fine_tunes_every_routed_expert_but_not_a_global_one(task, space, trainer):
    archs = [_arch(space, 1), _arch(space, 1)]  # one cell: one global network
    assignment = np.arange(task.n_clusters) % 2
    _, report = train_final_moe(
        task, trainer, assignment, archs, steps=8, seed=0, length="validation-warm"
    )
    info = report.to_json()
    assert list(info["global_networks"]) == [archs[0].key]
    for f in info["final_length"]:
        assert f["curve"][0][0] == 0  # each expert's run scored its warm start first
    assert math.isfinite(info["test_nll"])
    # K = 1 (one expert of every cluster) is the global network itself: no warm start
    one = np.zeros(task.n_clusters, dtype=np.int64)
    _, single = train_final_moe(
        task, trainer, one, archs[:1], steps=8, seed=0, length="validation-warm"
    )
    _, scratch = train_final_moe(
        task, trainer, one, archs[:1], steps=8, seed=0, length="validation"
    )
    assert single.global_networks is None
    assert single.test_nll == scratch.test_nll


def test_warm_final_moe_is_reproducible(task, space, trainer):
    archs = [_arch(space, 1), _arch(space, 2)]
    assignment = np.arange(task.n_clusters) % 2
    a = train_final_moe(task, trainer, assignment, archs, steps=6, seed=3, length="validation-warm")
    b = train_final_moe(task, trainer, assignment, archs, steps=6, seed=3, length="validation-warm")
    assert a[1].test_nll == b[1].test_nll


def test_the_champion_is_the_baselines_best_single_cell_of_that_budget(task, space, trainer):
    from sgem.baselines import best_single_architecture
    from sgem.final.champion import champion_cell
    from sgem.methods.budget import MethodBudget

    cell, report = champion_cell(task, trainer, space, 3, seed=2)
    setup = MethodBudget(seed=2, space=space, train=trainer.config, n_experts=2, trainings=3)
    assert best_single_architecture(task, setup)[0] == cell
    assert report["cell"] == cell.key and report["trainings"] == len(report["scores"])
    assert report["validation_loss"] == min(report["scores"].values())


def test_the_champion_trains_on_workers_with_the_same_numbers(task, space, trainer, capsys):
    """Its cells train side by side on an executor's workers: the scores are those of one
    training after another here (`trainer.train`), and the bar counts every cell."""
    from sgem.execution.executors import ProcessExecutor
    from sgem.execution.progress import shown
    from sgem.final.champion import champion_cell
    from sgem.train.losses import region_loss

    _, here = champion_cell(task, trainer, space, 3, seed=4)
    every = np.ones(task.n_clusters, dtype=bool)
    ex = ProcessExecutor(task, space, trainer.config, workers=2, device="cpu")
    try:
        with shown():
            cell, there = champion_cell(task, trainer, space, 3, seed=4, executor=ex)
    finally:
        ex.close()
    assert "champion cell: 100%" in capsys.readouterr().err
    # workers train on one intra-op thread, this process on several: equal to rounding
    assert cell.key == here["cell"] and there["scores"].keys() == here["scores"].keys()
    for key, score in here["scores"].items():
        assert there["scores"][key] == pytest.approx(score, rel=1e-5)
    direct = trainer.train(cell, every, job_seed(4, cell, every)).losses
    assert region_loss(direct, every, task.val_cluster_sizes) == here["validation_loss"]


def test_the_final_check_offers_the_champion_to_every_region(task, space, trainer):
    from sgem.final.check import final_check
    from sgem.search.store import ObservationStore

    rule = ValidationLength(max_factor=1.0, n_evals=2, patience=1, warm_start=True)
    own, champion = _arch(space, 5), _arch(space, 6)
    chosen = np.arange(task.n_clusters) % 2
    check = final_check(
        task,
        trainer,
        ObservationStore(task.n_clusters),
        {"finalists": [{"partition": chosen.tolist(), "chosen": True}]},
        (chosen, [own, own]),
        seed=1,
        steps=6,
        epochs=None,
        rule=rule,
        n_partitions=1,
        n_archs=1,
        extra_cells=[champion],
    )
    (row,) = check.report["contenders"]
    for region in row["regions"]:
        assert [t["arch"] for t in region["tracked"]] == [own.key, champion.key]
        best = min(region["tracked"], key=lambda t: t["best_val_nll"])
        assert region["chosen_arch"] == best["arch"]
    assert set(check.starts) == {own.key, champion.key}


def test_each_cells_global_network_is_scored_alone_as_a_reference(task, space, trainer):
    """With warm starts the report says what one global network of each cell scores on the
    same test samples (what the experts' specialisation bought); from scratch there is none."""
    from sgem.run.pipeline import summarise
    from sgem.train.losses import per_sample_nll

    cell = _arch(space, 1)
    archs, assignment = [cell, cell], np.arange(task.n_clusters) % 2
    rule = resolve_length("validation-warm")
    starts = global_starts(task, trainer, [cell], 3, steps=6, epochs=None, rule=rule)
    _, report = train_final_moe(
        task, trainer, assignment, archs, steps=6, seed=3, length=rule, starts=starts
    )
    assert list(report.global_networks_test) == [cell.key]
    net = trainer.build(cell)
    net.load_state_dict(starts[cell.key].refit_state)
    with torch.no_grad():
        out = net.eval()(torch.as_tensor(task.test.x, dtype=torch.float32))
    expected = float(per_sample_nll(out, torch.as_tensor(task.test.y), task.loss).mean())
    assert report.global_networks_test[cell.key]["test_nll"] == pytest.approx(expected)
    assert "global_networks_test" in report.to_json()
    _, scratch = train_final_moe(
        task, trainer, assignment, archs, steps=6, seed=3, length="validation"
    )
    assert scratch.global_networks_test is None
    result = {
        "task": "t",
        "seed": 0,
        "routing": assignment.tolist(),
        "architecture_keys": [a.key for a in archs],
        "test_nll": report.test_nll,
        "n_trained": 0,
        "wall_seconds": 1.0,
        "global_networks_test": report.global_networks_test,
    }
    assert f"one global network of cell {cell.key} (no experts)" in summarise(result)


def test_a_champion_cell_that_fails_to_train_is_left_out(task, space, trainer, monkeypatch):
    from sgem.final.champion import champion_cell

    _, healthy = champion_cell(task, trainer, space, 3, seed=2)
    bad = sorted(healthy["scores"], key=healthy["scores"].get)[0]  # the would-be champion
    real = trainer.train

    def train(arch, mask, seed):
        if arch.key == bad:
            raise FloatingPointError("loss became NaN")
        return real(arch, mask, seed)

    monkeypatch.setattr(trainer, "train", train)
    cell, report = champion_cell(task, trainer, space, 3, seed=2)
    assert cell.key != bad and list(report["failed"]) == [bad]
    assert "loss became NaN" in report["failed"][bad]
    assert report["scores"] == {k: v for k, v in healthy["scores"].items() if k != bad}
