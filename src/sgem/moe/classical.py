"""Classical forecasters as members of a saved combination: refitted on each series'
history at forecast time, so nothing of them is saved but their name.

Why: on short competition series AutoETS and AutoTheta are hard to beat, and a mixture
of them with the searched MoE is usually better than either (the leaderboard fits its
weights on validation windows). A forecaster model that combines them must refit them on
whatever history it is asked to forecast; here is the one place that does it, for the
leaderboard's validation and holdout windows and for `SgemModel.forecast` alike. A fit that
fails or diverges (`sgem.baselines.statistical.diverged`) keeps the seasonal-naive
forecast of the same history, so every series gets a forecast.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable, Sequence

import numpy as np

from ..baselines.naive import NORMAL_DF
from ..errors import SgemUserError
from ..execution.progress import stage_bar
from . import classical_pool
from .classical_pool import Deadline, pool_workers, pooled_forecast

FORMAT = "sgem.classical/1"
#: the largest interval multiplier and df a saved member may hold (`fit_tails` picks them
#: from grids up to 4 and 30, or the Normal's df): model.json has no checksum, and a value
#: edited to 1e308 would load and predict
MAX_SPREAD, MAX_DF = 1e3, 1e6
#: the forecasters a combination can hold: statsforecast's, and seasonal naive (free, so it
#: is always there: a fit whose budget left its network untrained still ships something sane)
NAMES = ("AutoETS", "AutoTheta", "SeasonalNaive")
#: the most recent points a classical member is fitted on (at least `HISTORY_SEASONS`
#: seasons): AutoETS / AutoTheta cost about 1 ms per point on an hourly series (a 120k-hour
#: electricity history: 80 s and 130 s per fit), and exponential smoothing weighs the
#: distant past next to nothing. Every forecast and held-out window refits them, so this
#: also sets `sgem predict`'s time on long series: 1000 points took 2.3x less time on real
#: daily and hourly collections, but AutoETS' or AutoTheta's MASE was 0-8 % worse on five of
#: their six (member, collection) pairs (`benchmarks/classical_history.py`)
MAX_HISTORY = 2000
HISTORY_SEASONS = 10
#: ... and never more than this many (minute data's daily season, 1440, asked for 14 400
#: points: a fit took tens of seconds, and timing a few of them ran 10 minutes into a
#: 45-second budget)
MAX_SEASONAL_HISTORY = 4000
#: a progress bar (where the caller shows them: `sgem predict`) from this many series on:
#: 2000 series' AutoETS refits take about a minute
PROGRESS_SERIES = 200
#: where more processes than one may refit: the series fitted here first to time them
PROBE_SERIES = 16
#: the local fits a member keeps the seconds of (series come in a random order, so these
#: are a sample; a saved model's members refit on every `predict`, and must not grow)
FIT_TIMES_KEPT = 256


class Stopped(RuntimeError):
    """A classical member's fits stopped by the caller's `stop` (a time budget's fence)."""


#: what repairs a statsforecast that cannot be imported (one of its dependencies missing)
STATSFORECAST_FIX = "pip install --force-reinstall statsforecast"


@functools.cache
def statsforecast_missing() -> str | None:
    """Why statsforecast cannot be imported here (None: it can). Why: every local fit that
    fails keeps the seasonal-naive forecast, so without this check a broken install (one
    of its own dependencies missing) made "AutoETS" seasonal naive on every series, on the
    leaderboard and in a saved combination's forecasts alike, without a word."""
    try:
        import statsforecast.models  # noqa: F401
    except Exception as exc:  # (ImportError, or a dependency's own error on import)
        return f"{type(exc).__name__}: {exc}"
    return None


def require_statsforecast(name: str) -> None:
    """Refuse, naming the fix, where `name` (AutoETS / AutoTheta) cannot be fitted."""
    why = statsforecast_missing()
    if why is not None:
        raise SgemUserError(
            f"{name} needs statsforecast, which cannot be imported here ({why}); reinstall "
            f"it with its dependencies: {STATSFORECAST_FIX}"
        )


def _digest(histories: Sequence[np.ndarray], horizon: int, seasons: np.ndarray) -> bytes:
    """What a plain forecast depends on: every history's values, the horizon, the seasons."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.asarray([horizon, len(histories), *seasons.tolist()], dtype=np.int64).tobytes())
    for history in histories:
        values = np.ascontiguousarray(history, dtype=np.float64)
        h.update(np.int64(values.size).tobytes())
        h.update(values.tobytes())
    return h.digest()


class ClassicalMember:
    """A statsforecast model refitted per series (`forecast`)."""

    def __init__(self, name: str, spread: float = 1.0, df: float = NORMAL_DF):
        """`spread` multiplies the model's own interval width and `df` sets its tails (a
        Student-t): both fitted on validation windows (`fit_tails`), since a local model's
        in-sample intervals are often too narrow for what follows."""
        if name not in NAMES:
            raise ValueError(f"unknown classical member {name!r}: known are {', '.join(NAMES)}")
        for what, v, most in (("spread", spread, MAX_SPREAD), ("df", df, MAX_DF)):
            if type(v) not in (int, float) or not 0 < v <= most:
                raise ValueError(f"a classical member's {what} must lie in (0, {most:g}]")
        self.name, self.spread, self.df = name, float(spread), float(df)
        #: the seconds of the first `FIT_TIMES_KEPT` local fits `forecast` made in this
        #: process, in order (the first also pays one-off start-up costs): what a forecast of
        #: many series will take (`sgem.leaderboard.forecast_cost`)
        self.fit_seconds: list[float] = []
        #: the last plain `forecast` (its histories' digest, horizon, seasons -> loc, scale):
        #: a saved combination asked again about the same series (a forecast, then its
        #: scores or other quantiles) does not refit every series again
        self._last: tuple[bytes, tuple[np.ndarray, np.ndarray]] | None = None

    @classmethod
    def from_state(cls, state: dict) -> ClassicalMember:
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(f"a classical member's state must be {{'format': '{FORMAT}', ...}}")
        return cls(str(state.get("name")), state.get("spread", 1.0), state.get("df", NORMAL_DF))

    def state(self) -> dict:
        return {"format": FORMAT, "name": self.name, "spread": self.spread, "df": self.df}

    def fit_tails(self, out: np.ndarray, y: np.ndarray) -> ClassicalMember:
        """The member with (spread, df) chosen on outputs (n, h, 3) and their targets (the
        validation windows), by `sgem.baselines.naive.fit_spread`'s grid."""
        from ..baselines.naive import fit_spread

        spread, df = fit_spread(out[..., 0], out[..., 1], np.asarray(y, dtype=np.float64))
        return ClassicalMember(self.name, float(spread), float(df))

    def outputs(self, loc: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """(loc, scale, df) per step, (n, h, 3), with this member's spread and tails."""
        return np.stack([loc, scale * self.spread, np.full_like(loc, self.df)], -1)

    @property
    def cheap(self) -> bool:
        """No fit to speak of: run even past a time budget's fence."""
        return self.name == "SeasonalNaive"

    def _reference(self):
        """The baselines' statsforecast reference of this name: one local fit per window
        (`fit_window`, `forward_window`), the same model and interval-to-scale rule (AutoETS:
        a season beyond ETS's taken out by MSTL first, `SeasonallyAdjustedAutoETS`)."""
        from ..baselines.statistical import AutoThetaReference, SeasonallyAdjustedAutoETS

        if self.name == "SeasonalNaive":
            return _SeasonalNaive()
        require_statsforecast(self.name)
        return {"AutoETS": SeasonallyAdjustedAutoETS, "AutoTheta": AutoThetaReference}[self.name]()

    def forecast(
        self,
        histories: Sequence[np.ndarray],
        horizon: int,
        season: int | Sequence[int],
        stop: Callable[[], bool] | None = None,
        series: Sequence[int] | None = None,
        partial: bool = False,
        workers: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(loc, Normal scale), each (n, horizon), in the histories' units, each fitted on
        its history's last `MAX_HISTORY` points. A season of 0 is chosen per history from its
        autocorrelation (`choose_seasons`). `stop` (asked before every series) raises
        `Stopped` once it says so: a time budget's fence.

        `series` (one id per history: rolling origins of the same series): the model is
        fitted once per series, on its shortest history, and applied with those parameters
        to its longer ones (statsforecast's `forward`, which re-runs the filter only) -
        rolling-origin evaluation with fixed parameters, four times cheaper than a refit
        per origin on four origins (tourism's AutoETS: 6.4 s vs 25.3 s for 40 series),
        and within a few percent of it (mean absolute difference 3 % of the level).

        Series are taken in a seeded random order; with `partial`, `stop` ends the fits
        without raising and the histories not reached get NaN: a random subset of the
        series, all of their origins (the leaderboard's references on a collection too
        large for the budget).

        `workers` (default: the cores, `sgem.moe.classical_pool.pool_workers`): where many
        series would take long, they are fitted in that many processes, with the same
        numbers; only where `stop` is None or a `Deadline` (a rule other processes can
        read)."""
        from ..baselines.seasonal_naive import choose_seasons

        seasons = np.broadcast_to(np.asarray(season, dtype=np.int64), (len(histories),)).copy()
        for i in np.flatnonzero(seasons == 0).tolist():
            h = np.asarray(histories[i], dtype=np.float64)
            seasons[i] = choose_seasons(h[np.isfinite(h)][None, :])[0]
        plain = stop is None and series is None and not partial
        key = _digest(histories, horizon, seasons) if plain else b""
        if plain and self._last is not None and self._last[0] == key:
            loc, scale = self._last[1]
            return loc.copy(), scale.copy()
        workers = pool_workers(len(histories)) if workers is None else workers
        if workers > 1 and not self.cheap and (stop is None or isinstance(stop, Deadline)):
            found = self._probed(histories, horizon, seasons, stop, series, partial, workers)
        else:
            found = self._serial(histories, horizon, seasons, stop, series, partial)
        if plain:
            self._last = (key, (found[0].copy(), found[1].copy()))
        return found

    def _probed(self, histories, horizon, seasons, stop, series, partial, workers):
        """`forecast` on `workers` processes (`sgem.moe.classical_pool`) where the first
        `PROBE_SERIES` series, fitted here, say the rest would take over `POOL_SECONDS`
        (starting the workers costs seconds: yearly M3's 645 series fit in 2 s)."""
        ids, rank = _series_rank(len(histories), series)
        present = np.unique(ids)
        first = np.isin(ids, present[np.argsort(rank[present])][:PROBE_SERIES])
        began = time.perf_counter()
        probe = np.flatnonzero(first)
        done = self._serial(
            [histories[i] for i in probe], horizon, seasons[probe], stop, ids[probe], partial
        )
        rest = np.flatnonzero(~first)
        loc = np.full((len(histories), horizon), np.nan)
        scale = np.full_like(loc, np.nan)
        loc[probe], scale[probe] = done
        if len(rest) == 0 or np.isnan(loc[probe]).any():  # (`partial` stopped in the probe)
            return loc, scale
        expected = (time.perf_counter() - began) / max(len(probe), 1) * len(rest)
        subset = [histories[i] for i in rest]
        if expected < classical_pool.POOL_SECONDS:
            out = self._serial(subset, horizon, seasons[rest], stop, ids[rest], partial)
        else:
            out = pooled_forecast(
                _chunk_forecast,
                self.name,
                subset,
                horizon,
                seasons[rest],
                ids[rest],
                stop,
                partial,
                workers,
            )
        loc[rest], scale[rest] = out
        return loc, scale

    def _serial(self, histories, horizon, seasons, stop, series, partial):
        """`forecast`'s loop, one fit after another in this process."""
        from ..baselines.naive import MIN_SPREAD
        from ..baselines.statistical import diverged

        reference = self._reference()
        reference.spread_floor = 0.0  # (raw units: floored below, relative to each level)
        loc = np.full((len(histories), horizon), np.nan)
        scale = np.full_like(loc, np.nan)
        ids, rank = _series_rank(len(histories), series)
        # each series' origins in time order (the first one fits), series in random order
        order = sorted(range(len(histories)), key=lambda i: (rank[ids[i]], len(histories[i])))
        fitted: dict[int, tuple] = {}  # series -> (fitted model, its season)
        shown = len(order) if len(order) >= PROGRESS_SERIES and not self.cheap else 0
        with stage_bar(shown, f"{self.name} refitted per series", unit="series") as bar:
            for done, i in enumerate(order):
                # (with `partial`, asked as each series starts: a series is done whole or not)
                new_series = done == 0 or ids[order[done - 1]] != ids[i]
                if stop is not None and (new_series or not partial) and stop():
                    if partial:
                        break
                    raise Stopped(f"{self.name} stopped after {done} of {len(histories)} series")
                x = np.asarray(histories[i], dtype=np.float64)
                s = int(seasons[i])
                keep = max(MAX_HISTORY, min(HISTORY_SEASONS * s, MAX_SEASONAL_HISTORY))
                x = x[np.isfinite(x)][-keep:]
                fallback = _naive(x, horizon, s)
                # a model needs two seasons to fit one; seasonal naive repeats the last one
                s_used = s if self.cheap or len(x) >= 2 * s + 2 else 1
                earlier = None if series is None else fitted.get(int(series[i]))
                try:
                    if earlier is not None and earlier[1] == s_used:
                        mean, spread = reference.forward_window(earlier[0], x, horizon)
                    else:
                        began = time.perf_counter()
                        model, (mean, spread) = reference.fit_window(x, horizon, s_used)
                        if len(self.fit_seconds) < FIT_TIMES_KEPT:
                            self.fit_seconds.append(time.perf_counter() - began)
                        if series is not None and model is not None:
                            fitted[int(series[i])] = (model, s_used)
                    spread = np.broadcast_to(spread, mean.shape)
                except Exception:  # a local fit that fails keeps the seasonal-naive forecast
                    mean, spread = fallback
                if diverged(x, mean, spread):
                    mean, spread = fallback
                loc[i], scale[i] = mean, np.maximum(spread, MIN_SPREAD * _level(x))
                bar.update()
        return loc, scale


def _level(x: np.ndarray) -> float:
    """A history's mean |value| (1 where it is all zeros or empty): the unit the least
    spread of its forecast is set in. Why relative: a floor of 1e-3 in the series' units
    made the 80 % interval of a series around 1e-3 six to thirty times its spread."""
    level = float(np.abs(x).mean()) if len(x) else 0.0
    return level if level > 0 and np.isfinite(level) else 1.0


def _series_rank(n: int, series: Sequence[int] | None) -> tuple[np.ndarray, np.ndarray]:
    """(each history's series, each series id's place in the seeded random order the
    series are fitted in); without `series`, every history is its own series."""
    ids = np.arange(n) if series is None else np.asarray(series, np.int64)
    return ids, np.random.default_rng(0).permutation(int(ids.max(initial=0)) + 1)


def _chunk_forecast(name, histories, horizon, seasons, series, stop, partial):
    """A chunk of `ClassicalMember(name).forecast` in a worker process (the serial loop)."""
    return ClassicalMember(name)._serial(histories, horizon, seasons, stop, series, partial)


class _SeasonalNaive:
    """Seasonal naive with the statsforecast references' window interface (nothing fitted)."""

    def fit_window(self, x: np.ndarray, horizon: int, season: int):
        return None, _naive(x, horizon, season)


def _naive(x: np.ndarray, horizon: int, season: int) -> tuple[np.ndarray, np.ndarray]:
    """Seasonal naive (the last season repeated) and the RMS of its in-sample errors."""
    s = season if 1 <= season < len(x) else 1
    if len(x) < 2:
        value = x[-1] if len(x) else 0.0
        return np.full(horizon, value), np.full(horizon, max(abs(value) * 0.1, 1e-6))
    idx = len(x) - s + (np.arange(horizon) % s)
    d = x[s:] - x[:-s]
    return x[idx], np.full(horizon, max(float(np.sqrt(np.mean(d**2))), 1e-6))


def season_of(meta: dict | None) -> int:
    """The seasonal period a classical member models for a forecasting task: the season the
    user gave (`meta["season"]`, `sgem fit --season`); else the file frequency's
    (`sgem.forecast.MODEL_SEASONALITIES`: daily data's is 7); without one, the season the
    series' own history showed (`meta["season"]` too, `infer_season`), else 0 (unknown: each
    history's own autocorrelation chooses, as `choose_seasons` does)."""
    from ..forecast import MODEL_SEASONALITIES, seasonality

    meta = meta or {}
    if meta.get("season"):
        return int(meta["season"])
    return seasonality(meta["freq"], MODEL_SEASONALITIES) if meta.get("freq") else 0


__all__ = [
    "FORMAT",
    "HISTORY_SEASONS",
    "MAX_HISTORY",
    "NAMES",
    "STATSFORECAST_FIX",
    "ClassicalMember",
    "Stopped",
    "require_statsforecast",
    "season_of",
    "statsforecast_missing",
]
