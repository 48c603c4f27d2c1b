"""A forecaster's long-format input and output: the series of a file or a DataFrame
(unique_id, ds, y, or the column names the model was fitted with), which of them can be
forecast, and the forecast as one row per series and step. `sgem predict`, `SgemForecaster`
and `SgemModel.predict(df)` all go through here, so they fill gaps, pad short histories and
date the forecasts alike."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import SgemUserError
from .preprocess import ForecastPreprocessor

if TYPE_CHECKING:
    from ..data.files_series import SeriesData

#: `model` below is a forecasting `sgem.moe.model.SgemModel` (not imported: it imports this)

SERIES_SUFFIXES = (".csv", ".tsv", ".txt", ".parquet", ".pq", ".tsf", ".zip")


def forecastable(pre: ForecastPreprocessor, series: dict[str, np.ndarray]) -> list[str]:
    """The names of the series a forecaster can take, a note printed for those it cannot
    (no value; shorter than the context where the model does not pad) and for the filled or
    padded ones; refused when none is left."""
    context = pre.context
    empty = [n for n in series if not np.isfinite(series[n]).any()]
    names = [n for n in series if n not in set(empty)]
    if not pre.pad_short:
        names = [n for n in names if len(series[n]) >= context]
    if not names:
        raise SgemUserError(
            f"no series can be forecast: {len(empty)} have no value and the others are shorter "
            f"than the model's context ({context} values); give longer histories"
        )
    notes = []
    if empty:
        notes.append(f"skipped {len(empty)} series without any value ({', '.join(empty[:3])})")
    if len(names) + len(empty) < len(series):
        skipped = len(series) - len(names) - len(empty)
        notes.append(f"skipped {skipped} series shorter than the model's context of {context}")
    padded = sum(len(series[n]) < context for n in names)
    if pre.pad_short and padded:
        notes.append(
            f"padded {padded} of {len(names)} series shorter than the model's context of "
            f"{context} values (with their first value)"
        )
    gaps = sum(int((~np.isfinite(series[n])).any()) for n in names)
    if pre.missing == "impute" and gaps:
        notes.append(f"filled the gaps of {gaps} series")
    for note in notes:
        print(f"note: {note}")
    return names


def read_series(model: Any, source: str | os.PathLike | pd.DataFrame) -> SeriesData:
    """The series of a long-format file or DataFrame, read with the column names the model
    was fitted on (a model saved before they were kept: unique_id, ds, y), refused when
    their frequency is not the model's."""
    from ..data.files import read_long_series

    columns = model.spec.info.get("series_columns") or {}
    name = "the DataFrame" if isinstance(source, pd.DataFrame) else Path(source).name
    if not isinstance(source, pd.DataFrame) and Path(source).suffix.lower() not in SERIES_SUFFIXES:
        raise SgemUserError(
            f"a forecaster reads a long-format CSV/Parquet (unique_id, ds, y) or a .tsf "
            f"file, not {name}"
        )
    data = read_long_series(source, **columns)  # (a missing file is refused there)
    fitted = model.spec.info.get("freq")
    if fitted and data.freq is None and data.step is None and max(data.lengths, default=0) <= 1:
        # one value per series gives no step to infer: the model's dates its forecasts
        data = dataclasses.replace(data, freq=fitted)
    if fitted and data.freq and not _same_step(fitted, data.freq):
        raise SgemUserError(
            f"{name} reads as data of frequency {data.freq!r}, but the model was fitted "
            f"on {fitted!r} data: its forecasts would be dated and seasoned wrongly; give "
            "the series at the model's frequency (ISO dates, 2020-01-31, leave no doubt)"
        )
    return data


def _same_step(a: str, b: str) -> bool:
    """Whether two frequencies step alike (MS and ME do; D and MS do not), within 10 %."""
    from pandas.tseries.frequencies import to_offset

    start = pd.Timestamp("2001-01-01")  # one step between two anchored times of each
    step_a, step_b = (start + 2 * to_offset(f) - (start + to_offset(f)) for f in (a, b))
    return abs(step_a / step_b - 1) <= 0.1


def forecast_frame(model: Any, series: dict[str, np.ndarray], data: Any, quantiles) -> pd.DataFrame:
    """One row per series and step. Gaps are filled and short histories padded as the
    model says (`ForecastPreprocessor`), so every series with a value is forecast; a note
    says how many were filled or padded (or, for a model saved before sgem did that,
    skipped)."""
    from ..data.files_series import future_times

    assert isinstance(model.preprocessor, ForecastPreprocessor)
    names = forecastable(model.preprocessor, series)
    fc = model.forecast([series[n] for n in names], quantiles=quantiles)
    times = None if data is None else future_times(data, names, fc.loc.shape[1])
    return fc.to_frame(ids=names, ds=times)


def forecast_long(
    model: Any, source: str | os.PathLike | pd.DataFrame, quantiles=(0.1, 0.5, 0.9)
) -> pd.DataFrame:
    """The forecast of every series in a long-format file or DataFrame, one row per series
    and step, the id and time columns under the names the model was fitted with."""
    data = read_series(model, source)
    frame = forecast_frame(model, data.series, data, quantiles)
    columns = model.spec.info.get("series_columns") or {}  # the user's own names back
    named = {"unique_id": columns.get("id_col"), "ds": columns.get("time_col")}
    return frame.rename(columns={k: v for k, v in named.items() if v and v != k})


__all__ = ["forecast_frame", "forecast_long", "forecastable", "read_series"]
