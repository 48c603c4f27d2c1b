"""External statistical references: statsforecast's AutoETS and AutoTheta, fitted per window.

These are the references the forecasting literature reports beside learned models. Each
test window's context is fitted on its own (a local model, as `StatsForecast` fits one
model per series), with the season chosen from the context exactly as `seasonal_naive`
chooses it (no frequency metadata: it would reveal the domain). Their prediction intervals
are Gaussian, so the 80% interval and the mean give a Normal forecast (a Student-t with
large df) that is scored by the same code as every other method: NLL, CRPS, MASE, wQL.

A local model can diverge on a short or odd window (AutoETS on hourly air-quality windows
has): a forecast that is not finite, or whose spread or level is absurd for its context, is
replaced by the seasonal-naive forecast of that window, and the count is reported
(`fallback_windows`). statsforecast is a core dependency.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from typing import TYPE_CHECKING

import numpy as np

from .naive import MIN_SPREAD, NORMAL_DF
from .seasonal_naive import choose_seasons, seasonal_forecast

if TYPE_CHECKING:  # (torch at import: the processes refitting AutoETS / AutoTheta need none)
    from ..data.task import ClusteredTask
    from ..methods.budget import MethodBudget
    from ..methods.result import MethodResult

#: z of the 90% quantile: an 80% central interval spans 2 * Z80 standard deviations
Z80 = 1.2815515655446004
#: a forecast further than this many context ranges from the context is "diverged"
MAX_RANGES = 20.0


def normal_from_interval(
    mean: np.ndarray, lo80: np.ndarray, hi80: np.ndarray, floor: float = MIN_SPREAD
) -> np.ndarray:
    """Scale of the Normal whose 10% and 90% quantiles are `lo80` and `hi80` (at least
    `floor`)."""
    return np.maximum((np.asarray(hi80) - np.asarray(lo80)) / (2.0 * Z80), floor)


def diverged(context: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> bool:
    """Not finite, or a level or spread beyond `MAX_RANGES` ranges of the context."""
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(scale))):
        return True
    span = max(float(np.ptp(context)), float(np.mean(np.abs(context))), 1e-6)
    far = np.max(np.abs(mean - context[-1])) > MAX_RANGES * span
    return bool(far or np.max(scale) > MAX_RANGES * span)


@contextlib.contextmanager
def _quiet():
    """statsforecast's notes on a short history ("Too few residuals after burn-in") and
    numpy's on a constant or all-zero one (AutoETS divides by its zero spread; the fit
    still returns, and a non-finite forecast is caught by `diverged`) are not the
    user's to act on: silenced around each local fit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


class StatsForecastReference:
    """One statsforecast model per test window; subclasses name the model."""

    name = "statsforecast"
    uses_domain_labels = False
    #: the least scale of a window's forecast, in the context's units: the benchmarks' model
    #: units; `sgem.moe.classical` (raw units) sets 0 and floors relative to each level
    spread_floor = MIN_SPREAD

    def model(self, season: int):
        raise NotImplementedError

    def forecast_window(self, context: np.ndarray, horizon: int, season: int):
        """(mean, scale) of one window, each (H,); raises on a failed fit."""
        out = self.model(season).forecast(y=context, h=horizon, level=[80])
        return _mean_scale(out, self.spread_floor)

    def fit_window(self, context: np.ndarray, horizon: int, season: int):
        """(the model fitted on `context`, its (mean, scale)): `forward_window` applies it
        to a longer history of the same series without estimating it again."""
        with _quiet():
            model = self.model(season).fit(y=context)
            return model, _mean_scale(model.predict(h=horizon, level=[80]), self.spread_floor)

    def forward_window(self, model, context: np.ndarray, horizon: int):
        """(mean, scale) of `model` (from `fit_window`) run on `context` with its parameters."""
        with _quiet():
            out = model.forward(y=context, h=horizon, level=[80])
            return _mean_scale(out, self.spread_floor)

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        from .base import forecast_result, require_forecasting, student_t_output

        require_forecasting(task, self.name)
        try:
            import statsforecast  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                f"the {self.name} reference needs statsforecast: pip install statsforecast"
            ) from exc
        start = time.perf_counter()
        x = task.test.x.reshape(len(task.test), -1).astype(np.float64)
        horizon = int(task.test.y.shape[1])
        seasons = choose_seasons(x)
        fallback_loc, fallback_scale = seasonal_forecast(x, horizon)
        loc, scale = fallback_loc.copy(), fallback_scale.copy()
        fallbacks = 0
        for i, (context, season) in enumerate(zip(x, seasons, strict=True)):
            try:
                mean, spread = self.forecast_window(context, horizon, int(season))
            except Exception:  # a local fit that fails is a diverged window
                mean, spread = np.full(horizon, np.nan), np.full(horizon, np.nan)
            if diverged(context, mean, spread):
                fallbacks += 1
                continue
            loc[i], scale[i] = mean, spread
        out = student_t_output(loc, scale, np.full_like(loc, NORMAL_DF))
        extra = {"fallback_windows": fallbacks, "windows": len(x)}
        return forecast_result(self.name, budget, out, start, extra)


def _mean_scale(out: dict, floor: float) -> tuple[np.ndarray, np.ndarray]:
    mean = np.asarray(out["mean"], dtype=np.float64)
    return mean, normal_from_interval(mean, out["lo-80"], out["hi-80"], floor)


#: the longest season statsforecast's ETS fits (its state holds 24 seasonal terms); given a
#: longer one (weekly data's year, 52) it still ends non-seasonal, after about 14x the time
#: (300 seeded weekly series: 126 s against 9 s, MASE 0.849 against 0.825): such a season
#: is modelled as none (a combination's AutoETS takes it out by MSTL first:
#: `SeasonallyAdjustedAutoETS`)
ETS_LONGEST_SEASON = 24


class AutoETSReference(StatsForecastReference):
    """statsforecast AutoETS (error, trend, season chosen by AICc), per window."""

    name = "auto_ets"

    def model(self, season: int):
        from statsforecast.models import AutoETS

        season = int(season) if 1 <= season <= ETS_LONGEST_SEASON else 1
        return AutoETS(season_length=season)


class SeasonallyAdjustedAutoETS(AutoETSReference):
    """AutoETS for a combination (`sgem.moe.classical`): where the season is beyond ETS's
    (over `ETS_LONGEST_SEASON`: weekly data's year, half-hourly data's day), statsforecast's
    MSTL takes it out (STL), AutoETS without a season forecasts the adjusted series and the
    season is added back - statsforecast's own way to a long season. Why: on 150 seeded
    weekly series (13 weeks ahead) MASE 1.65, against AutoETS without a season's 1.92 and
    AutoTheta's 1.74, in about the time of AutoETS. The paper's AutoETS baseline stays
    statsforecast's AutoETS as a user fits it."""

    def model(self, season: int):
        if season <= ETS_LONGEST_SEASON:
            return super().model(season)
        from statsforecast.models import MSTL, AutoETS

        return MSTL(season_length=int(season), trend_forecaster=AutoETS(model="ZZN"))


class AutoThetaReference(StatsForecastReference):
    """statsforecast AutoTheta (the Theta variant chosen by in-sample error), per window."""

    name = "auto_theta"

    def model(self, season: int):
        from statsforecast.models import AutoTheta

        return AutoTheta(season_length=max(int(season), 1))


def _register() -> None:
    from . import register_baseline

    register_baseline(AutoETSReference.name, AutoETSReference)
    register_baseline(AutoThetaReference.name, AutoThetaReference)


_register()

__all__ = [
    "ETS_LONGEST_SEASON",
    "AutoETSReference",
    "AutoThetaReference",
    "SeasonallyAdjustedAutoETS",
    "StatsForecastReference",
    "diverged",
    "normal_from_interval",
]
