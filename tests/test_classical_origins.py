"""The classical members' rolling origins: one fit per series, its later origins run
forward with the same parameters; seasonal naive as a member a combination can hold; the
prior a forecasting combination is shrunk toward; the budget pilot's mean."""

from __future__ import annotations

import numpy as np
import pytest

from sgem.methods.result import Fitted, MethodResult
from sgem.moe.classical import ClassicalMember
from sgem.moe.combination import Combination


class CountingReference:
    """A deterministic stand-in for a statsforecast reference: the forecast is the last
    value plus the fitted mean step, so forward (fixed step) and refit differ measurably."""

    def __init__(self) -> None:
        self.fits = 0

    def fit_window(self, x, horizon, season):
        self.fits += 1
        step = float(np.mean(np.diff(x))) if len(x) > 1 else 0.0
        return step, self.forward_window(step, x, horizon)

    def forward_window(self, step, x, horizon):
        return x[-1] + step * np.arange(1, horizon + 1), np.ones(horizon)


def test_rolling_origins_of_a_series_share_one_fit(monkeypatch) -> None:
    ref = CountingReference()
    member = ClassicalMember("AutoETS")
    monkeypatch.setattr(member, "_reference", lambda: ref)
    rng = np.random.default_rng(0)
    series = [np.cumsum(rng.normal(1.0, 0.1, 40)) + 10 * i for i in range(3)]
    # four origins per series, given out of order and interleaved across series
    histories, ids = [], []
    for end in (40, 37, 39, 38):
        for i, y in enumerate(series):
            histories.append(y[:end])
            ids.append(i)
    loc, _ = member.forecast(histories, 2, 1, series=ids)
    assert ref.fits == 3  # one per series, on its shortest history
    for k, (h, i) in enumerate(zip(histories, ids, strict=True)):
        step = np.mean(np.diff(series[i][:37]))  # the parameters of the first origin
        np.testing.assert_allclose(loc[k], h[-1] + step * np.arange(1, 3))
    ref.fits = 0
    refit, _ = member.forecast(histories, 2, 1)  # no series: every window is fitted
    assert ref.fits == len(histories)
    assert not np.allclose(refit, loc)


def test_a_long_history_is_fitted_on_its_most_recent_points(monkeypatch) -> None:
    """A 120k-hour electricity history took AutoETS 80 s per fit and a 2-minute budgeted
    fit never left planning: members see the last MAX_HISTORY points (10 seasons at least)."""
    from sgem.moe.classical import MAX_HISTORY

    seen: list[int] = []
    ref = CountingReference()
    fit = ref.fit_window
    monkeypatch.setattr(ref, "fit_window", lambda x, h, s: (seen.append(len(x)), fit(x, h, s))[1])
    member = ClassicalMember("AutoETS")
    monkeypatch.setattr(member, "_reference", lambda: ref)
    y = np.r_[np.full(10 * MAX_HISTORY, 1e6), np.arange(MAX_HISTORY + 500, dtype=float)]
    loc, _ = member.forecast([y, y[:300]], 3, [24, 1])
    assert seen == [MAX_HISTORY, 300]
    np.testing.assert_allclose(loc[0], y[-1] + np.arange(1, 4))  # the old level is gone
    member.forecast([y], 3, 400)  # a long season keeps ten of them
    assert seen[-1] == 4000


def test_statsforecast_forward_is_close_to_a_refit() -> None:
    pytest.importorskip("statsforecast")
    rng = np.random.default_rng(1)
    t = np.arange(60)
    y = 100 + 0.5 * t + 5 * np.sin(2 * np.pi * t / 12) + rng.normal(0, 1, 60)
    member = ClassicalMember("AutoETS")
    histories = [y[:56], y[:58], y[:60]]
    forward, _ = member.forecast(histories, 6, 12, series=[0, 0, 0])
    refit, _ = member.forecast(histories, 6, 12)
    np.testing.assert_array_equal(forward[0], refit[0])  # the first origin is the fit itself
    assert np.abs(forward - refit).mean() < 0.05 * np.abs(y).mean()


def test_a_member_asked_again_about_the_same_histories_does_not_refit(monkeypatch) -> None:
    member = ClassicalMember("SeasonalNaive")
    fits: list[int] = []
    serial = member._serial
    monkeypatch.setattr(member, "_serial", lambda h, *a: (fits.append(len(h)), serial(h, *a))[1])
    y = np.arange(30, dtype=float)
    first, _ = member.forecast([y, y[:20]], 4, 4)
    first[:] = -1.0  # (the caller's copy: the kept forecast is its own)
    again, _ = member.forecast([y, y[:20]], 4, 4)
    assert fits == [2] and again[0, 0] == 26.0
    member.forecast([y, y[:21]], 4, 4)  # another history, horizon or season: fitted
    member.forecast([y, y[:21]], 5, 4)
    member.forecast([y, y[:21]], 5, 2)
    member.forecast([y, y[:21]], 5, 2, series=[0, 0])  # rolling origins: never kept
    assert fits == [2, 2, 2, 2, 2]


def test_seasonal_naive_is_a_member_a_combination_can_hold() -> None:
    member = ClassicalMember("SeasonalNaive")
    assert member.cheap and not ClassicalMember("AutoTheta").cheap
    assert ClassicalMember.from_state(member.state()).name == "SeasonalNaive"
    y = np.tile([1.0, 5.0, 3.0, 2.0], 5) + np.arange(20) * 0.0
    loc, scale = member.forecast([y], 6, 4)
    np.testing.assert_array_equal(loc[0], [1.0, 5.0, 3.0, 2.0, 1.0, 5.0])
    assert (scale > 0).all()
    state = {
        "weights": [0.5, 0.5],
        "names": ["seasonal naive"],
        "scales": [1.0],
        "loss": "student_t",
        "members": [member.state()],
    }
    mix = Combination.from_state(state, {})
    assert mix.forecasting and mix.members[0].name == "SeasonalNaive"


def _classical(name: str) -> MethodResult:
    out = np.zeros((4, 2, 3))
    return MethodResult(
        name, 0, kind="classical", val_output=out, test_output=out,
        fitted=Fitted(classical=ClassicalMember(name)),
    )  # fmt: skip


def test_the_combination_is_shrunk_toward_the_statsforecast_members() -> None:
    """The prior: the equal combination of AutoETS / AutoTheta where each is near the best
    member, none where the MoE is far ahead of each or clearly ahead of their combination
    on the held-out windows (paired), none from seasonal naive alone."""
    from sgem.leaderboard.combining import _prior

    rng = np.random.default_rng(0)
    y = rng.normal(0, 1, (200, 2))

    def out(error: np.ndarray) -> np.ndarray:  # Normal forecasts off by `error`, scale 0.1
        return np.stack([y + error, np.full(y.shape, 0.1), np.full(y.shape, 1e3)], -1)

    def noise(sd: float) -> np.ndarray:
        return rng.normal(0, sd, y.shape)

    full = [_classical("SeasonalNaive"), _classical("AutoETS"), _classical("AutoTheta")]
    alike = [out(noise(0.3)), out(noise(1.0)), out(noise(0.3)), out(noise(0.3))]
    prior, note = _prior(full, alike, y)  # the MoE, naive, ETS, Theta
    np.testing.assert_allclose(prior, [0.0, 0.0, 0.5, 0.5])
    assert note == ""
    # AutoETS failed on the held-out windows, or is clearly worse: the prior is AutoTheta
    for ets in (noise(3.0), noise(0.4)):
        worse = [alike[0], alike[1], out(ets), alike[3]]
        np.testing.assert_allclose(_prior(full, worse, y)[0], [0.0, 0.0, 0.0, 1.0])
    # the network is far ahead of both: no prior holds it back
    ahead = [out(noise(0.01)), alike[1], out(noise(2.0)), out(noise(2.0))]
    assert _prior(full, ahead, y)[0] is None
    # each within the ratio, but the MoE clearly ahead of their combination (their errors
    # shared, the MoE's a little smaller on every window): no prior either, and the note
    # says why
    shared = noise(0.12)
    close = [out(0.93 * shared), alike[1], out(shared + noise(0.005)), out(shared + noise(0.005))]
    prior, note = _prior(full, close, y)
    assert prior is None and "the MoE beats it there by" in note
    # the budget left only seasonal naive: no prior (greedy selection alone weighs it)
    assert _prior(full[:1], alike[:2], y)[0] is None


def test_the_budget_pilot_is_the_mean_after_a_warm_up(monkeypatch) -> None:
    """The start-up is paid by a short warm-up (a few steps and one evaluation), not by a
    whole candidate training thrown away; then the mean of the cells timed."""
    import sgem.run.budget as budget
    from sgem.run.pilot import WARM_UP_STEPS

    clock = {"now": 0.0}
    calls: list = []

    class Trainer:
        x_train = y_train = None

        def fit(self, arch, x, y, seed, steps=None):
            calls.append(steps)
            clock["now"] += 0.5

        def cluster_losses(self, model):
            calls.append("evaluated")

        def train(self, arch, mask, seed):
            clock["now"] += next(times)

    class Space:
        def sample(self, rng):
            return None

    class Task:
        n_clusters = 2

    monkeypatch.setattr(budget.time, "perf_counter", lambda: clock["now"])
    times = iter([1.0, 2.0, 6.0])  # a cheap, a middle and a dear cell
    assert budget.pilot_seconds(Task(), Trainer(), Space(), seed=0) == pytest.approx(3.0)
    assert calls == [WARM_UP_STEPS, "evaluated"]
    # with a limit it stops timing once it has spent that long (the warm-up included):
    # what it measured decides
    times = iter([1.0, 2.0, 6.0])
    assert budget.pilot_seconds(Task(), Trainer(), Space(), seed=0, limit=2.0) == 1.5
    times = iter([1.0, 2.0, 6.0])  # one cell, whatever the limit
    assert budget.pilot_seconds(Task(), Trainer(), Space(), seed=0, limit=0.1) == 1.0


def test_a_pilot_the_budget_fence_stopped_is_a_refusal_not_a_crash(monkeypatch) -> None:
    """Sub-hourly series with a long context: one training outlasted the budget and
    its early stopping was never evaluated (a RuntimeError traceback after the budget)."""
    import sgem.run.budget as budget
    import sgem.train.time_fence as time_fence

    class Trainer:
        x_train = y_train = None

        def fit(self, arch, x, y, seed, steps=None):
            return None

        def cluster_losses(self, model):
            return None

        def train(self, arch, mask, seed):
            raise RuntimeError("the candidate was never evaluated")

    class Space:
        def sample(self, rng):
            return None

    class Task:
        n_clusters = 2

    monkeypatch.setattr(time_fence, "fence_passed", lambda: True)
    with pytest.raises(budget.PilotCut, match="one candidate training took more than"):
        budget.pilot_seconds(Task(), Trainer(), Space(), seed=0)
    monkeypatch.setattr(time_fence, "fence_passed", lambda: False)
    with pytest.raises(RuntimeError, match="never evaluated"):  # a real bug stays one
        budget.pilot_seconds(Task(), Trainer(), Space(), seed=0)


def test_a_tables_combination_is_judged_on_samples_its_weights_never_saw() -> None:
    from sgem.leaderboard.board import greedy_ensemble, log_density
    from sgem.leaderboard.combining import cross_fitted_gain
    from sgem.moe.combination import mixed_log_density

    rng = np.random.default_rng(3)
    n, classes = 120, 3
    y = rng.integers(0, classes, n)
    good = rng.normal(0, 1, (n, classes))
    good[np.arange(n), y] += 1.5  # the MoE: informative
    hint = np.eye(classes)[y]  # members that know a little, each with its own noise
    noise = [rng.normal(0, 1.5, (n, classes)) + 0.6 * hint for _ in range(3)]
    outs = [good, *noise]
    logs = np.stack([log_density(o, y, "cross_entropy") for o in outs])
    w = greedy_ensemble(outs, y, "cross_entropy")
    in_sample = mixed_log_density(logs, w) - logs[0]
    crossed = cross_fitted_gain(outs, y, "cross_entropy")
    assert crossed.shape == (n,) and crossed.mean() < in_sample.mean()
    # a member that is the truth itself is worth combining, also on unseen samples
    truth = np.full((n, classes), -5.0)
    truth[np.arange(n), y] = 5.0
    assert cross_fitted_gain([good, truth], y, "cross_entropy").mean() > 0.5


def test_series_without_a_frequency_get_the_season_their_history_shows() -> None:
    """Integer time steps: a business-week cycle of 5 or a yearly one of 52 is found, a
    random walk has none (0: each window chooses), and the classical members use it."""
    from sgem.baselines.seasonal_naive import infer_season
    from sgem.moe.classical import season_of

    rng = np.random.default_rng(0)
    t = np.arange(300)
    for period in (5, 12, 52):
        series = [10 + 3 * np.sin(2 * np.pi * t / period) + 0.02 * t + rng.normal(0, 0.5, 300)]
        assert infer_season(series * 4) == period
    walks = [[np.cumsum(rng.normal(size=n))] for n in (60, 300, 1000) for _ in range(10)]
    assert all(infer_season(w) == 0 for w in walks)
    assert season_of({"freq": None, "season": 5}) == 5 and season_of({"freq": "MS"}) == 12
    assert season_of({"freq": None, "season": None}) == 0


def test_seasonal_naive_repeats_the_last_season_of_a_short_history() -> None:
    """A model needs two seasons to fit one; seasonal naive needs one (a 20-month series
    got a flat last value instead)."""
    from sgem.moe.classical import ClassicalMember

    history = np.arange(20, dtype=float) % 12
    loc, _ = ClassicalMember("SeasonalNaive").forecast([history], 6, 12)
    np.testing.assert_array_equal(loc[0], history[8:14])


def test_weekly_series_are_modelled_with_their_year_and_autoets_without_it() -> None:
    """A week's model season is 52: AutoTheta tests it and follows a yearly cycle; AutoETS,
    which cannot fit a season over 24, is given none instead of a slow non-seasonal fit (the
    paper's baseline), and a combination's AutoETS has the season taken out by MSTL."""
    pytest.importorskip("statsforecast")
    from sgem.baselines.statistical import ETS_LONGEST_SEASON, AutoETSReference
    from sgem.moe.classical import season_of

    assert season_of({"freq": "W-SUN"}) == 52 and season_of({"freq": "W", "season": 1}) == 1
    ets = AutoETSReference()
    assert ets.model(52).season_length == 1
    assert ets.model(ETS_LONGEST_SEASON).season_length == ETS_LONGEST_SEASON
    rng = np.random.default_rng(0)
    t = np.arange(312 + 26)
    y = 100 + 20 * np.sin(2 * np.pi * t / 52) + rng.normal(0, 1, len(t))
    history, future = y[:312], y[312:]
    for name in ("AutoTheta", "AutoETS"):
        errors = {}
        for season in (1, 52):
            loc, scale = ClassicalMember(name).forecast([history], 26, season, workers=1)
            assert np.isfinite(loc).all() and (scale > 0).all()
            errors[season] = np.abs(loc[0] - future).mean()
        assert errors[52] < 0.5 * errors[1], name
    from sgem.leaderboard.series_members import _long_season_note

    assert "MSTL" in _long_season_note(ClassicalMember("AutoETS"), np.array([52]))
    assert _long_season_note(ClassicalMember("AutoETS"), np.array([12])) == ""
    assert _long_season_note(ClassicalMember("AutoTheta"), np.array([52])) == ""


def test_a_saved_member_s_spread_and_tails_are_bounded() -> None:
    """model.json has no checksum: a spread or df edited far outside what `fit_tails`
    picks is refused on load instead of predicting."""
    state = ClassicalMember("AutoETS", 1.5, 4.0).state()
    assert ClassicalMember.from_state(state).spread == 1.5
    for key, bad in (("spread", 1e308), ("df", 1e308), ("spread", 0.0), ("df", float("nan"))):
        with pytest.raises(ValueError, match=key):
            ClassicalMember.from_state({**state, key: bad})
