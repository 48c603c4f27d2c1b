"""The validation-chosen final training length (sgem.final.length) and its use in
train_final_moe and the baselines' final training."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers import short_train, small_ts_space, small_ts_task

from sgem.baselines import get_baseline
from sgem.final.length import (
    ValidationLength,
    expert_length,
    resolve_length,
    track_validation,
)
from sgem.final.moe_fit import train_final_moe
from sgem.methods.budget import MethodBudget, Shared
from sgem.space.arch import Arch
from sgem.train.losses import per_sample_nll
from sgem.train.trainer import Trainer


# -- the model-agnostic loop ---------------------------------------------------------------
def _curve(loss_of):
    state = {"t": 0, "calls": []}

    def step(i: int) -> None:
        assert i == state["t"]
        state["t"] += 1

    def val_loss() -> float:
        state["calls"].append(state["t"])
        return loss_of(state["t"])

    return step, val_loss, state


def test_track_validation_picks_the_lowest_point_of_a_u_shaped_curve():
    step, val_loss, state = _curve(lambda t: (t - 50) ** 2)
    best, loss, done, curve = track_validation(step, val_loss, 100, 10)
    assert (best, loss, done) == (50, 0.0, 100)
    assert state["calls"] == list(range(10, 101, 10))
    assert [s for s, _ in curve] == state["calls"]


def test_track_validation_stops_after_patience_evaluations_without_a_new_best():
    step, val_loss, _ = _curve(lambda t: (t - 30) ** 2)
    best, _, done, curve = track_validation(step, val_loss, 100, 10, patience=2)
    assert best == 30
    assert done == 50  # 40 and 50 were worse: stopped there
    assert len(curve) == 5


def test_track_validation_evaluates_the_last_step_and_keeps_the_earlier_of_ties():
    step, val_loss, _ = _curve(lambda t: 1.0 if t >= 20 else 2.0)
    best, _, done, curve = track_validation(step, val_loss, 25, 10)
    assert done == 25
    assert best == 20  # 25 ties with 20: the shorter length wins
    assert [s for s, _ in curve] == [10, 20, 25]


def test_track_validation_never_picks_a_diverged_evaluation():
    step, val_loss, _ = _curve(lambda t: math.nan if t > 10 else 5.0 - t / 10)
    assert track_validation(step, val_loss, 40, 10)[0] == 10
    step, val_loss, _ = _curve(lambda t: math.inf)
    assert track_validation(step, val_loss, 40, 10)[0] == 10  # all diverged: the first


def test_validation_length_cap_refit_and_names():
    rule = ValidationLength()
    assert rule.cap(500) == (2000, 100)  # 4x the fixed length, 20 evaluations
    assert rule.cap(3) == (12, 1)
    assert rule.refit_steps(700, 2800, 600) == round(700 * 3400 / 2800)  # 850
    assert ValidationLength(scale_to_data=False).refit_steps(700, 2800, 600) == 700
    assert resolve_length("fixed") is None and resolve_length(None) is None
    assert resolve_length("validation") == ValidationLength()
    custom = ValidationLength(max_factor=2.0, patience=None)
    assert resolve_length(custom) is custom
    with pytest.raises(ValueError, match="unknown final length"):
        resolve_length("longest")
    with pytest.raises(ValueError):
        ValidationLength(max_factor=0)
    with pytest.raises(ValueError):
        ValidationLength(patience=0)


# -- on a small forecasting task ---------------------------------------------------------------
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


def _arch(space, seed: int = 0) -> Arch:
    return space.sample_many(1, np.random.default_rng(seed))[0]


def test_a_tracked_expert_trains_step_for_step_like_trainer_fit(task, space, trainer):
    arch = _arch(space)
    x_tr, y_tr = trainer.x_train, trainer.y_train
    x_va, y_va = trainer.x_val, trainer.y_val
    rule = ValidationLength(max_factor=1.0, n_evals=4, patience=None)
    choice = expert_length(trainer, arch, x_tr, y_tr, x_va, y_va, 7, 12, rule)
    assert [s for s, _ in choice.curve] == [3, 6, 9, 12]
    for steps, loss in choice.curve:
        model = trainer.fit(arch, x_tr, y_tr, seed=7, steps=steps)
        with torch.no_grad():
            expected = float(per_sample_nll(model(x_va), y_va, "student_t").double().mean())
        assert loss == pytest.approx(expected, rel=1e-5, abs=1e-6)
    best = min(choice.curve, key=lambda c: c[1])
    assert (choice.best_step, choice.best_val_nll) == (best[0], pytest.approx(best[1]))


def test_fixed_length_is_the_default_and_unchanged(task, space, trainer):
    archs = [_arch(space, 1), _arch(space, 2)]
    assignment = np.arange(task.n_clusters) % 2
    _, default = train_final_moe(task, trainer, assignment, archs, steps=8, seed=0)
    _, fixed = train_final_moe(task, trainer, assignment, archs, steps=8, seed=0, length="fixed")
    assert default.test_nll == fixed.test_nll
    assert default.steps == [8, 8]
    assert "final_length" not in default.to_json()


def test_validation_length_retrains_for_the_chosen_scaled_steps(task, space, trainer):
    archs = [_arch(space, 1), _arch(space, 2)]
    assignment = np.arange(task.n_clusters) % 2
    moe, report = train_final_moe(
        task, trainer, assignment, archs, steps=8, seed=0, length="validation"
    )
    info = report.to_json()["final_length"]
    assert len(info) == 2
    for k, f in enumerate(info):
        region = assignment == k
        n_tr = int(region[task.train.cluster].sum())
        n_va = int(region[task.val.cluster].sum())
        assert (f["n_train"], f["n_val"], f["max_steps"]) == (n_tr, n_va, 32)
        assert 1 <= f["best_step"] <= 32
        assert f["refit_steps"] == round(f["best_step"] * (n_tr + n_va) / n_tr)
        assert report.steps[k] == f["refit_steps"]
    # the retrained experts are exactly Trainer.fit on the region for those steps
    x = torch.as_tensor(np.concatenate([task.train.x, task.val.x]))
    y = torch.as_tensor(np.concatenate([task.train.y, task.val.y]))
    c = np.concatenate([task.train.cluster, task.val.cluster])
    sel = torch.as_tensor(assignment[c] == 0)
    ref = trainer.fit(archs[0], x[sel], y[sel], seed=0, steps=report.steps[0])
    for a, b in zip(ref.state_dict().values(), moe.experts[0].state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)


def _small_setup(space, **changes) -> MethodBudget:
    return MethodBudget(
        seed=0,
        space=space,
        train=short_train(),
        n_experts=2,
        trainings=2,
        final_steps=10,
        crps_samples=20,
        **changes,
    )


def test_baselines_use_the_validation_length_alike(task, space):
    setup = _small_setup(space)
    fixed = get_baseline("geometry").fit_evaluate(task, setup).row(task)
    assert fixed["steps"] == [10, 10] and "final_length" not in fixed
    val_setup = setup.replace(final_length="validation", shared=Shared())
    row = get_baseline("geometry").fit_evaluate(task, val_setup).row(task)
    assert row["steps"] == [f["refit_steps"] for f in row["final_length"]]
    assert all(f["max_steps"] == 40 for f in row["final_length"])
    lin_fixed = get_baseline("dlinear").fit_evaluate(task, setup).row(task)
    lin = get_baseline("dlinear").fit_evaluate(task, val_setup).row(task)
    assert lin_fixed["steps"] == 10
    n_tr, n_va = len(task.train), len(task.val)
    assert 1 <= lin["steps"] <= round(40 * (n_tr + n_va) / n_tr)
    with pytest.raises(ValueError, match="unknown final length"):
        setup.replace(final_length="long")


def test_norefit_names_resolve():
    assert resolve_length("validation-norefit") == ValidationLength(refit=False)
    warm = resolve_length("validation-warm-norefit")
    assert warm == ValidationLength(warm_start=True, refit=False)
    assert resolve_length("validation-warm") == ValidationLength(warm_start=True)


def test_norefit_keeps_the_tracked_network_as_the_final_expert(task, space, trainer):
    """Without a refit each expert IS its tracking run's network at the best step: trained on
    the region's training samples only, so it scores on validation what the run reported."""
    archs = [_arch(space, 1), _arch(space, 2)]
    assignment = np.arange(task.n_clusters) % 2
    for length in ("validation-norefit", "validation-warm-norefit"):
        moe, report = train_final_moe(
            task, trainer, assignment, archs, steps=8, seed=0, length=length
        )
        info = report.to_json()["final_length"]
        for k, f in enumerate(info):
            # no refit: the steps it was tracked for, and the report says so
            assert report.steps[k] == f["best_step"] == f["refit_steps"]
            va = torch.as_tensor(assignment[task.val.cluster] == k)
            expert = moe.experts[k].eval()
            with torch.no_grad():
                out = trainer.predict(expert, trainer.x_val[va])
                nll = float(per_sample_nll(out, trainer.y_val[va], "student_t").double().mean())
            assert nll == pytest.approx(f["best_val_nll"], rel=1e-5, abs=1e-6)


def test_norefit_reaches_the_direct_forecasters(task, space):
    setup = _small_setup(space, final_length="validation-norefit")
    kept = get_baseline("dlinear").fit_evaluate(task, setup).row(task)
    refit_setup = setup.replace(final_length="validation", shared=Shared())
    refit = get_baseline("dlinear").fit_evaluate(task, refit_setup).row(task)
    n_tr, n_va = len(task.train), len(task.val)
    # the same tracking run: the refit scales its best step, the kept network is at it
    assert refit["steps"] == round(kept["steps"] * (n_tr + n_va) / n_tr)
    assert kept["test_nll"] != refit["test_nll"]


def test_a_refit_that_cannot_end_before_the_fence_keeps_the_tracked_network(task, space, trainer):
    """Under a time budget, an expert whose refit from scratch would be cut at the fence
    keeps its tracking run's best network (trained on the training split): the refit would
    end less trained, or, when the tracking run itself was cut, after one step (an untrained
    network: a 5-minute fit of 923 monthly series saved experts that were)."""
    import time

    from sgem.final import expert_fit
    from sgem.final.expert_fit import ExpertJob, fit_expert
    from sgem.train.time_fence import training_fence

    arch = _arch(space)
    every = np.ones(task.n_clusters, dtype=bool)
    rule = ValidationLength(max_factor=1.0, n_evals=4, patience=None)
    job = ExpertJob(0, arch, every, 7, 12, None, rule)
    assert expert_fit._refit_ends_in_time({"stopped_at": 10, "refit_steps": 10}, 1.0)  # no fence
    with training_fence(time.time() + 3600):
        assert expert_fit._refit_ends_in_time({"stopped_at": 10, "refit_steps": 10}, 1.0)
        assert not expert_fit._refit_ends_in_time({"stopped_at": 10, "refit_steps": 20}, 2e4)
        refitted = fit_expert(task, trainer, job)  # in time: refitted on train + validation
        assert "refit_skipped" not in refitted.length and refitted.module is not None
        with pytest.MonkeyPatch.context() as mp:  # a refit that would end past the fence
            mp.setattr(expert_fit, "_refit_ends_in_time", lambda length, seconds: False)
            kept = fit_expert(task, trainer, job)
    assert (
        kept.module is None and kept.state is not None and "fence" in kept.length["refit_skipped"]
    )
    assert kept.steps == kept.length["best_step"]
    model, _, _ = kept.materialise(trainer, arch)
    tracked = trainer.fit(arch, trainer.x_train, trainer.y_train, seed=7, steps=kept.steps)
    for a, b in zip(model.state_dict().values(), tracked.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)


def test_a_refit_the_fence_cut_short_gives_way_to_the_tracked_network(task, space, trainer):
    """A refit that started in time but was stopped by the fence before its length (other
    jobs slowed it) is a network left mid-schedule: the tracked network is shipped instead,
    and its length record says so."""
    import time

    import sgem.train.trainer as trainer_module
    from sgem.final import expert_fit
    from sgem.final.expert_fit import ExpertJob, fit_expert
    from sgem.train.time_fence import training_fence

    arch = _arch(space)
    every = np.ones(task.n_clusters, dtype=bool)
    rule = ValidationLength(max_factor=1.0, n_evals=4, patience=None)
    job = ExpertJob(0, arch, every, 7, 12, None, rule)
    tracked_done = {"yes": False}
    track = expert_fit._validation_length

    def tracking_then_flag(*args, **kwargs):
        out = track(*args, **kwargs)
        tracked_done["yes"] = True  # the fence "passes" once the tracking run is over
        return out

    with training_fence(time.time() + 3600), pytest.MonkeyPatch.context() as mp:
        mp.setattr(expert_fit, "_validation_length", tracking_then_flag)
        mp.setattr(expert_fit, "fence_passed", lambda: tracked_done["yes"])
        mp.setattr(trainer_module, "fence_passed", lambda: tracked_done["yes"])
        cut = fit_expert(task, trainer, job)
    assert cut.module is None and cut.state is not None and "fence" in cut.length["refit_cut"]
    assert cut.steps == cut.length["best_step"]
    model, _, _ = cut.materialise(trainer, arch)
    tracked = trainer.fit(arch, trainer.x_train, trainer.y_train, seed=7, steps=cut.steps)
    for a, b in zip(model.state_dict().values(), tracked.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)
    with training_fence(time.time() + 3600):  # not cut: refitted as before
        whole = fit_expert(task, trainer, job)
    assert "refit_cut" not in whole.length and whole.module is not None


def test_a_fixed_length_training_the_fence_cuts_is_reported_and_too_short_ones_untrained(
    task, space, trainer
):
    """A final expert trained for a fixed length with no tracked network to fall back on,
    stopped by the budget's fence, says how many steps it made: a 2-minute fit of 120 daily
    weather series saved experts that made 1 of 100 (its forecasts of 33-degree days were
    near 0), and the leaderboard gives such an MoE no weight (`untrained_experts`)."""
    import sgem.train.trainer as trainer_module
    from sgem.final.expert_fit import MIN_TRAINED_FRACTION, ExpertJob, fit_expert
    from sgem.final.moe_fit import MoEReport

    job = ExpertJob(0, _arch(space), np.ones(task.n_clusters, dtype=bool), 7, 50, None, None)
    whole = fit_expert(task, trainer, job)
    assert whole.cut is None and whole.steps == 50
    with pytest.MonkeyPatch.context() as mp:  # the fence has passed: one step, then stop
        mp.setattr(trainer_module, "fence_passed", lambda: True)
        cut = fit_expert(task, trainer, job)
    assert cut.cut == {"steps": 1, "of": 50} and cut.steps == 1
    assert cut.portable().cut == cut.cut  # (sent back from a worker process as well)
    short = int(MIN_TRAINED_FRACTION * 50) - 1
    report = MoEReport(
        None,
        float("nan"),
        [],
        0.0,
        final_training_cut={
            "0": cut.cut,
            "1": {"steps": short, "of": 50},
            "2": {"steps": 40, "of": 50},
        },
    )
    assert report.untrained_experts() == [0, 1]  # expert 2 made most of its steps
    assert report.to_json()["final_training_cut"]["0"] == {"steps": 1, "of": 50}
