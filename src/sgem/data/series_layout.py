"""What to tell a user whose series table lacks the long format's columns.

sgem reads series in long format (one row per series and time: id, time, value), as
statsforecast and AutoGluon do. A spreadsheet's export is often wide (a time column and one
column per series) or one series (a time column and a value column, named anything): the
error then says which layout it saw and the exact pandas line or flags that fix it, rather
than only that `unique_id` / `ds` / `y` are missing.
"""

from __future__ import annotations

import pandas as pd

from .series_times import read_times

#: column names a time column commonly has, first tried in this order
TIME_NAMES = ("ds", "date", "time", "timestamp", "datetime", "period", "month", "year", "week")


def layout_hint(frame: pd.DataFrame, time_col: str) -> str:
    """A sentence naming the layout of `frame` where it is recognisably wide or one series
    (its time column `time_col` if present, else a column named like one whose values read as
    times; every other column numeric), with its fix; "" otherwise."""
    time = _time_column(frame, time_col)
    if time is None:
        return ""
    values = [c for c in frame.columns if c != time]
    if not values or not all(pd.api.types.is_numeric_dtype(frame[c]) for c in values):
        return ""
    shown = ", ".join(repr(str(c)) for c in values[:4]) + (", ..." if len(values) > 4 else "")
    if len(values) == 1:
        return (
            f" It looks like one series (time column {time!r}, values {shown}): give "
            f"--time-col {time} --value-col {values[0]} (Python: time_col=, value_col=)."
        )
    return (
        f" It looks like one column per series (wide: time column {time!r}, {len(values)} "
        f"series {shown}); sgem reads long format, one row per series and time. Reshape it "
        f"with pandas: frame.melt(id_vars={str(time)!r}, var_name='unique_id', "
        "value_name='y').dropna(subset=['y']), or forecast one of them with "
        f"--time-col {time} --value-col {values[0]}."
    )


def _time_column(frame: pd.DataFrame, time_col: str) -> str | None:
    """`time_col` if `frame` has it, else the first column named like a time column whose
    values read as times; None if there is none."""
    if time_col in frame.columns:
        return time_col
    by_name = {str(c).strip().lower(): c for c in frame.columns}
    for name in TIME_NAMES:
        column = by_name.get(name)
        if column is None:
            continue
        try:
            read_times(frame[column].head(200), str(column))
        except Exception:  # (its values are not times: not a time column)
            continue
        return str(column)
    return None


__all__ = ["TIME_NAMES", "layout_hint"]
