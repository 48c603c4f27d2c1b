"""Validation and holdout at the end of every series: no held-out target is ever trained on,
validation comes before holdout, and every series with room is validated."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sgem.data.ts_end_split import end_split_windows


def _domains(lengths: list[list[int]], seed: int) -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return {
        f"d{d}": [rng.normal(10.0, 1.0, size=n).cumsum() for n in ns]
        for d, ns in enumerate(lengths)
    }


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.lists(st.integers(4, 60), min_size=3, max_size=12), min_size=1, max_size=3),
    context=st.integers(2, 12),
    horizon=st.integers(1, 6),
    n_windows=st.integers(10, 400),
    seed=st.integers(0, 3),
)
def test_held_out_targets_are_never_trained_on(lengths, context, horizon, n_windows, seed):
    domains = _domains(lengths, seed)
    out = end_split_windows(domains, context, horizon, n_windows, seed, (0.7, 0.15, 0.15))
    if out is None:  # fewer than three series of a domain have room: the caller splits at random
        return
    win, idx = out
    width = context + horizon
    where = {
        p: [(int(win.source[i]), int(win.series[i]), int(win.start[i])) for i in ix]
        for p, ix in idx.items()
    }
    first_target = {p: {} for p in ("val", "test")}
    for part in ("val", "test"):
        for d, j, s in where[part]:
            key = (d, j)
            first_target[part][key] = min(first_target[part].get(key, 10**9), s + context)
    for d, j, s in where["train"]:  # a training target ends before any held-out target begins
        for part in ("val", "test"):
            if (d, j) in first_target[part]:
                assert s + width <= first_target[part][(d, j)]
    for d, j, s in where["val"]:  # validation targets end before the holdout's begin
        if (d, j) in first_target["test"]:
            assert s + width <= first_target["test"][(d, j)]
    for d, ns in enumerate(lengths):  # every series long enough for two windows is held out:
        # validated, or in its turn where series have room for one held-out part only
        for j, n in enumerate(ns):
            if n >= 2 * width:
                assert (d, j) in first_target["val"] or (d, j) in first_target["test"]
    assert len(idx["val"]) > 0 and len(idx["test"]) > 0  # (an empty holdout ended a fit)


def test_series_with_room_for_one_held_out_part_take_turns_holding_out():
    """2000 series of 10-20 months at h = 6 (left-padded to 15+) had room for one held-out
    part each: all went to validation and the empty holdout ended the fit. Now they take
    turns. (21-26 points at context 9: one training window, then one held-out window.)"""
    rng = np.random.default_rng(0)
    lengths = [list(rng.integers(21, 27, size=200))]
    win, idx = end_split_windows(_domains(lengths, 0), 9, 6, 400, 0, (0.7, 0.15, 0.15))
    val = {int(win.series[i]) for i in idx["val"]}
    test = {int(win.series[i]) for i in idx["test"]}
    assert not val & test  # one part per series
    assert 0.4 < len(test) / len(val | test) < 0.6  # the holdout's share of the two parts


def test_every_series_ends_with_its_holdout():
    lengths = [[40] * 30]
    win, idx = end_split_windows(_domains(lengths, 0), 8, 4, 300, 0, (0.7, 0.15, 0.15))
    held = {int(win.series[i]) for i in idx["test"]}
    assert held == set(range(30))  # not a sample of series: all of them
    ends = {int(win.start[i]) + 12 for i in idx["test"]}
    assert max(ends) == 40  # the latest holdout target ends at the series' end


@settings(max_examples=30, deadline=None)
@given(
    lengths=st.lists(st.integers(6, 200), min_size=1, max_size=3),
    context=st.integers(2, 12),
    horizon=st.integers(1, 6),
    n_windows=st.integers(10, 400),
    seed=st.integers(0, 3),
)
def test_few_series_keep_their_holdout_at_the_end(lengths, context, horizon, n_windows, seed):
    """One or two series: the holdout is still each series' last windows (no training or
    validation target reaches into it), validation is drawn from the windows before it."""
    out = end_split_windows(
        _domains([lengths], seed), context, horizon, n_windows, seed, (0.7, 0.15, 0.15),
        validation="random",
    )  # fmt: skip
    if out is None:  # no series has room for a holdout
        assert all(n < 2 * (context + horizon) for n in lengths)
        return
    win, idx = out
    width = context + horizon
    first_held = {}
    for i in idx["test"]:
        j = int(win.series[i])
        first_held[j] = min(first_held.get(j, 10**9), int(win.start[i]) + context)
    for part in ("train", "val"):
        for i in idx[part]:
            j = int(win.series[i])
            if j in first_held:
                assert int(win.start[i]) + width <= first_held[j]
    for j in {int(win.series[i]) for i in idx["test"]}:  # the latest target ends the series
        ends = [int(win.start[i]) + width for i in idx["test"] if int(win.series[i]) == j]
        assert max(ends) == lengths[j]
    trained = {int(win.series[i]) for i in idx["train"]}
    assert {int(win.series[i]) for i in idx["val"]} <= trained  # every series trains


def test_one_long_series_is_held_out_at_its_end_and_validated_before_it():
    from sgem.data.timeseries import SPLIT_NAMES, make_timeseries_task

    t = np.arange(600)
    series = 20 + 5 * np.sin(2 * np.pi * t / 7) + np.random.default_rng(0).normal(0, 1, 600)
    task = make_timeseries_task(
        {"one": [series]}, n_windows=500, n_clusters=4, context=28, horizon=7,
        every_series=True,
    )  # fmt: skip
    assert task.meta["split"] == SPLIT_NAMES["holdout"]
    windows = task.meta["windows"]
    test_start = int(windows["test"].start.min())
    assert int(windows["test"].start.max()) + 35 == 600  # the holdout ends the series
    assert len(task.test) >= 50  # a share of the windows, not MAX_ORIGINS
    for part in ("train", "val"):  # nothing trained or validated reaches into it
        assert int(windows[part].start.max()) + 35 <= test_start + 28
    # validation is spread over the past, not the holdout's neighbourhood alone
    assert int(windows["val"].start.min()) < int(windows["train"].start.max())


def test_few_series_hold_out_enough_windows_and_many_keep_max_origins():
    from sgem.data.ts_end_split import MAX_ORIGINS, MIN_HELD_OUT

    win, idx = end_split_windows(_domains([[500] * 3], 0), 24, 12, 1200, 0, (0.7, 0.15, 0.15))
    for part in ("val", "test"):  # 34 origins each from three series, not MAX_ORIGINS
        assert len(idx[part]) >= MIN_HELD_OUT
    win, idx = end_split_windows(_domains([[500] * 30], 0), 24, 12, 12000, 0, (0.7, 0.15, 0.15))
    per_series = np.bincount(win.series[idx["test"]])
    assert per_series.max() == MAX_ORIGINS
