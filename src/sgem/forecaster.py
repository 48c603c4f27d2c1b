"""`SgemForecaster`: DataFrame in, DataFrame out, the way statsforecast / neuralforecast users
forecast.

    fc = SgemForecaster(h=12, time_budget="5m")
    fc.fit(df)                        # columns unique_id, ds (dates or integers), y
    preds = fc.predict(level=[80])    # unique_id, ds, SGEM, SGEM-q-10, ..., SGEM-lo-80, ...

Fitting goes through `sgem.fit` on the frame written as a long-format CSV (so the run is an
ordinary, resumable run directory and the model an ordinary model directory); predicting
goes through the same reader and `SgemModel.forecast` as `sgem predict`, so gaps are filled
and short histories padded the same way.

Output columns (`alias` is "SGEM" unless set):

* ``unique_id``, ``ds``: the series and the time of each forecast step: the next dates on
  the series' frequency when the input had dates, else the next integers on its step;
* ``alias``: the point forecast (the predictive median);
* ``alias-q-P`` for every quantile q in `quantiles` (P = 100 q, e.g. SGEM-q-10 for 0.1), as
  TimeGPT names them;
* ``alias-lo-L`` / ``alias-hi-L`` for every `level` L (the central L% interval, e.g.
  SGEM-lo-80 = the 0.1 quantile), as statsforecast names them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import SgemUserError

#: the long-format columns sgem reads
COLUMNS = ("unique_id", "ds", "y")


def _long_frame(df: Any, id_col: str, time_col: str, target_col: str, who: str) -> pd.DataFrame:
    """The user's frame as sgem's long format (unique_id, ds, y), or a `SgemUserError`."""
    if not isinstance(df, pd.DataFrame):
        raise SgemUserError(
            f"{who}: give a pandas DataFrame with columns {id_col}, {time_col}, {target_col}, "
            f"got {type(df).__name__}"
        )
    absent = [c for c in (id_col, time_col, target_col) if c not in df.columns]
    if absent:
        raise SgemUserError(
            f"{who}: columns {absent} not found; the frame's columns are {list(df.columns)}. "
            "Name them with id_col=, time_col=, target_col="
        )
    if len(df) == 0:
        raise SgemUserError(f"{who}: the frame has no rows")
    frame = df[[id_col, time_col, target_col]].copy()
    frame.columns = list(COLUMNS)
    distinct = frame["unique_id"].drop_duplicates()  # the user's ids, kept with their dtype
    frame.attrs["ids"] = dict(zip(distinct.astype(str), distinct, strict=True))
    frame["unique_id"] = frame["unique_id"].astype(str)
    return frame


def _quantile_columns(
    alias: str, quantiles: Sequence[float], level: Sequence[float] | None
) -> dict[str, float]:
    """Output column -> the quantile it holds."""
    columns = {f"{alias}-q-{100 * float(q):g}": float(q) for q in quantiles}
    if level and all(0 < float(lvl) < 1 for lvl in level):
        warnings.warn(
            f"level={list(level)}: levels are percentages (as statsforecast's), so these are "
            f"{', '.join(f'{float(v):g} %' for v in level)} intervals; for 80 % write level=[80]",
            UserWarning,
            stacklevel=3,
        )
    for lvl in level or ():
        if not 0 < float(lvl) < 100:
            raise SgemUserError(f"level={lvl}: a level is a percentage strictly between 0 and 100")
        half = float(lvl) / 200.0
        columns[f"{alias}-lo-{float(lvl):g}"] = round(0.5 - half, 12)
        columns[f"{alias}-hi-{float(lvl):g}"] = round(0.5 + half, 12)
    for name, q in columns.items():
        if not 0.0 < q < 1.0:
            raise SgemUserError(f"{name}: quantiles must lie strictly between 0 and 1, got {q}")
    return columns


class SgemForecaster:
    """A forecaster with the statsforecast / neuralforecast habits: `fit(df)`, `predict(h)`.

    Args:
        h: the forecast horizon (steps); `predict` may ask for fewer.
        freq: the pandas frequency of `ds` ("D", "MS", ...); None: inferred from the data as
            `sgem fit` does. Only used to date the forecasts.
        time_budget: e.g. "5m" or seconds: plan the search to it (`sgem fit --time-budget`).
        n_experts: K experts (None: the default; "auto": the best of 2, 3, 4 on validation).
        seed: the random seed.
        out: the run directory (None: runs/forecaster-seed<seed>); the frame is written
            into it, so another frame needs another `out`.
        config: run config overrides (a dict or a YAML path), as `sgem fit --config`.
        quantiles: the quantile columns `predict` returns by default.
        context: past steps the model reads (None: from the frequency and the lengths).
        season_length: the seasonal period (statsforecast's name) the classical members
            model and MASE scales by (None: from the frequency; 1: no season).
        missing: "impute" (fill gaps, the default) or "error" (refuse series with gaps).
        alias: the name of the model's columns ("SGEM").
        progress: show the fit's progress bars.
    """

    def __init__(
        self,
        h: int,
        freq: str | None = None,
        time_budget: str | float | None = None,
        n_experts: int | str | None = None,
        seed: int = 0,
        out: str | os.PathLike | None = None,
        config: str | os.PathLike | dict | None = None,
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        context: int | None = None,
        season_length: int | None = None,
        missing: str = "impute",
        alias: str = "SGEM",
        progress: bool = False,
    ) -> None:
        if int(h) < 1:
            raise SgemUserError(f"h={h}: the forecast horizon must be at least 1 step")
        self.h = int(h)
        self.freq = freq
        self.time_budget = time_budget
        self.n_experts = n_experts
        self.seed = int(seed)
        self.out = Path(out) if out is not None else None
        self.config = config
        self.quantiles = tuple(float(q) for q in quantiles)
        self.context = context
        self.season_length = season_length
        self.missing = missing
        self.alias = alias
        self.progress = progress
        self.model_: Any = None
        self.history_: pd.DataFrame | None = None
        self.columns_: tuple[str, str, str] = COLUMNS

    # -- fit -------------------------------------------------------------------------------
    def fit(
        self,
        df: pd.DataFrame,
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str = "y",
    ) -> SgemForecaster:
        """Search and train an MoE on the series of `df` (one row per series and time);
        returns self. The model is `self.model_` (an `SgemModel`), the run directory `out`
        (`sgem.fit` writes the frame into it, so `sgem resume` and `sgem predict` work)."""
        from .run.fitting import fit

        frame = _long_frame(df, id_col, time_col, target_col, "SgemForecaster.fit")
        out = self.out or Path("runs") / f"forecaster-seed{self.seed}"
        self.model_ = fit(
            frame,
            out=out,
            progress=self.progress,
            n_experts=self.n_experts,
            kind="timeseries",
            horizon=self.h,
            context=self.context,
            season=self.season_length,
            time_budget=self.time_budget,
            seed=self.seed,
            config=self.config,
            missing=self.missing,
        )
        self.out, self.history_ = out, frame
        self.columns_ = (id_col, time_col, target_col)
        return self

    # -- predict ---------------------------------------------------------------------------
    def predict(
        self,
        h: int | None = None,
        df: pd.DataFrame | None = None,
        level: Sequence[float] | None = None,
        quantiles: Sequence[float] | None = None,
    ) -> pd.DataFrame:
        """Forecast the next `h` steps (default: the fitted horizon) after the end of every
        series of `df` (default: the frame given to `fit`), one row per series and step.

        Every series with a value gets a forecast: gaps are filled and histories shorter
        than the model's context are padded. Columns: see the module docstring.
        """
        from .data.files import read_long_series
        from .moe.series_io import forecast_frame

        if self.model_ is None or self.history_ is None:
            raise SgemUserError("SgemForecaster.predict: call fit(df) first")
        horizon = self.model_.preprocessor.horizon
        h = horizon if h is None else int(h)
        if not 1 <= h <= horizon:
            raise SgemUserError(
                f"predict(h={h}): the model forecasts 1 to {horizon} steps; fit with "
                f"SgemForecaster(h={h}) for a longer horizon"
            )
        columns = _quantile_columns(
            self.alias, self.quantiles if quantiles is None else quantiles, level
        )
        history = (
            self.history_
            if df is None
            else _long_frame(df, *self.columns_, who="SgemForecaster.predict")
        )
        data = read_long_series(history)  # the reader `sgem predict` uses
        if self.freq is not None:
            data.freq = self.freq
        wanted = sorted(set(columns.values()) | {0.5})
        raw = forecast_frame(self.model_, data.series, data, wanted)
        raw = raw[raw["step"] <= h]
        ids = history.attrs.get("ids") or {}  # the user's own ids, with their dtype
        named = raw["unique_id"].astype(str)
        out = pd.DataFrame({"unique_id": named.map(ids) if ids else named, "ds": raw["ds"]})
        out[self.alias] = raw["forecast"].to_numpy()
        for name, q in columns.items():
            out[name] = raw[f"q{q:g}"].to_numpy()
        return out.reset_index(drop=True)

    def forecast(
        self, df: pd.DataFrame, h: int | None = None, level: Sequence[float] | None = None
    ) -> pd.DataFrame:
        """`fit(df)` then `predict(h, level=level)`, as statsforecast's `forecast`."""
        return self.fit(df).predict(h=h, level=level)

    def __repr__(self) -> str:
        return f"SgemForecaster(h={self.h}, alias={self.alias!r})"


__all__ = ["SgemForecaster"]
