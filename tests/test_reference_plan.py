"""A forecaster's classical references planned member by member (`sgem.run.reference_plan`):
the subset's seconds split so that each kept member reaches the same share of the series,
the costliest left out (with its reason) where that share is too few windows to score."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgem.leaderboard.series_members import MIN_SUBSET_WINDOWS
from sgem.run.reference_plan import plan_references, process_start, subset_shares


def _reached(shares: dict[str, float], costs: dict[str, float]) -> dict[str, float]:
    """The share of the series each member's seconds buy (a process start each where its
    refits are pooled)."""
    return {
        m: (s - process_start(costs[m])) / max(costs[m] - process_start(costs[m]), 1e-9)
        for m, s in shares.items()
    }


def test_a_cheap_and_a_costly_member_reach_the_same_share_of_the_series() -> None:
    """6000 monthly series as measured: AutoETS about 380 s, AutoTheta about 48 s; in an
    18-s share both are kept and reach the same share of the series (an equal split of the
    time left AutoETS a few dozen windows: both were dropped)."""
    costs = {"AutoETS": 380.0, "AutoTheta": 48.0}
    shares, left_out = subset_shares(costs, windows=3309, seconds=18.0)
    assert set(shares) == set(costs) and not left_out
    assert sum(shares.values()) == pytest.approx(18.0)
    assert shares["AutoTheta"] < shares["AutoETS"]
    reached = _reached(shares, costs)
    assert reached["AutoETS"] == pytest.approx(reached["AutoTheta"])
    assert reached["AutoETS"] * 3309 >= MIN_SUBSET_WINDOWS


def test_the_costliest_member_is_left_out_first_and_says_why() -> None:
    costs = {"AutoETS": 5000.0, "AutoTheta": 40.0}
    shares, left_out = subset_shares(costs, windows=600, seconds=20.0)
    assert set(shares) == {"AutoTheta"} and set(left_out) == {"AutoETS"}
    assert "fewer than the 30 needed to score it" in left_out["AutoETS"]
    assert "beside AutoTheta" in left_out["AutoETS"]


def test_no_member_is_planned_where_none_reaches_enough_windows() -> None:
    shares, left_out = subset_shares({"AutoETS": 1e5, "AutoTheta": 1e4}, 50, 12.0)
    assert shares == {} and set(left_out) == {"AutoETS", "AutoTheta"}


def test_a_member_refitted_in_one_process_is_not_charged_a_process_start() -> None:
    """30 s on the 756 M3 quarterly series: 4 s between them. AutoETS (pooled, 36 s) is left
    out; AutoTheta (6 s, in one process: no start) is kept, on two thirds of the series."""
    costs = {"AutoETS": 36.0, "AutoTheta": 6.0}
    shares, left_out = subset_shares(costs, windows=756, seconds=4.0)
    assert set(shares) == {"AutoTheta"} and set(left_out) == {"AutoETS"}
    assert shares["AutoTheta"] == pytest.approx(4.0)
    assert _reached(shares, costs)["AutoTheta"] == pytest.approx(4.0 / 6.0)


def test_where_the_search_cannot_fit_the_references_get_most_of_the_seconds() -> None:
    """30 s on the 645 M3 yearly series: 15 s left, AutoETS and AutoTheta about 8 s each,
    the search's smallest run 34 s. A fifth (3 s) would leave both out and the fit with
    nothing to lean on; the search cannot fit anyway, so they share four fifths."""

    class Task:
        val = test = [None] * 645

    costs = {"AutoETS": 8.0, "AutoTheta": 8.0}
    spent, fields = plan_references(Task(), costs, 15.0, 30.0, smallest_search=34.0)  # type: ignore[arg-type]
    assert fields["references_on_a_subset"] and set(fields["references_shares"]) == set(costs)
    assert spent == pytest.approx(0.8 * 15.0)
    _, fields = plan_references(Task(), costs, 15.0, 30.0, smallest_search=10.0)  # type: ignore[arg-type]
    assert set(fields["references_left_out"]) == set(costs)  # (the search fits: a fifth)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["AutoETS", "AutoTheta", "Other"]),
        st.floats(0.5, 1e5),
        min_size=1,
    ),
    st.integers(1, 20_000),
    st.floats(0.0, 600.0),
)
def test_shares_fit_the_seconds_and_every_member_is_kept_or_left_out(costs, windows, seconds):
    shares, left_out = subset_shares(costs, windows, seconds)
    assert set(shares) | set(left_out) == set(costs) and not set(shares) & set(left_out)
    assert sum(shares.values()) <= seconds + 1e-6
    reached = _reached(shares, costs)
    assert all(0.0 < r <= 1.0 + 1e-9 for r in reached.values())
    assert len({round(r, 9) for r in reached.values()}) <= 1  # one share of the series
    # the members left out are the costliest ones
    if shares and left_out:
        assert max(costs[m] for m in shares) <= min(costs[m] for m in left_out)
