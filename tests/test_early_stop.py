"""Candidates early-stopped on their own region (`TrainConfig.early_stop_evals`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import small_ts_space, small_ts_task
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from sgem.data.toy import make_toy_task
from sgem.errors import SgemUserError
from sgem.space import TabularSpace
from sgem.train.batched import supports
from sgem.train.early_stop import RegionEarlyStopping
from sgem.train.trainer import TrainConfig, Trainer


def _feed(stop: RegionEarlyStopping, vectors: list[np.ndarray], every: int) -> int:
    """Call the monitor as `Trainer.optimise` would; return the steps made."""
    total = every * len(vectors)
    it = iter(vectors)
    for done in range(1, total + 1):
        if (done % every == 0 or done == total) and _call(stop, next(it), done, total):
            return done
    return total


def _call(stop: RegionEarlyStopping, vec: np.ndarray, done: int, total: int) -> bool:
    stop.cluster_losses = lambda _model: vec
    return stop(nn.Identity(), done, total)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.floats(0.0, 5.0), min_size=4, max_size=4), min_size=1, max_size=12),
    st.lists(st.booleans(), min_size=4, max_size=4).filter(any),
    st.one_of(st.none(), st.integers(1, 4)),
)
def test_the_region_mean_picks_the_evaluation_and_patience_stops(curve, mask, patience):
    counts = np.array([3.0, 1.0, 2.0, 4.0])
    mask = np.array(mask)
    vectors = [np.array(v) for v in curve]
    stop = RegionEarlyStopping(lambda _m: vectors[0], counts, mask, len(vectors), patience)
    made = _feed(stop, vectors, every=2)
    w = counts * mask / (counts * mask).sum()
    scores = [float(np.sum(w * v)) for v in vectors]
    # the reference: the first strict minimum, with patience counted as the monitor does
    best, best_i, since, seen = np.inf, -1, 0, 0
    for i, s in enumerate(scores):
        seen = i + 1
        if s < best:
            best, best_i, since = s, i, 0
        else:
            since += 1
            if patience is not None and since >= patience:
                break
    np.testing.assert_array_equal(stop.losses, vectors[best_i])
    assert stop.best_step == 2 * (best_i + 1)
    assert made == 2 * seen
    # clusters outside the mask never take part in the choice
    bumped = [v + 10.0 * (~mask) * (i % 2) for i, v in enumerate(vectors)]
    other = RegionEarlyStopping(lambda _m: bumped[0], counts, mask, len(bumped), patience)
    _feed(other, bumped, every=2)
    assert other.best_step == stop.best_step


def test_non_finite_evaluations_never_win():
    stop = RegionEarlyStopping(lambda _m: None, np.ones(2), np.array([True, True]), 3, None)
    vectors = [np.array([np.nan, 1.0]), np.array([2.0, 2.0]), np.array([np.inf, 0.0])]
    _feed(stop, vectors, every=1)
    np.testing.assert_array_equal(stop.losses, vectors[1])
    diverged = RegionEarlyStopping(lambda _m: None, np.ones(1), np.array([True]), 1, None)
    _feed(diverged, [np.array([np.nan])], every=1)
    assert np.isnan(diverged.losses).all()  # reported as it is: the surrogate sees a failure


@pytest.fixture(scope="module")
def ts_task():
    return small_ts_task()


def test_an_early_stopped_candidate_equals_a_fixed_one_of_its_best_length(ts_task):
    """Step mode draws one batch per step from the seeded generator, so stopping at the
    best evaluation gives the network a fixed training of that many steps would give."""
    space = small_ts_space()
    arch = space.sample_many(1, np.random.default_rng(3))[0]
    cfg = TrainConfig(steps=40, lr=1e-2, batch_size=16, early_stop_evals=8)
    stopped = Trainer(ts_task, space, cfg)
    mask = np.arange(ts_task.n_clusters) % 2 == 0
    sel = np.asarray(mask)[ts_task.train.cluster]
    counts = np.bincount(ts_task.val.cluster, minlength=ts_task.n_clusters)
    stop = RegionEarlyStopping(stopped.cluster_losses, counts, mask, 8, None)
    stopped.fit(arch, stopped.x_train[sel], stopped.y_train[sel], seed=5, monitor=stop)
    assert [s for s, _ in stop.curve] == [5, 10, 15, 20, 25, 30, 35, 40]
    fixed = Trainer(ts_task, space, dataclasses.replace(cfg, early_stop_evals=None))
    model = fixed.fit(arch, fixed.x_train[sel], fixed.y_train[sel], seed=5, steps=stop.best_step)
    np.testing.assert_allclose(fixed.cluster_losses(model), stop.losses, rtol=1e-5, atol=1e-6)
    # Trainer.train reports the same vector
    outcome = stopped.train(arch, mask, seed=5)
    np.testing.assert_allclose(outcome.losses, stop.losses, rtol=1e-6)


def test_config_checks_and_the_vectorised_path_steps_aside():
    with pytest.raises(SgemUserError, match="early_stop_evals"):
        TrainConfig(early_stop_evals=0)
    with pytest.raises(SgemUserError, match="early_stop_patience"):
        TrainConfig(early_stop_evals=4, early_stop_patience="3")  # type: ignore[arg-type]
    toy = make_toy_task(seed=0)
    space = TabularSpace()
    assert supports(toy, space, TrainConfig())
    assert not supports(toy, space, TrainConfig(early_stop_evals=5))


def test_predicting_no_sample_gives_an_empty_batch(ts_task):
    space = small_ts_space()
    trainer = Trainer(ts_task, space, TrainConfig(steps=2, batch_size=8, eval_batch_size=4))
    model = trainer.fit(
        space.sample_many(1, np.random.default_rng(0))[0], trainer.x_train, trainer.y_train, seed=0
    )
    out = trainer.predict(model, trainer.x_val[:0])
    assert out.shape == (0, trainer.n_out)
