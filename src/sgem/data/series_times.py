"""A long-format file's time column as timestamps (or integer steps), read as a user wrote
it: ISO dates mixed with ISO date-times, UTC offsets (a local-time export across daylight
saving), and day-first dates (31/01/2020), which pandas reads month-first where it can
(01/02/2012 became 2 January: a monthly file turned daily, 96 % of it filled in)."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd

from ..errors import SgemUserError
from .table_contract import first_rows

log = logging.getLogger(__name__)

#: dates written with the day and month as numbers first: 31/01/2020, 1.2.2012
_NUMERIC_DATE = r"\d{1,2}([/.-])\d{1,2}\1\d{4}"


def read_times(column: pd.Series, name: str) -> pd.Series:
    """Timestamps (naive; offsets converted to UTC, with a note) or int64 steps, else a
    `SgemUserError` naming the column and what to write."""
    missing = column.isna().to_numpy()
    if missing.any():
        raise SgemUserError(
            f"time column {name!r} is empty in {int(missing.sum())} rows (rows "
            f"{first_rows(missing)}); every row needs a timestamp"
        )
    if pd.api.types.is_integer_dtype(column):
        return column.astype(np.int64)
    if pd.api.types.is_datetime64_any_dtype(column):
        return _naive(pd.Series(column), name)
    codes, distinct = pd.factorize(column)
    if len(distinct) < len(column):  # series share their times: each distinct one read once
        # (3000 daily series, 7.7 million rows of 4500 dates: 11 s of text parsing, now <1 s)
        read = read_times(pd.Series(distinct, name=column.name), name)
        return pd.Series(read.to_numpy()[codes], index=column.index, name=column.name)
    text = column.astype(str).str.strip()
    ordered = _day_or_month_first(text, name)
    if ordered is not None:
        return ordered
    utc = _has_offsets(text)
    for form in ("ISO8601", "mixed"):  # ISO first (exact), then whatever pandas can read
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # pandas' advice on formats: said below
                return _naive(pd.to_datetime(text, format=form, utc=utc), name)
        except (ValueError, TypeError) as exc:
            failure = exc
    raise SgemUserError(
        f"time column {name!r} holds values that are not dates (e.g. {_not_a_date(text)!r}): "
        f"{str(failure).splitlines()[0]}; write ISO dates (2020-01-31 or 2020-01-31 13:00) "
        "or integer time steps"
    ) from failure


def _not_a_date(text: pd.Series) -> str:
    """The first value that does not read as a date on its own (the first value where each
    does, and only their mixture fails)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = pd.to_datetime(text, format="mixed", errors="coerce")
    bad = text[times.isna().to_numpy()]
    return str(bad.iloc[0] if len(bad) else text.iloc[0])


def _has_offsets(text: pd.Series) -> bool:
    return bool(text.str.contains(r"(?:[+-]\d{2}:?\d{2}|Z)$").any())


def _naive(times: pd.Series, name: str) -> pd.Series:
    """Timestamps without a time zone: aware ones in UTC (hours stay regular across a
    daylight-saving change), with a note."""
    if getattr(times.dt, "tz", None) is None:
        return times
    log.warning("time column %r: times with UTC offsets are read in UTC", name)
    return times.dt.tz_convert("UTC").dt.tz_localize(None)


def _day_or_month_first(text: pd.Series, name: str) -> pd.Series | None:
    """Numeric day/month dates read in the order that parses every value, and where both
    do (no day above 12), the one that lays the dates on the denser grid (`_coverage`); None for
    other formats."""
    match = text.str.fullmatch(_NUMERIC_DATE)
    if not match.all():
        return None
    sep = next(c for c in "/.-" if c in text.iloc[0])
    read = {
        order: pd.to_datetime(text, format=f"{a}{sep}{b}{sep}%Y", errors="coerce")
        for order, a, b in (("month first", "%m", "%d"), ("day first", "%d", "%m"))
    }
    whole = {order: t for order, t in read.items() if t.notna().all()}
    if not whole:
        return None
    if len(whole) == 1:
        return next(iter(whole.values()))
    regular = {order: _coverage(t) for order, t in whole.items()}
    order = max(regular, key=lambda o: (regular[o], o == "month first"))
    log.warning(
        "time column %r: dates like %r read %s (the order that lays them on the denser "
        "grid); write ISO dates (2020-01-31) to leave no doubt",
        name,
        text.iloc[0],
        order,
    )
    return whole[order]


def _coverage(times: pd.Series) -> float:
    """How densely the distinct dates fill their grid: their count over the span divided
    by the commonest step (monthly dates read day first: about 1; read month first, as 1 to
    12 January of every year: 0.03)."""
    days = np.sort(times.unique()).astype("datetime64[D]").astype(np.int64)
    steps = np.diff(days)
    if len(steps) == 0:
        return 0.0
    values, counts = np.unique(steps, return_counts=True)
    return float(len(days) / ((days[-1] - days[0]) / values[np.argmax(counts)] + 1))


__all__ = ["read_times"]
