"""The baselines: one interface, the same protocol, domain labels for the oracle only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from sgem.baselines import (
    MixtureOfLinearExperts,
    available,
    geometry_partition,
    get_baseline,
    random_partition,
    register_baseline,
)
from sgem.baselines.naive import fit_spread, random_walk_spread
from sgem.baselines.seasonal_naive import choose_seasons, seasonal_forecast
from sgem.data.task import ClusteredTask, Split
from sgem.data.timeseries import make_timeseries_task
from sgem.methods.budget import MethodBudget, Shared
from sgem.space.timeseries import TimeSeriesSpace
from sgem.train.trainer import TrainConfig

CONTEXT, HORIZON = 48, 8
PAPER_METHODS = {
    "naive",
    "seasonal_naive",
    "dlinear",
    "global_single",
    "random_moe",
    "geometry",
    "bestarch_x_k",
    "nas_moe",
    "mole",
    "oracle",
}


def _domains(rng: np.random.Generator) -> dict[str, list[np.ndarray]]:
    t = np.arange(400)
    return {
        "daily_cycle": [10 + 3 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 0.3, 400)],
        "walk": [50 + np.cumsum(rng.normal(0, 1, 400))],
        "yearly": [5 + np.sin(2 * np.pi * t / 12) + rng.normal(0, 0.2, 400)],
        "trend": [1 + 0.05 * t + rng.normal(0, 0.5, 400)],
    }


@pytest.fixture(scope="module")
def task() -> ClusteredTask:
    domains = _domains(np.random.default_rng(0))
    return make_timeseries_task(
        domains, n_windows=240, n_clusters=6, context=CONTEXT, horizon=HORIZON, seed=0
    )


@pytest.fixture(scope="module")
def setup() -> MethodBudget:
    space = TimeSeriesSpace(
        op_names=("moving_average", "dilated_conv", "linear_trend", "skip"),
        n_nodes=2,
        channels=4,
        patch_len=8,
    )
    return MethodBudget(
        seed=0,
        space=space,
        train=TrainConfig(steps=5, lr=3e-3, batch_size=32),
        n_experts=2,
        trainings=4,
        final_steps=10,
        crps_samples=20,
    )


def _without_labels(task: ClusteredTask) -> ClusteredTask:
    def strip(s: Split) -> Split:
        return Split(s.x, s.y, s.cluster, None)

    return dataclasses.replace(
        task,
        train=strip(task.train),
        val=strip(task.val),
        test=strip(task.test),
        oracle_partition=None,
        meta={k: v for k, v in task.meta.items() if k != "windows"},
    )


@pytest.fixture(scope="module")
def results(task, setup) -> dict[str, dict]:
    return {name: get_baseline(name).fit_evaluate(task, setup).row(task) for name in PAPER_METHODS}


def test_registry_lists_every_paper_method_and_refuses_unknown_names():
    assert set(available()) >= PAPER_METHODS
    with pytest.raises(ValueError, match=r"unknown baseline 'no_such_method'.*available: naive"):
        get_baseline("no_such_method")
    with pytest.raises(ValueError, match="already registered"):
        register_baseline("naive", lambda: None)


def test_every_baseline_reports_the_same_scores(results, task):
    for name, r in results.items():
        assert r["method"] == name
        for key in ("test_nll", "test_crps", "test_crps_closed_form", "seconds"):
            assert np.isfinite(r[key]), (name, key)
        assert r["test_crps"] > 0
        # sample CRPS and closed form agree within sampling error (20 samples)
        assert r["test_crps"] == pytest.approx(r["test_crps_closed_form"], rel=0.1), name
        assert set(r["per_domain_test_nll"]) == set(task.meta["domain_names"])
        assert r["uses_domain_labels"] == (name == "oracle")


def test_cluster_gated_methods_report_routing_and_recovery(results, task, setup):
    for name in ("random_moe", "geometry", "bestarch_x_k", "nas_moe", "oracle"):
        r = results[name]
        a = np.asarray(r["assignment"])
        assert a.shape == (task.n_clusters,) and 0.0 <= r["oracle_match"] <= 1.0
        assert len(r["architectures"]) == a.max() + 1 and r["n_trained"] >= 1
    assert results["oracle"]["oracle_match"] == 1.0
    assert results["global_single"]["assignment"] == [0] * task.n_clusters
    # the three users of the best single architecture share one search
    single = results["global_single"]["architectures"][0]
    assert results["bestarch_x_k"]["architectures"] == [single] * setup.n_experts
    assert results["geometry"]["architectures"] == [single] * setup.n_experts


def test_label_free_methods_never_read_domain_labels(task, setup, results):
    blind = _without_labels(task)
    fresh = setup.replace(shared=Shared())
    for name in ("nas_moe", "geometry", "mole", "seasonal_naive"):
        r = get_baseline(name).fit_evaluate(blind, fresh).row(blind)
        assert r["test_nll"] == pytest.approx(results[name]["test_nll"], rel=1e-6), name
        assert r["assignment"] == results[name]["assignment"]
    with pytest.raises(ValueError, match="oracle_partition"):
        get_baseline("oracle").fit_evaluate(blind, fresh)


def test_random_partition_gives_every_expert_a_cluster():
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = random_partition(5, 4, rng)
        assert sorted(set(p.tolist())) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="fewer experts"):
        random_partition(3, 4, rng)


def test_geometry_groups_separated_centroids(task):
    centroids = np.concatenate([np.zeros((3, 2)), np.full((3, 2), 10.0)])
    centroids += np.random.default_rng(0).normal(0, 0.1, centroids.shape)
    fake = dataclasses.replace(task, centroids=centroids)
    p = geometry_partition(fake, 2, seed=0)
    assert len(set(p[:3])) == 1 and len(set(p[3:])) == 1 and p[0] != p[3]


def test_naive_spread_is_calibrated_on_a_random_walk():
    rng = np.random.default_rng(1)
    walks = np.cumsum(rng.normal(0, 2.0, (3000, CONTEXT + HORIZON)), axis=1)
    x, y = walks[:, :CONTEXT], walks[:, CONTEXT:]
    loc = np.repeat(x[:, -1:], HORIZON, 1)
    a, df = fit_spread(loc, random_walk_spread(x, HORIZON), y)
    assert 0.8 <= a <= 1.25 and df >= 6.0  # Gaussian steps: right spread, light tails


def test_seasonal_naive_repeats_the_detected_season():
    t = np.arange(CONTEXT + HORIZON)
    x = np.stack([np.sin(2 * np.pi * t / 24), np.sin(2 * np.pi * t / 12), np.cos(t / 50.0)])
    assert choose_seasons(x[:, :CONTEXT]).tolist()[:2] == [24, 12]
    loc, _ = seasonal_forecast(x[:2, :CONTEXT], HORIZON)
    np.testing.assert_allclose(loc, x[:2, CONTEXT:], atol=1e-9)


def test_mole_gate_is_a_softmax_and_forecasts_are_student_t():
    net = MixtureOfLinearExperts(CONTEXT, HORIZON, n_experts=3)
    x = torch.randn(5, CONTEXT)
    w = net.gate_weights(x)
    torch.testing.assert_close(w.sum(1), torch.ones(5))
    out = net(x)
    assert out.shape == (5, HORIZON, 3) and (out[..., 1] > 0).all() and (out[..., 2] > 2).all()


def test_forecasting_baselines_refuse_classification_tasks(setup):
    rng = np.random.default_rng(0)

    def split(n):
        return Split(rng.normal(size=(n, 2)), rng.integers(0, 2, n), np.arange(n) % 3)

    cls_task = ClusteredTask("c", split(30), split(9), split(9), 3, n_classes=2)
    with pytest.raises(ValueError, match="needs a 'student_t' task"):
        get_baseline("dlinear").fit_evaluate(cls_task, setup)


def test_measured_architecture_spread_under_oracle_routing(task, setup):
    from sgem.report.architecture_spread import measure_architecture_spread

    spread = measure_architecture_spread(task, setup.space, setup.train, n_archs=3, seed=0)
    groups = {task.meta["domain_names"][d] for d in np.unique(task.oracle_partition)}
    assert set(spread) == groups
    assert all(np.isfinite(v) and v > 0 for v in spread.values())
