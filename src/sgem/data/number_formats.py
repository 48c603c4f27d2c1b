"""Numbers a spreadsheet wrote for people: "$1,234.50", "12.5%", "(300)", "€ 80".

Read as they are, such a column is text: a price column of a few hundred rows became one
category per value, and one of more rows was left out as "an identifier or free text", so
the feature was lost without an error. A feature column whose every value (but the ones that
mean missing) is such a number is read as the number it shows: currency signs and thousands
commas dropped, a percentage divided by 100, an accountant's parentheses negative. Its spec
keeps `number_format`, so predict reads new rows (files and DataFrames alike) the same way.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .table_contract import note
from .table_missing import is_missing_token

#: the spec key of a feature column read this way
NUMBER_FORMAT = "number_format"
#: currency signs a number may carry before or after it
CURRENCY = "$€£¥"
#: a formatted number: optional parentheses, sign, currency; thousands commas (groups of
#: three) or none; an optional decimal part; an optional percent sign
FORMATTED = re.compile(
    rf"^(\()?\s*([+-])?\s*[{CURRENCY}]?\s*([+-])?(\d{{1,3}}(?:,\d{{3}})+|\d+)(\.\d+)?"
    rf"\s*[{CURRENCY}]?\s*(%)?\s*(\))?$"
)
#: what shows a number was formatted (else it is a plain number, read as one already)
_MARKS = re.compile(rf"[{CURRENCY}%,()]")


def formatted_numbers(column: pd.Series) -> pd.Series | None:
    """`column` as the numbers it shows (`read_formatted`) where it is text whose every value
    that does not mean missing is a formatted number, at least one with a mark of formatting
    (a currency sign, %, a thousands comma or parentheses); else None."""
    if column.dtype != object and not pd.api.types.is_string_dtype(column):
        return None
    numbers = read_formatted(column)
    if unreadable(column, numbers):
        return None
    words = column.dropna().astype(str).str.strip()
    words = words[~words.map(is_missing_token)]
    return numbers if len(words) and words.str.contains(_MARKS).any() else None


def formatted_column(column: pd.Series) -> bool:
    """Whether `column` holds formatted numbers (`formatted_numbers`)."""
    return formatted_numbers(column) is not None


def read_formatted(column: pd.Series) -> pd.Series:
    """`column` as float64 numbers (NaN where missing); a value that is neither a formatted
    number nor missing stays NaN too, and is named by `unreadable`."""
    words = column.astype(object).where(column.notna(), None)
    return pd.Series(
        [np.nan if w is None else _parse(str(w).strip()) for w in words],
        index=column.index,
        dtype=np.float64,
        name=column.name,
    )


def read_number_formats(frame: pd.DataFrame, features: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """`frame` with each feature column of formatted numbers (`formatted_column`) read as
    numbers, with a note; and those columns' names (their specs keep `NUMBER_FORMAT`)."""
    read = {c: v for c in features if (v := formatted_numbers(frame[c])) is not None}
    if not read:
        return frame, []
    frame = frame.copy()
    for name, numbers in read.items():
        example = str(frame[name].dropna().iloc[0]).strip()
        frame[name] = numbers
        note(
            f"column {name!r}: formatted numbers read as numbers ({example!r} as "
            f"{_parse(example):g}: currency signs and thousands commas dropped, a percentage "
            "divided by 100, parentheses negative)"
        )
    return frame, list(read)


def unreadable(column: pd.Series, numbers: pd.Series | None = None) -> list[str]:
    """The values of `column` that are neither formatted numbers nor missing (`numbers`: its
    `read_formatted`, where the caller has it)."""
    numbers = read_formatted(column) if numbers is None else numbers
    words = column[numbers.isna() & column.notna()].astype(str).str.strip()
    return sorted(set(words[~words.map(is_missing_token)]))


def _parse(text: str) -> float:
    """The number `text` shows, or NaN where it is not a formatted number."""
    m = FORMATTED.fullmatch(text)
    if m is None or bool(m.group(1)) != bool(m.group(7)) or (m.group(2) and m.group(3)):
        return np.nan
    value = float(m.group(4).replace(",", "") + (m.group(5) or ""))
    if m.group(6):
        value /= 100.0
    negative = (m.group(2) or m.group(3)) == "-" or bool(m.group(1))
    return -value if negative else value


__all__ = [
    "FORMATTED",
    "NUMBER_FORMAT",
    "formatted_column",
    "formatted_numbers",
    "read_formatted",
    "read_number_formats",
    "unreadable",
]
