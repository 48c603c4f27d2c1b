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
#: a text column is dates where its first values look like dates and this share of its
#: values read as dates (the others become missing, with a note)
MIN_READ_SHARE = 0.95
#: numeric day / month / year dates (31/01/2020, 1.2.2012): which comes first is decided
_NUMERIC_DATE = r"\d{1,2}([/.-])\d{1,2}\1\d{4}"
#: what a date column's first values must look like: a four-digit year first or last (codes
#: such as "12-3-45" or versions such as "1.2.3" are not dates)
_DATE_LIKE = r"^\s*(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4})"


def date_format(column: pd.Series) -> str | None:
    """How `column` reads as dates (a strftime format, "ISO8601" or "mixed"), or None where
    it is not a column of dates."""
    if pd.api.types.is_datetime64_any_dtype(column):
        return "datetime"
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return None
    text = column.dropna().astype(str).str.strip()
    if text.empty or not text.head(20).str.contains(_DATE_LIKE).all():
        return None
    candidates = ["ISO8601", "mixed"]
    if text.str.fullmatch(_NUMERIC_DATE).all():  # the order that reads every value; month
        sep = next(c for c in "/.-" if c in text.iloc[0])  # first (pandas') where both do
        candidates = [f"%m{sep}%d{sep}%Y", f"%d{sep}%m{sep}%Y"]
    for form in candidates:
        share = float(_read(text, form).notna().mean())
        if share >= MIN_READ_SHARE:
            return form
    return None


def parse_dates(column: pd.Series, form: str) -> pd.Series:
    """`column` as naive timestamps (UTC where it carries offsets), NaT where missing or
    unreadable."""
    if pd.api.types.is_datetime64_any_dtype(column):  # a DataFrame's own timestamps
        times = pd.Series(column)
    else:
        text = column.astype("string").str.strip()
        times = _read(text, form if form != "datetime" else "mixed")
    if getattr(times.dt, "tz", None) is not None:
        times = times.dt.tz_convert("UTC").dt.tz_localize(None)
    return times


def date_specs(column: pd.Series, name: str, form: str) -> list[dict[str, Any]]:
    """The numeric specs of a date column's parts, with a note saying what became of it."""
    parts = list(DATE_PARTS)
    if (parse_dates(column, form).dropna().dt.hour != 0).any():
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
            parsed[source] = parse_dates(frame[source], spec["date_format"])
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
    utc = bool(text.str.contains(r"(?:[+-]\d{2}:?\d{2}|Z)$").any())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas' advice on formats
        try:
            return pd.to_datetime(text, format=form, errors="coerce", utc=utc)
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
