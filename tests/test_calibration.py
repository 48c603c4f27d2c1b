"""Calibration: conformal intervals reach their level, a temperature mends overconfident
probabilities, the run stores both as plain numbers and the model applies them; quantiles
stay inside a nonnegative target's support; models saved without calibration behave as
before; NaN weights are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

import sgem
from sgem.errors import SgemUserError
from sgem.moe.artifact import EXPERTS_FILE, MODEL_JSON, _sha256, save_final_moe
from sgem.moe.calibration import (
    MIN_FLOOR,
    IntervalCalibration,
    coverage,
    expected_calibration_error,
    fit_probability_calibration,
    fit_temperature,
    never_negative,
    nll,
    probability_nll,
    softmax,
    t_quantiles,
    with_floor,
)
from sgem.space import Arch, TabularSpace
from sgem.train import TrainConfig, Trainer


def _student(rng, n: int, spread: float, df: float = 6.0):
    """Outputs claiming scale 1 for targets whose real spread is `spread` x that."""
    loc = rng.normal(0, 3, (n, 1))
    scale = rng.uniform(0.5, 2.0, (n, 1))
    y = loc + spread * scale * rng.standard_t(df, (n, 1))
    return y, loc, scale, np.full((n, 1), df)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    spread=st.floats(0.3, 3.0),
    n_val=st.integers(200, 600),
    level=st.sampled_from([0.5, 0.8, 0.9]),
)
def test_conformal_correction_reaches_its_coverage(seed, spread, n_val, level) -> None:
    rng = np.random.default_rng(seed)
    y, loc, scale, df = _student(rng, n_val + 4000, spread)
    val, test = slice(0, n_val), slice(n_val, None)
    cluster = np.zeros(len(y), dtype=int)
    cal = IntervalCalibration.fit(y[val], loc[val], scale[val], df[val], cluster[val])
    qs = (0.5 - level / 2, 0.5 + level / 2)
    q = t_quantiles(loc[test], scale[test], df[test], qs, cluster[test], cal)
    got = coverage(y[test], q[qs[0]], q[qs[1]])["overall"]
    # the conformal coverage is Beta-distributed around the level (sd sqrt(L(1-L)/n)),
    # plus the test sample's own noise: 4.5 sd is a bound no seed should cross
    tol = 4.5 * np.sqrt(level * (1 - level) / (n_val + 1)) + 0.03
    assert abs(got - level) < tol


def test_each_cluster_with_enough_samples_gets_its_own_correction() -> None:
    rng = np.random.default_rng(0)
    parts = [_student(rng, 2400, s) for s in (0.4, 2.5)]
    y, loc, scale, df = (np.concatenate([p[i] for p in parts]) for i in range(4))
    cluster = np.repeat([0, 1], 2400)
    val = np.r_[0:400, 2400:2800]
    test = np.setdiff1d(np.arange(4800), val)
    cal = IntervalCalibration.fit(y[val], loc[val], scale[val], df[val], cluster[val])
    assert set(cal.per_cluster) == {0, 1}
    q = t_quantiles(loc[test], scale[test], df[test], (0.1, 0.9), cluster[test], cal)
    per = coverage(y[test], q[0.1], q[0.9], cluster[test], "cluster")["per_cluster"]
    assert all(abs(v - 0.8) < 0.05 for v in per.values()), per
    # a cluster below the minimum count shares the pooled correction; a JSON round trip
    few = IntervalCalibration.fit(*(a[val] for a in (y, loc, scale, df, cluster)), min_count=500)
    assert few.per_cluster == {}
    again = IntervalCalibration.from_json(json.loads(json.dumps(cal.to_json())))
    assert again.pooled == cal.pooled and again.per_cluster.keys() == cal.per_cluster.keys()


def test_quantiles_never_cross_and_keep_the_order_asked_for() -> None:
    rng = np.random.default_rng(1)
    y, loc, scale, df = _student(rng, 300, 0.2)  # very wide raw: corrections shrink
    cal = IntervalCalibration.fit(y, loc, scale, df, np.zeros(300, int))
    q = t_quantiles(loc, scale, df, (0.9, 0.45, 0.55, 0.1), np.zeros(300, int), cal)
    assert list(q) == [0.9, 0.45, 0.55, 0.1]
    assert np.all(q[0.1] <= q[0.45]) and np.all(q[0.45] <= q[0.55]) and np.all(q[0.55] <= q[0.9])


def test_temperature_lowers_nll_of_overconfident_logits() -> None:
    rng = np.random.default_rng(0)
    true_logits = rng.normal(0, 1.0, (3000, 4))
    probs = softmax(true_logits)
    y = np.asarray([rng.choice(4, p=p) for p in probs])
    overconfident = 4.0 * true_logits
    t = fit_temperature(overconfident[:1500], y[:1500])
    assert 3.0 < t < 5.5
    assert nll(overconfident[1500:] / t, y[1500:]) < nll(overconfident[1500:], y[1500:]) - 0.2
    before = expected_calibration_error(softmax(overconfident[1500:]), y[1500:])
    after = expected_calibration_error(softmax(overconfident[1500:], t), y[1500:])
    assert after < before / 2
    assert np.array_equal(softmax(overconfident, t).argmax(1), overconfident.argmax(1))


def test_temperature_sharpens_underconfident_logits_but_never_a_perfect_split() -> None:
    rng = np.random.default_rng(1)
    true_logits = rng.normal(0, 2.0, (2000, 3))
    y = np.asarray([rng.choice(3, p=p) for p in softmax(true_logits)])
    assert 0.3 < fit_temperature(0.5 * true_logits, y) < 0.65  # underconfident: T < 1
    # a validation split classified without an error (36 clean rows): the likelihood rises
    # as T -> 0, which would make every probability 0 or 1; T stays at 1 or above
    separated = np.eye(3)[np.arange(36) % 3] * 6.0 + rng.normal(0, 0.5, (36, 3))
    t = fit_temperature(separated, np.arange(36) % 3)
    assert 1.0 <= t < 1.2
    assert softmax(separated, t).max() < 1.0 - 1e-6


def _certain_and_wrong(rng, n: int, share: float):
    """Well-calibrated logits of 4 classes where `share` of the rows are of a class the
    network is certain they are not (an expert given a class its clusters never had)."""
    true_logits = rng.normal(0, 1.5, (n, 4))
    y = np.asarray([rng.choice(4, p=p) for p in softmax(true_logits)])
    alien = rng.random(n) < share
    true_logits[alien, y[alien]] = -60.0
    return true_logits, y


def test_a_floor_answers_rows_that_are_certain_and_wrong() -> None:
    rng = np.random.default_rng(3)
    logits, y = _certain_and_wrong(rng, 4000, 0.01)
    fit, held = slice(0, 2000), slice(2000, None)
    t_only = fit_temperature(logits[fit], y[fit])
    t, floor = fit_probability_calibration(logits[fit], y[fit])
    assert t_only > 2  # one temperature flattens every row to answer the few
    assert t < 1.25 and floor > 0.01  # the floor answers them; the rest stay sharp
    flattened = softmax(logits[held], t_only)
    calibrated = with_floor(softmax(logits[held], t), floor)
    assert probability_nll(calibrated, y[held]) < probability_nll(flattened, y[held]) - 0.2
    ece = [expected_calibration_error(p, y[held]) for p in (calibrated, flattened)]
    assert ece[0] < 0.05 < 0.15 < ece[1]
    assert np.array_equal(calibrated.argmax(1), logits[held].argmax(1))


def test_the_floor_stays_at_its_least_without_such_rows_and_caps_a_row_s_nll() -> None:
    rng = np.random.default_rng(4)
    logits, y = _certain_and_wrong(rng, 2000, 0.0)
    t, floor = fit_probability_calibration(logits, y)
    assert floor == pytest.approx(MIN_FLOOR, rel=0.02) and 0.8 < t < 1.25
    one_alien = np.array([[-300.0, 0.0, 0.0, 0.0]])  # p(class 0) ~ e^-300 raw
    assert nll(one_alien, np.array([0])) > 290
    capped = probability_nll(with_floor(softmax(one_alien), floor), np.array([0]))
    assert capped == pytest.approx(np.log(4 / MIN_FLOOR), rel=1e-3)


def test_never_negative_reads_the_whole_history() -> None:
    context = np.ones((2, 3))
    assert never_negative([np.r_[-1.0, 2, 2, 2], np.r_[0.0, 1, 1]], context).tolist() == [
        False,
        True,
    ]
    assert never_negative(np.ones((2, 5)), context).tolist() == [True, True]
    assert never_negative("not series", -context).tolist() == [False, False]


# -- saved models -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def raw_model(tmp_path_factory):
    """A classifier saved the way models were saved before calibration existed."""
    task = sgem.make_toy_task(seed=0, n_per_cloud=100, n_test_per_cloud=50, n_clusters=4)
    space = TabularSpace(n_nodes=2)
    archs = [Arch(("linear", "rbf"), (0, 0)), Arch(("rbf", "identity"), (0, 1))]
    trainer = Trainer(task, space, TrainConfig(steps=20))
    from sgem.final.moe_fit import train_final_moe

    moe, report = train_final_moe(task, trainer, np.arange(4) % 2, archs, steps=20, seed=1)
    path = tmp_path_factory.mktemp("raw") / "model"
    save_final_moe(path, task, space, moe, trainer.n_out, metrics=report.to_json())
    return task, path


def test_a_model_saved_without_calibration_behaves_as_before(raw_model) -> None:
    task, path = raw_model
    model = sgem.load(path)
    assert model.calibration == {} and model.temperature is None
    x = task.test.x[:20]
    out = model.outputs(x, model.route(x).cluster)
    assert np.array_equal(model.predict_proba(x), torch.softmax(out, 1).numpy())
    assert np.array_equal(model.predict_proba(x), model.predict_proba(x, calibrated=False))
    text = model.summary()
    assert "holdout: the run's test split (never used to fit or choose)" in text
    assert "calibrat" not in text


def test_nan_weights_are_refused_naming_the_tensor(raw_model, tmp_path) -> None:
    import shutil

    _, path = raw_model
    copy = tmp_path / "m"
    shutil.copytree(path, copy)
    weights = load_file(str(copy / EXPERTS_FILE))
    name = sorted(weights)[0]
    weights[name] = weights[name].clone()
    weights[name].view(-1)[0] = float("nan")
    save_file(weights, str(copy / EXPERTS_FILE))
    doc = json.loads((copy / MODEL_JSON).read_text())
    doc["files"][EXPERTS_FILE] = _sha256(copy / EXPERTS_FILE)  # a model saved with NaN
    (copy / MODEL_JSON).write_text(json.dumps(doc))
    with pytest.raises(SgemUserError, match=rf"'{name}'.*re-fit"):
        sgem.load(copy)


# -- where the validation predictions come from ------------------------------------------


@pytest.fixture(scope="module")
def forecaster():
    from helpers import short_train, small_ts_space, small_ts_task

    task = small_ts_task()
    space = small_ts_space()
    trainer = Trainer(task, space, short_train())
    archs = [Arch(("moving_average", "skip"), (0, 0)), Arch(("linear_trend", "skip"), (0, 1))]
    return task, space, trainer, archs, np.arange(task.n_clusters) % 2


def _val_tensors(task, sel):
    return torch.as_tensor(task.val.x[sel], dtype=torch.float32)


def test_validation_predictions_come_from_networks_that_never_saw_them(forecaster) -> None:
    from sgem.final import FinalProtocol, run_final
    from sgem.final.calibration import validation_outputs
    from sgem.random_streams import expert_seed

    task, _, trainer, archs, assignment = forecaster
    final = run_final(task, trainer, assignment, archs, FinalProtocol(5), seed=0)
    out, has = validation_outputs(task, trainer, final, 0, "fixed")
    assert has.all()
    region = assignment == 0
    tr, va = region[task.train.cluster], region[task.val.cluster]
    x_tr = torch.as_tensor(task.train.x[tr], dtype=torch.float32)
    net = trainer.fit(archs[0], x_tr, torch.as_tensor(task.train.y[tr]), expert_seed(0, 0), 5)
    with torch.no_grad():
        expected = trainer.predict(net, _val_tensors(task, va)).double().numpy()
    np.testing.assert_allclose(out[va], expected, rtol=1e-6)
    with torch.no_grad():  # the refitted model's own outputs are another (in-sample) thing
        refit = final.moe(_val_tensors(task, slice(None)), torch.as_tensor(task.val.cluster))
    assert not np.allclose(out, refit.double().numpy())
    norefit = FinalProtocol.from_name("validation-norefit", 5)
    kept = run_final(task, trainer, assignment, archs, norefit, seed=0)
    out, _ = validation_outputs(task, trainer, kept, 0, "validation-norefit")
    with torch.no_grad():  # without a refit the final networks never saw validation
        own = kept.moe(_val_tensors(task, slice(None)), torch.as_tensor(task.val.cluster))
    np.testing.assert_allclose(out, own.double().numpy(), rtol=1e-6)


def test_a_calibrated_forecaster_keeps_nonnegative_series_at_or_above_zero(
    forecaster, tmp_path
) -> None:
    from sgem.final import FinalProtocol, run_final
    from sgem.final.calibration import calibrate_final

    task, space, trainer, archs, assignment = forecaster
    warm = FinalProtocol.from_name("validation-warm", 5)
    final = run_final(task, trainer, assignment, archs, warm, seed=0)
    cal = calibrate_final(task, trainer, final, 0, length="validation-warm")
    report = cal.report
    assert report["holdout"]["coverage_80"]["calibrated"]["per_domain"].keys() == {
        "cycle",
        "walk",
        "trend",
    }
    save_final_moe(
        tmp_path / "m", task, space, final.moe, trainer.n_out, info={"calibration": cal.state}
    )
    model = sgem.load(tmp_path / "m")
    rng = np.random.default_rng(0)
    sparse = [np.where(rng.random(60) < 0.3, rng.exponential(5.0, 60), 0.0) for _ in range(4)]
    raw = model.forecast(sparse, quantiles=(0.05, 0.95), calibrated=False)
    fc = model.forecast(sparse, quantiles=(0.05, 0.95))
    assert raw.quantiles[0.05].min() < 0  # the raw Student-t goes below 0
    assert fc.quantiles[0.05].min() >= 0 and fc.point.min() >= 0
    signed = [s - 3.0 for s in sparse]  # a history below 0: nothing is clipped
    assert model.forecast(signed, quantiles=(0.05,)).quantiles[0.05].min() < 0
    assert "80 % interval coverage" in model.summary()
