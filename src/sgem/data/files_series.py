"""Read a user's time series: long-format CSV/Parquet (the Nixtla / GluonTS habit) or Monash .tsf.

`read_long_series` returns a `SeriesData`: {series id: float64 values ordered by time}, each
series' start, and the frequency inferred from the timestamps. In a long table every row is
one observation ``(id, timestamp, value)``; a timestamp missing inside a series' regular grid
becomes NaN, as does an empty value. A Monash `.tsf` file (or the `.zip` holding one) is read
with `sgem.data.tsf.read_tsf`.

`default_context(freq, horizon)` picks a context length from the frequency and the horizon,
`data_context` caps it where most series are short, `check_series_lengths` says, before any
search starts, when series are too short for it (naming the flag that fixes it), and
`future_times` dates the steps after each series' end. Every problem the user can fix
raises `sgem.errors.SgemUserError`.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from ..errors import SgemUserError
from .files_tabular import _existing_file, read_frame
from .number_formats import formatted_numbers
from .series_layout import layout_hint
from .series_times import read_times
from .table_contract import first_rows as _first_rows
from .table_missing import is_missing_token
from .tsf import read_tsf

log = logging.getLogger(__name__)

#: the Monash archive's `@frequency` names as pandas frequency strings
TSF_FREQUENCIES: dict[str, str] = {
    "4_seconds": "4s",
    "minutely": "min",
    "10_minutes": "10min",
    "half_hourly": "30min",
    "hourly": "h",
    "daily": "D",
    "weekly": "W",
    "monthly": "MS",
    "quarterly": "QS",
    "yearly": "YS",
}


@dataclass(eq=False)
class SeriesData:
    """Series read by `read_long_series`.

    Attributes:
        series: series id -> 1-D float64 values ordered by time, on a regular grid when the
            frequency is known (NaN where a value or a timestamp is missing).
        start: series id -> the first timestamp (`pandas.Timestamp`; an int for integer time
            columns; None when the file gives none).
        freq: the pandas frequency string ("h", "D", "MS", ...), the most common one inferred
            over the series; None when unknown.
        horizon: the file's own forecast horizon (a `.tsf` `@horizon`), else None.
        step: the grid step of integer time columns (the next time after t is t + step);
            None for dates and `.tsf` files.
    """

    series: dict[str, np.ndarray]
    start: dict[str, Any] = field(default_factory=dict)
    freq: str | None = None
    horizon: int | None = None
    step: int | None = None

    def __len__(self) -> int:
        return len(self.series)

    @property
    def names(self) -> list[str]:
        return list(self.series)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(s) for s in self.series.values()], dtype=np.int64)

    @property
    def n_missing(self) -> int:
        return int(sum(np.isnan(s).sum() for s in self.series.values()))


# -- .tsf ---------------------------------------------------------------------------------------


def _from_tsf(path: Path) -> SeriesData:
    try:
        data = read_tsf(path)
    except ValueError as exc:  # TSFFormatError names the file and the line
        raise SgemUserError(f"{exc}; fix the file or export the series as a long CSV") from exc
    names = data.names()
    if len(set(names)) != len(names):
        log.warning("%s: series names repeat; the series are named by position instead", path)
        names = [str(i) for i in range(len(data.series))]
    starts: dict[str, Any] = {}
    for name, attrs in zip(names, data.attributes, strict=True):
        value = attrs.get("start_timestamp")
        starts[name] = pd.Timestamp(value) if isinstance(value, datetime) else None
    freq = TSF_FREQUENCIES.get((data.frequency or "").lower())
    if data.frequency and freq is None:
        log.warning(
            "%s: unknown @frequency %r; the frequency is left unknown", path, data.frequency
        )
    series = dict(zip(names, data.series, strict=True))
    return SeriesData(series, starts, freq, data.horizon)


# -- long tables ----------------------------------------------------------------------------------


def _values(column: pd.Series, name: str) -> np.ndarray:
    """The value column as numbers: a token that means "missing" by itself (FRED's ".",
    "NA", "null", "-"; `is_missing_token`, as a table's numeric columns read them) is a
    missing value, said once; numbers written for people ("$1,234", "12 %") are read as the
    numbers they show (`sgem.data.number_formats`); any other text is refused, naming its rows."""
    if (formatted := formatted_numbers(column)) is not None:
        log.info("value column %r: formatted numbers read as numbers", name)
        column = formatted
    numbers = pd.to_numeric(column, errors="coerce")
    text = numbers.isna().to_numpy() & column.notna().to_numpy()
    words = column[text].astype(str).str.strip()
    missing = words.map(is_missing_token).to_numpy(dtype=bool)
    if (~missing).any():
        rows = text.copy()
        rows[text] = ~missing
        raise SgemUserError(
            f"value column {name!r} holds text in {int(rows.sum())} rows (rows "
            f"{_first_rows(rows)}, e.g. {column[rows].iloc[0]!r}); write numbers, or leave a "
            "missing value empty"
        )
    if text.any():
        log.info(
            "value column %r: %d values written as %s are read as missing",
            name,
            int(text.sum()),
            " / ".join(repr(t) for t in sorted(set(words))),
        )
    values = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
    infinite = np.isinf(values)
    if infinite.any():
        raise SgemUserError(
            f"value column {name!r} has {int(infinite.sum())} infinite values (rows "
            f"{_first_rows(infinite)}); replace them by numbers or leave them empty (missing)"
        )
    return values


def _most_common(items: list[Any]) -> Any:
    return Counter(items).most_common(1)[0][0] if items else None


def _freq_of(times: pd.DatetimeIndex) -> str | None:
    try:
        with warnings.catch_warnings():  # pandas 3 announces offsets instead of strings
            warnings.simplefilter("ignore")
            freq = pd.infer_freq(times)
    except (TypeError, ValueError):
        return None
    if freq is None:
        return None
    return freq if isinstance(freq, str) else freq.freqstr


def _filled_length(index: list[pd.DatetimeIndex], freq: str) -> int | None:
    """How many steps of `freq` span all the series (their length once their gaps are
    filled), or None where a timestamp of one is off that grid."""
    total = 0
    for times in index:
        if not len(times):
            continue
        try:
            grid = pd.date_range(times[0], times[-1], freq=freq)
        except ValueError:
            return None
        if (grid.get_indexer(times) < 0).any():
            return None
        total += len(grid)
    return total


def _infer_freq(groups: list[pd.Series]) -> str | None:
    """The most common frequency of the series; with gaps in every series, of the
    frequencies that runs of three consecutive timestamps show, the one that puts every
    series on its grid with the fewest steps to fill, else a fixed step all steps are
    multiples of; None when nothing fits. (Why the fewest: business days with their
    holidays missing are on the daily grid too, and were read as daily series with every
    weekend filled in and forecast.)"""
    index = [pd.DatetimeIndex(t) for t in groups]
    freq = _most_common([f for t in index if len(t) >= 3 and (f := _freq_of(t)) is not None])
    if freq is not None:
        return freq
    # gaps everywhere: what short gap-free runs say (about 200 runs in all, at least 5 a
    # series, so that the runs across a weekend are among them), checked on every series
    per_series = max(5, 200 // max(len(index), 1))
    candidates = Counter(
        f
        for t in index
        for i in range(0, max(len(t) - 2, 0), max((len(t) - 2) // per_series, 1))
        if (f := _freq_of(t[i : i + 3])) is not None
    )
    lengths = {c: _filled_length(index, c) for c, _ in candidates.most_common(5)}
    fitting = {c: n for c, n in lengths.items() if n is not None}
    if fitting:
        return min(fitting, key=fitting.__getitem__)
    diffs = np.concatenate(
        [np.diff(t.asi8) for t in index if len(t) >= 2] or [np.zeros(0, np.int64)]
    )
    if len(diffs) == 0:
        return None
    step = int(_most_common(diffs.tolist()))
    if step <= 0 or np.any(diffs % step):
        return None
    day = pd.Timedelta(days=1).value
    if step % day == 0:
        return "D" if step == day else f"{step // day}D"
    return to_offset(pd.Timedelta(step, unit="ns")).freqstr


def read_long_series(
    path: str | os.PathLike | pd.DataFrame,
    id_col: str | None = "unique_id",
    time_col: str = "ds",
    value_col: str = "y",
) -> SeriesData:
    """Read series from a long-format CSV/TSV/Parquet table, or a Monash `.tsf` (or `.zip`).

    Args:
        path: the file (or a DataFrame of its rows). `.tsf` and `.zip` are read as Monash
            files; anything else as a table with one row per observation.
        id_col: the series id column, read as text (None: the table is one series, "0").
        time_col: the timestamp column: dates (`pandas.to_datetime`) or integer steps.
        value_col: the value column; an empty cell is a missing value (NaN).

    The series keep the order in which their ids first appear. The frequency is the most
    common `pandas.infer_freq` over the series (failing that, the most common fixed step when
    every step is a multiple of it); each series is then laid on its regular grid from its
    first to its last timestamp, absent timestamps becoming NaN (integer time steps: the most
    common difference, `freq` None; no frequency at all: time order as given, a warning).
    Other columns are left out with a warning. Duplicate (id, timestamp) rows, timestamps off
    the grid, unparseable dates and non-numeric values raise `SgemUserError`.
    """
    if isinstance(path, pd.DataFrame):
        frame, where = path, "the DataFrame"
        if len(frame) == 0:
            raise SgemUserError("the DataFrame has no rows; give each series' history")
    else:
        file = _existing_file(path)
        if file.suffix.lower() in (".tsf", ".zip"):
            return _from_tsf(file)
        frame, where = read_frame(file, text_columns=[id_col] if id_col else []), str(file)
    wanted = [c for c in (id_col, time_col, value_col) if c is not None]
    absent = [c for c in wanted if c not in frame.columns]
    if absent:
        raise SgemUserError(
            f"{where}: columns {absent} not found; its columns are {list(frame.columns)}. Name the "
            "id, time and value columns (CLI: --id-col, --time-col, --value-col; Python: "
            "id_col=, time_col=, value_col=)." + layout_hint(frame, time_col)
        )
    if unused := [str(c) for c in frame.columns if c not in wanted]:  # (exogenous columns)
        log.warning(
            "%s: columns %s are not used: each series is forecast from its own history "
            "(its id, time and value columns)",
            where,
            unused[:8],
        )
    if id_col is not None and (no_id := frame[id_col].isna().to_numpy()).any():
        raise SgemUserError(  # (as text, each would join a series "nan")
            f"{where}: id column {id_col!r} is empty in {int(no_id.sum())} rows (rows "
            f"{_first_rows(no_id)}); give every row its series' id, or drop those rows"
        )
    ids = frame[id_col].astype(str) if id_col is not None else pd.Series("0", index=frame.index)
    times = read_times(frame[time_col], time_col)
    values = _values(frame[value_col], value_col)
    table = pd.DataFrame({"id": ids.to_numpy(), "t": times.to_numpy(), "v": values})
    dup = table.duplicated(["id", "t"], keep=False).to_numpy()
    if dup.any():
        first = table[dup].iloc[0]
        raise SgemUserError(
            f"{where}: {int(dup.sum())} rows repeat an (id, time) pair (rows {_first_rows(dup)}; "
            f"e.g. series {first['id']!r} at {first['t']}); keep one value per series and time"
        )
    order = list(pd.unique(table["id"]))
    table = table.sort_values(["id", "t"], kind="stable")
    groups = {k: g for k, g in table.groupby("id", sort=False)}
    integer_time = pd.api.types.is_integer_dtype(table["t"])
    series: dict[str, np.ndarray] = {}
    starts: dict[str, Any] = {}
    if integer_time:
        diffs = np.concatenate([np.diff(g["t"].to_numpy()) for g in groups.values()])
        step = int(_most_common(diffs.tolist())) if len(diffs) else 1
        freq = None
    else:
        freq = _infer_freq([g["t"] for g in groups.values()])
        if freq is None:
            log.warning(
                "%s: no regular frequency could be inferred from the timestamps; the values are "
                "kept in time order and gaps in the timestamps are not filled with NaN",
                where,
            )
    for key in order:
        g = groups[key]
        t, v = g["t"], g["v"].to_numpy()
        start, end = t.iloc[0], t.iloc[-1]
        starts[key] = int(start) if integer_time else pd.Timestamp(start)
        if integer_time:
            offsets = t.to_numpy() - start
            if np.any(offsets % step):
                raise SgemUserError(
                    f"series {key!r}: time steps are not multiples of the step {step} the file "
                    "mostly uses; give series on one regular time grid"
                )
            position = offsets // step
            grid_len = int(position[-1]) + 1
        elif freq is not None:
            grid = pd.date_range(start, end, freq=freq)
            position = grid.get_indexer(pd.DatetimeIndex(t))
            if (position < 0).any():
                off = pd.DatetimeIndex(t)[position < 0][0]
                raise SgemUserError(
                    f"series {key!r}: timestamp {off} is not on the {freq!r} grid the file's "
                    f"series follow (from {start}); give all series in one frequency"
                )
            grid_len = len(grid)
        else:
            series[key] = v.astype(np.float64)
            continue
        full = np.full(grid_len, np.nan)
        full[position] = v
        series[key] = full
    _warn_sparse(series, where, freq or (f"step-{step}" if integer_time else "time-ordered"))
    return SeriesData(series, starts, freq, step=step if integer_time else None)


#: a file whose time grid is more than this share gaps is warned of (`_warn_sparse`)
MOSTLY_GAPS = 0.5


def _warn_sparse(series: dict[str, np.ndarray], where: str, step: str) -> None:
    """Warn where more than `MOSTLY_GAPS` of the file's grid has no value: the gaps are
    filled before training, so such a file trains on mostly filled values (timestamps at
    irregular times, read on their commonest step, look like this)."""
    cells = sum(len(v) for v in series.values())
    gaps = sum(int(np.isnan(v).sum()) for v in series.values())
    if cells and gaps > MOSTLY_GAPS * cells:
        log.warning(
            "%s: %d of the %d steps on the series' %s grid have no value (%.0f %%): they are "
            "filled before training; if the times are irregular, aggregate them to a regular "
            "step first",
            where,
            gaps,
            cells,
            step,
            100 * gaps / cells,
        )


def future_times(data: SeriesData, names: Sequence[str], horizon: int) -> np.ndarray | None:
    """(len(names), horizon): the times of the next `horizon` steps after each series' end,
    dates on the file's frequency or integers on its step; None when any series' times are
    unknown (no frequency, or a `.tsf` without start timestamps)."""
    rows = []
    for name in names:
        start, n = data.start.get(name), len(data.series[name])
        if data.step is not None and isinstance(start, int | np.integer):
            rows.append(int(start) + data.step * np.arange(n, n + horizon, dtype=np.int64))
        elif data.freq is not None and isinstance(start, pd.Timestamp):
            grid = pd.date_range(start, periods=n + horizon, freq=data.freq)
            rows.append(grid[-horizon:].to_numpy())
        else:
            return None
    return np.stack(rows) if rows else None


# -- context and lengths --------------------------------------------------------------------------


def _step(freq: str) -> pd.Timedelta:
    """The length of one step of `freq` (a calendar month ~ 29-31 days, measured in 2000)."""
    offset = to_offset(TSF_FREQUENCIES.get(freq.lower(), freq))
    t = pd.Timestamp("2000-01-01")
    return (t + 2 * offset) - (t + offset)


def default_context(freq: str | None, horizon: int) -> int:
    """A context length (past values the model sees) for series of frequency `freq`.

    The rule: ``max(base, k * horizon)`` where base and k come from the step length:

    ==================================  ===================================  ===
    step                                base                                 k
    ==================================  ===================================  ===
    under a day (hourly, 30min, ...)    one week of steps, at most 512       4
                                        (hourly 168, 30min 336, 10min 512)
    a day to under a week (daily, B)    28                                   4
    a week to under 28 days (weekly)    52                                   4
    28 to 89 days (monthly)             24                                   2
    90 to 364 days (quarterly)          12                                   2
    a year or more                      8                                    2
    unknown (`freq` None)               0                                    4
    ==================================  ===================================  ===

    So the context is always at least twice the horizon; hourly data with a 24-step horizon
    gets 168, daily with 14 gets 56, monthly with 24 gets 48. Yearly series keep two
    horizons: four (16 years at h = 4) took a 2-minute fit on the tourism file's yearly sums
    from MASE 2.84 to 2.59 (AutoTheta 2.66; wQL 0.123 -> 0.130), but a 5-minute fit on 20 000
    synthetic yearly series from 3.62 to 4.01 (AutoETS 3.82; wQL 0.159 -> 0.195: the longer
    windows left the search no iteration) and the yearly M3 file from 2.59 to 2.64, seed 0,
    2026-11-29.

    `freq` is a pandas frequency string ("h", "D", "MS") or a Monash `@frequency` name
    ("hourly", "half_hourly").
    """
    if int(horizon) < 1:
        raise SgemUserError(f"horizon={horizon}: the forecast horizon must be at least 1 step")
    horizon = int(horizon)
    if freq is None:
        return 4 * horizon
    try:
        step = _step(freq)
    except ValueError as exc:
        raise SgemUserError(
            f"unknown frequency {freq!r}; give a pandas frequency string such as 'h', 'D', "
            "'W', 'MS' or None"
        ) from exc
    day = pd.Timedelta(days=1)
    if step < day:
        base, k = min(int(pd.Timedelta(days=7) / step), 512), 4
    elif step < 7 * day:
        base, k = 28, 4
    elif step < 28 * day:
        base, k = 52, 4
    elif step < 90 * day:
        base, k = 24, 2
    elif step < 365 * day:
        base, k = 12, 2
    else:
        base, k = 8, 2
    return max(base, k * horizon)


def data_context(freq: str | None, horizon: int, lengths: Sequence[int] | np.ndarray) -> int:
    """The default context for series of these `lengths`: `default_context(freq, horizon)`,
    capped where most series are short.

    Long series keep the frequency's context (what suits their seasonality); a series
    shorter than context + horizon is left-padded, not dropped. But when the median series
    is shorter than that, most windows would be mostly padding, so the context is capped at
    the median length minus the horizon (at least 2): the typical series then fills its
    context and only the shorter half is padded.
    """
    base = default_context(freq, horizon)
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) == 0:
        return base
    median = int(np.median(lengths))
    if median >= base + int(horizon):
        return base
    return max(2, median - int(horizon))


__all__ = [
    "TSF_FREQUENCIES",
    "SeriesData",
    "data_context",
    "default_context",
    "future_times",
    "read_long_series",
]
