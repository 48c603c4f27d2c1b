"""A table's date columns as numbers: days since 1970, year, month, day, weekday (and the
hour, where the column holds times), so that a date never seen in training still means
something. As categories, a new date had all-zero features, and a column of hundreds of dates
could not be a feature at all.

Each part is a numeric column spec with `date_of` (the user's column) and `part`; the frame
gets the parts as columns (`with_date_parts`) before imputation and encoding, at fit and at
predict, so every later step (imputation, the missing indicator, the ONNX graph's inputs)
treats them as the numbers they are. The reading (`date_format`: an explicit strftime format
for numeric day / month dates, else ISO 8601 or pandas' mixed reading) is saved with them, so
01/02/2020 means the same day at fit and at predict.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from .table_contract import note

#: the parts every date column gives, in this order (and "hour" where it holds times)
DATE_PARTS = ("days", "year", "month", "day", "weekday")
TIME_PART = "hour"
#: a text column is dates where this share of its values look like dates and read as dates
#: (the others become missing, with a note)
MIN_READ_SHARE = 0.95
#: day / month / year dates written with numbers (31/01/2020, 1.2.2012 13:00): which of day
#: and month comes first is decided once for the column ("day first" / "month first")
_NUMERIC_DATE = r"^\s*(\d{1,2})[/.-](\d{1,2})[/.-]\d{4}"
#: what a date looks like: a four-digit year first or last, with the month as a number or
#: a name (codes such as "12-3-45" or versions such as "1.2.3" are not dates)
_DATE_LIKE = (
    r"^\s*(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4}"
    r"|[A-Za-z]{3,9}\.? \d{1,2},? \d{4}|\d{1,2}[- ][A-Za-z]{3,9}\.?[- ]\d{4})"  # Jan 31, 2020
)
ORDERS = ("day first", "month first")


def date_format(column: pd.Series, name: str = "") -> str | None:
    """How `column` reads as dates ("day first" / "month first" for numeric day-month
    dates, else "ISO8601" or pandas' "mixed"; "datetime" for timestamps), or None where it
    is not a column of dates."""
    reading = _reading(column, name)
    return None if reading is None else reading[0]


def _reading(column: pd.Series, name: str) -> tuple[str, pd.Series] | None:
    """(`date_format`, the column's present values read in it), or None."""
    if pd.api.types.is_datetime64_any_dtype(column):
        return "datetime", column.dropna()
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return None
    text = column.dropna().astype(str).str.strip()
    if text.empty or text.str.contains(_DATE_LIKE).mean() < MIN_READ_SHARE:
        return None
    numbers = text.str.extract(_NUMERIC_DATE).dropna().astype(int)
    if len(numbers) >= MIN_READ_SHARE * len(text):
        candidates = [_order(numbers, name)]
    else:
        candidates = ["ISO8601", "mixed"]
    for form in candidates:
        times = _read(text, form)
        if times.notna().mean() >= MIN_READ_SHARE:
            return form, times
    return None


def _order(numbers: pd.DataFrame, name: str) -> str:
    """Day first or month first, whichever more of the dates' two numbers say (a first
    number above 12 is a day); month first, with a note, where none says."""
    day_first = int((numbers[0] > 12).sum())
    month_first = int((numbers[1] > 12).sum())
    if day_first == month_first == 0:
        note(
            f"column {name!r}: no day above 12 tells whether dates such as "
            f"{numbers.iloc[0, 0]:02d}/{numbers.iloc[0, 1]:02d} are day or month first; read "
            "month first (write ISO dates, 2020-01-31, to leave no doubt)"
        )
    return "day first" if day_first > month_first else "month first"


def parse_dates(column: pd.Series, form: str, name: str = "") -> pd.Series:
    """`column` as naive timestamps (UTC where it carries offsets), NaT where missing or
    unreadable. Text is read in the column's `form`, and what that misses in ISO 8601 (a
    file that writes its dates otherwise at predict); text given to a model fitted on
    timestamps is read in the form the text itself shows."""
    if pd.api.types.is_datetime64_any_dtype(column):  # a DataFrame's own timestamps
        return _naive(pd.Series(column))
    text = column.astype("string").str.strip()
    if form == "datetime":
        form = date_format(column, name) or "mixed"
    times = _naive(_read(text, form))
    missed = times.isna() & text.notna()
    if missed.any() and form != "ISO8601":
        times[missed] = _naive(_read(text[missed], "ISO8601"))
    return times


def _naive(times: pd.Series) -> pd.Series:
    if getattr(times.dt, "tz", None) is not None:
        times = times.dt.tz_convert("UTC").dt.tz_localize(None)
    return times.astype("datetime64[ns]")


def date_specs(column: pd.Series, name: str) -> list[dict[str, Any]] | None:
    """The numeric specs of a date column's parts, with a note saying what became of it;
    None where `column` is not dates."""
    reading = _reading(column, name)
    if reading is None:
        return None
    form, times = reading
    parts = list(DATE_PARTS)
    if (_naive(times).dropna().dt.hour != 0).any():
        parts.append(TIME_PART)
    note(f"column {name!r}: dates, used as {', '.join(parts)} (days since 1970)")
    return [
        {
            "name": f"{name}.{part}",
            "kind": "numeric",
            "dtype": "float64",
            "date_of": name,
            "part": part,
            "date_format": form,
        }
        for part in parts
    ]


def source_columns(columns: list[dict[str, Any]]) -> list[str]:
    """The user's columns the specs read, in order (a date column once for all its parts)."""
    return list(dict.fromkeys(spec.get("date_of", spec["name"]) for spec in columns))


def with_date_parts(frame: pd.DataFrame, columns: list[dict[str, Any]]) -> pd.DataFrame:
    """`frame` with each date part of `columns` as a float64 column (NaN where the date is
    missing or unreadable)."""
    dated = [spec for spec in columns if "date_of" in spec]
    if not dated:
        return frame
    parsed: dict[str, pd.Series] = {}
    parts: dict[str, np.ndarray] = {}
    for spec in dated:
        source = spec["date_of"]
        if source not in parsed:
            parsed[source] = parse_dates(frame[source], spec["date_format"], source)
            _say_unread(frame[source], parsed[source], source)
        parts[spec["name"]] = _part(parsed[source], spec["part"])
    return frame.assign(**parts)


def _say_unread(column: pd.Series, times: pd.Series, name: str) -> None:
    """A note naming the values of a date column that are not dates (read as missing)."""
    unread = (times.isna() & column.notna()).to_numpy()
    if unread.any():
        examples = ", ".join(repr(str(v)) for v in column[unread].unique()[:3])
        note(
            f"column {name!r}: {int(unread.sum())} values are not dates (e.g. {examples}); "
            "they are read as missing"
        )


def _part(times: pd.Series, part: str) -> np.ndarray:
    if part == "days":
        nanos = times.to_numpy(dtype="datetime64[ns]").astype(np.int64).astype(np.float64)
        values = nanos / 86_400e9
    elif part == "weekday":
        values = times.dt.weekday.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        values = getattr(times.dt, part).to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(times.isna().to_numpy(), np.nan, values)


def _read(text: pd.Series, form: str) -> pd.Series:
    """`text` read as `form` ("day first" / "month first": pandas' mixed reading with that
    order for every value; else a pandas format), NaT where it does not read."""
    utc = bool(text.str.contains(r"(?:[+-]\d{2}:?\d{2}|Z)$").any())
    order = {"format": "mixed", "dayfirst": form == "day first"} if form in ORDERS else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas' advice on formats
        try:
            return pd.to_datetime(text, errors="coerce", utc=utc, **({"format": form} | order))
        except (ValueError, TypeError):
            return pd.Series(pd.NaT, index=text.index, dtype="datetime64[ns]")


__all__ = [
    "DATE_PARTS",
    "TIME_PART",
    "date_format",
    "date_specs",
    "parse_dates",
    "source_columns",
    "with_date_parts",
]
