"""The method layer: one budget, one result, one row for SGEM and every baseline."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from sgem.baselines import available, get_baseline
from sgem.data.timeseries import make_timeseries_task
from sgem.methods import Method, MethodBudget, MethodResult, SgemMethod, get_method
from sgem.methods.budget import Shared
from sgem.moe.scoring import method_scores
from sgem.search.config import SearchConfig
from sgem.space.timeseries import TimeSeriesSpace
from sgem.train.trainer import TrainConfig


@pytest.fixture(scope="module")
def task():
    rng, t = np.random.default_rng(0), np.arange(300)
    domains = {
        "cycle": [10 + 3 * np.sin(2 * np.pi * t / 12) + rng.normal(0, 0.3, 300)],
        "walk": [50 + np.cumsum(rng.normal(0, 1, 300))],
    }
    return make_timeseries_task(domains, n_windows=160, n_clusters=4, context=24, horizon=6, seed=0)


def test_every_registered_method_has_the_one_shape():
    for name in ["sgem", *available()]:
        assert isinstance(get_method(name), Method), name


def test_a_direct_forecaster_is_a_result_with_outputs_and_every_metric(task):
    budget = MethodBudget(seed=0, crps_samples=20)
    result = get_baseline("seasonal_naive").fit_evaluate(task, budget)
    assert isinstance(result, MethodResult) and result.moe is None and result.assignment is None
    row = result.row(task)
    scores = method_scores(task, result.test_output, crps_samples=20, seed=0)
    assert row["test_nll"] == scores["test_nll"] and row["test_crps"] == scores["test_crps"]
    assert row["test_mase"] > 0 and row["test_wql"] > 0 and 0 <= row["test_coverage_80"] <= 1
    assert row["assignment"] is None and row["seed"] == 0 and row["n_trained"] == 0


def test_the_trainer_is_built_once_per_task_and_shared(task):
    space = TimeSeriesSpace(op_names=("linear_trend", "skip"), n_nodes=1, channels=2, patch_len=6)
    budget = MethodBudget(seed=0, space=space, train=TrainConfig(steps=2), n_experts=2)
    assert budget.trainer(task, "a") is budget.trainer(task, "b")
    assert budget.replace(seed=1).trainer(task, "c") is budget.trainer(task, "a")
    assert budget.replace(shared=Shared()).trainer(task, "d") is not budget.trainer(task, "a")


def test_sgem_refuses_a_budget_that_disagrees_with_its_search_config(task):
    cfg = SearchConfig(n_experts=2)
    with pytest.raises(ValueError, match="budget_of"):
        SgemMethod(cfg).fit_evaluate(task, MethodBudget(n_experts=3))


def test_a_budget_names_a_bad_final_length():
    with pytest.raises(ValueError, match="unknown final length"):
        MethodBudget(final_length="long")


def test_scores_of_a_tensor_and_an_array_agree(task):
    out = torch.stack(
        [
            torch.zeros(len(task.test), 6),
            torch.ones(len(task.test), 6),
            torch.full((len(task.test), 6), 5.0),
        ],
        dim=-1,
    ).double()
    a = method_scores(task, out.double(), crps_samples=10)
    b = method_scores(task, out.double().numpy(), crps_samples=10)
    assert a["test_nll"] == b["test_nll"] and np.isfinite(a["test_crps"])


def test_the_leaderboards_references_are_methods_with_validation_and_holdout_outputs(task):
    from sgem.leaderboard.members import (
        GlobalNetwork,
        network_out_of_fold,
        reference_budget,
        reference_methods,
    )
    from sgem.leaderboard.series_members import ClassicalReference
    from sgem.train.time_fence import training_fence
    from sgem.train.trainer import Trainer

    space = TimeSeriesSpace(op_names=("linear_trend", "skip"), n_nodes=1, channels=2, patch_len=6)
    trainer = Trainer(task, space, TrainConfig(steps=2))
    budget = reference_budget(trainer, 0, steps=3, crps_samples=10)
    assert budget.trainer(task, "global network") is trainer  # handed down, not rebuilt
    methods = [GlobalNetwork(space.sample(np.random.default_rng(0))), *reference_methods(space)]
    assert [m.name for m in methods[1:]] == ["seasonal naive", "AutoETS", "AutoTheta"]
    for method in methods:
        assert isinstance(method, Method), method.name
        result = method.fit_evaluate(task, budget)
        assert result.val_output.shape[0] == len(task.val), result.method
        assert result.test_output.shape[0] == len(task.test), result.method
        assert np.isfinite(result.row(task)["test_nll"]), result.method
    net = GlobalNetwork(space.sample(np.random.default_rng(0))).fit_evaluate(task, budget)
    assert net.shippable and net.fitted.network is not None and net.kind == "network"
    ets = ClassicalReference("AutoETS").fit_evaluate(task, budget)
    assert ets.fitted.classical.name == "AutoETS" and ets.fitted.classical.spread > 0
    # out of fold: every train + validation row from a network that never saw it, none
    # once the budget's fence has passed
    cell = space.sample(np.random.default_rng(0))
    oof, nets = network_out_of_fold(task, budget, cell)
    assert oof.shape == (len(task.train) + len(task.val), *net.val_output.shape[1:])
    assert np.isfinite(oof).all() and len(nets) == 5  # and the five fold networks
    np.testing.assert_array_equal(oof, network_out_of_fold(task, budget, cell)[0])
    with training_fence(time.time() - 1.0):
        assert network_out_of_fold(task, budget, cell) is None


@pytest.mark.parametrize("cut_at", ["refit", "first"])
def test_a_global_network_cut_by_the_fence_ships_the_network_validation_scored(
    task, monkeypatch, cut_at
):
    """Refit on train + validation cut: the training split's network is shipped and scored
    on the holdout (it is what validation judged). First training cut: scored, not shipped,
    and no refit."""
    import sgem.leaderboard.members as members
    from sgem.leaderboard.members import GlobalNetwork, reference_budget
    from sgem.train.trainer import Trainer

    space = TimeSeriesSpace(op_names=("linear_trend", "skip"), n_nodes=1, channels=2, patch_len=6)
    trainer = Trainer(task, space, TrainConfig(steps=2))
    budget = reference_budget(trainer, 0, steps=3, crps_samples=10)
    # the fence as `fit_evaluate` reads it: before it starts, after each training
    answers = iter([False, False, True] if cut_at == "refit" else [False, True])
    monkeypatch.setattr(members, "fence_passed", lambda: next(answers))
    fits = []
    fit = trainer.fit
    monkeypatch.setattr(trainer, "fit", lambda *a, **k: fits.append(1) or fit(*a, **k))
    result = GlobalNetwork(space.sample(np.random.default_rng(0))).fit_evaluate(task, budget)
    net = result.fitted.network
    with torch.no_grad():
        val = trainer.predict(net, torch.as_tensor(task.val.x, dtype=torch.float32))
        test = trainer.predict(net, torch.as_tensor(task.test.x, dtype=torch.float32))
    np.testing.assert_allclose(val.double().numpy(), result.val_output, rtol=1e-6)
    np.testing.assert_allclose(test.double().numpy(), result.test_output, rtol=1e-6)
    if cut_at == "refit":
        assert result.shippable and len(fits) == 2
        assert "training split alone" in result.note
    else:
        assert not result.shippable and len(fits) == 1
        assert "fewer steps" in result.note


def test_a_classical_reference_the_budget_cuts_short_is_scored_on_the_series_it_reached(
    monkeypatch,
):
    """Scored on the windows it reached (NaN elsewhere), said in its row, paired with the
    MoE on the same windows, and never combined; too few windows: skipped."""
    import sgem.moe.classical_pool as classical_pool
    from sgem.leaderboard.board import rows, scored
    from sgem.leaderboard.members import reference_budget
    from sgem.leaderboard.series_members import MIN_SUBSET_WINDOWS, SUBSET, ClassicalReference
    from sgem.train.trainer import Trainer

    rng = np.random.default_rng(0)
    domains = {"walk": [50 + np.cumsum(rng.normal(0, 1, 300)) for _ in range(2)]}
    task = make_timeseries_task(domains, n_windows=500, n_clusters=4, context=24, horizon=6)
    space = TimeSeriesSpace(op_names=("linear_trend", "skip"), n_nodes=1, channels=2, patch_len=6)
    budget = reference_budget(Trainer(task, space, TrainConfig(steps=2)), 0, steps=3)
    for allowed, subset in ((120, True), (10, False)):
        calls = iter(range(10_000))
        monkeypatch.setattr(classical_pool, "fence_passed", lambda c=calls, a=allowed: next(c) > a)
        ets = ClassicalReference("AutoETS").fit_evaluate(task, budget)
        if not subset:
            assert ets.val_output is None and "skipped" in ets.note
            continue
        done = scored(ets.test_output)
        assert MIN_SUBSET_WINDOWS <= done.sum() < len(done)
        assert ets.extra[SUBSET] == f"{done.sum()} of {len(done)} series"
        row = rows(task, [ets], np.ones(len(task.val), bool), 0, 10)[0]
        assert row["subset"] == ets.extra[SUBSET] and np.isfinite(row["holdout"]["crps"])
        assert np.isfinite(row["validation"]["nll"])
