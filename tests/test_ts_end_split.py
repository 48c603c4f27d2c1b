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
    for d, ns in enumerate(lengths):  # every series long enough for two windows is validated
        for j, n in enumerate(ns):
            if n >= 2 * width:
                assert (d, j) in first_target["val"]
    assert len(idx["val"]) > 0


def test_every_series_ends_with_its_holdout():
    lengths = [[40] * 30]
    win, idx = end_split_windows(_domains(lengths, 0), 8, 4, 300, 0, (0.7, 0.15, 0.15))
    held = {int(win.series[i]) for i in idx["test"]}
    assert held == set(range(30))  # not a sample of series: all of them
    ends = {int(win.start[i]) + 12 for i in idx["test"]}
    assert max(ends) == 40  # the latest holdout target ends at the series' end
