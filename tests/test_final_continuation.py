"""The continuation refit (`final_length: validation-continue`, `validation-warm-continue`):
the tracked network at its best step trains on, on train + validation, for the steps the
validation samples add, instead of a retrain from scratch (sgem.moe.final_length)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers import short_train, small_ts_space, small_ts_task

from sgem.baselines import BaselineSetup, get_baseline
from sgem.budget import final_units
from sgem.moe.cluster_gated import train_final_moe
from sgem.moe.final_length import ValidationLength, expert_length, resolve_length
from sgem.search.config import SearchConfig
from sgem.space.arch import Arch
from sgem.train.trainer import Trainer


def test_continuation_names_steps_and_price():
    assert resolve_length("validation-continue") == ValidationLength(continuation=True)
    warm = resolve_length("validation-warm-continue")
    assert warm == ValidationLength(warm_start=True, continuation=True)
    rule = ValidationLength(continuation=True)
    # a retrain would make round(700 * 3400 / 2800) = 850 steps; 700 are made already
    assert rule.refit_steps(700, 2800, 600) == 150
    assert rule.refit_steps(0, 2800, 600) == 0  # an unimproved warm start stays as it is
    assert ValidationLength(continuation=True, scale_to_data=False).refit_steps(700, 2800, 600) == 0
    with pytest.raises(ValueError, match="needs refit=True"):
        ValidationLength(refit=False, continuation=True)
    assert rule.needs_tracked_state and ValidationLength(refit=False).needs_tracked_state
    assert not ValidationLength().needs_tracked_state
    cfg = SearchConfig(n_experts=4, champion_cells=16, final_steps=500)
    for length in ("validation", "validation-warm"):
        cont = final_units(cfg, f"{length}-continue", 1.2)
        assert final_units(cfg, f"{length}-norefit", 1.2) < cont < final_units(cfg, length, 1.2)


CONTEXT, HORIZON = 48, 8


@pytest.fixture(scope="module")
def task():
    return small_ts_task(context=CONTEXT, horizon=HORIZON)


@pytest.fixture(scope="module")
def space():
    return small_ts_space()


@pytest.fixture(scope="module")
def trainer(task, space):
    return Trainer(task, space, short_train())


def _arch(space, seed: int) -> Arch:
    return space.sample_many(1, np.random.default_rng(seed))[0]


def test_a_continued_expert_is_its_tracked_network_trained_on(task, space, trainer):
    """Expert 0 equals: its tracking run's network at the best step (kept), fine-tuned on the
    region's train + validation samples for the added steps with the expert's seed."""
    archs = [_arch(space, 1), _arch(space, 2)]
    assignment = np.arange(task.n_clusters) % 2
    moe, report = train_final_moe(
        task, trainer, assignment, archs, steps=8, seed=0, length="validation-continue"
    )
    info = report.to_json()["final_length"]
    for k, f in enumerate(info):
        retrain = round(f["best_step"] * (f["n_train"] + f["n_val"]) / f["n_train"])
        assert report.steps[k] == f["refit_steps"] == retrain - f["best_step"]
    region = assignment == 0
    tr, va = region[task.train.cluster], region[task.val.cluster]

    def tensors(split, sel):
        return (
            torch.as_tensor(split.x[sel], dtype=torch.float32),
            torch.as_tensor(split.y[sel]),
        )

    (x_tr, y_tr), (x_va, y_va) = tensors(task.train, tr), tensors(task.val, va)
    rule = resolve_length("validation-continue")
    tracked = expert_length(trainer, archs[0], x_tr, y_tr, x_va, y_va, 0, 8, rule, None, True)
    assert tracked.best_step == info[0]["best_step"]
    x, y = torch.cat([x_tr, x_va]), torch.cat([y_tr, y_va])
    ref = trainer.fit(
        archs[0],
        x,
        y,
        seed=0,
        steps=report.steps[0],
        init_state=tracked.best_state,
        init_opt_state=tracked.best_opt_state,
    )
    for a, b in zip(ref.state_dict().values(), moe.experts[0].state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)


def test_warm_continuation_trains_and_differs_from_the_retrain(task, space, trainer):
    archs = [_arch(space, 1), _arch(space, 2)]
    assignment = np.arange(task.n_clusters) % 2
    runs = {
        length: train_final_moe(task, trainer, assignment, archs, steps=8, seed=0, length=length)
        for length in ("validation-warm", "validation-warm-continue")
    }
    retrain, cont = (runs[k][1] for k in ("validation-warm", "validation-warm-continue"))
    # the same tracking runs choose the same lengths; only what follows them differs
    best = [f["best_step"] for f in retrain.to_json()["final_length"]]
    assert best == [f["best_step"] for f in cont.to_json()["final_length"]]
    assert np.isfinite(cont.test_nll) and cont.test_nll != retrain.test_nll


def test_continuation_reaches_the_direct_forecasters(task, space):
    setup = BaselineSetup(
        space=space,
        train=short_train(),
        n_experts=2,
        budget=2,
        final_steps=10,
        crps_samples=20,
        final_length="validation-norefit",
    )
    kept = get_baseline("dlinear").fit_evaluate(task, setup, seed=0)
    cont_setup = dataclasses.replace(setup, final_length="validation-continue", cache={})
    cont = get_baseline("dlinear").fit_evaluate(task, cont_setup, seed=0)
    n_tr, n_va = len(task.train), len(task.val)
    # the same tracking run: the continuation adds what a retrain's scaling would
    assert cont["steps"] == round(kept["steps"] * (n_tr + n_va) / n_tr) - kept["steps"]
    assert cont["test_nll"] != kept["test_nll"]
