"""Numbers a spreadsheet wrote for people: "$1,234.50", "12.5%", "(300)", "€ 80", and with
a decimal comma "€1.234,50", "12,5 %", "1 234,5".

Read as they are, such a column is text: a price column of a few hundred rows became one
category per value, and one of more rows was left out as "an identifier or free text", so
the feature was lost without an error. A feature column whose every value (but the ones that
mean missing) is such a number is read as the number it shows: currency signs and thousands
commas dropped, a percentage divided by 100, an accountant's parentheses negative. A column
that reads so with a decimal point is read so; else one that does with a decimal comma (and
thousands dots or spaces) is read that way. Its spec keeps `number_format` (which of the two),
so predict reads new rows (files and DataFrames alike) the same way.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .table_contract import note
from .table_missing import is_missing_token

#: the spec key of a feature column read this way; its value, the style (`STYLES`)
NUMBER_FORMAT = "number_format"
#: currency signs a number may carry before or after it
CURRENCY = "$€£¥"


def _pattern(thousands: str, decimal: str) -> re.Pattern[str]:
    """A formatted number: optional parentheses, sign, currency; thousands separators (groups
    of three) or none; an optional decimal part; an optional percent sign."""
    return re.compile(
        rf"^(\()?\s*([+-])?\s*[{CURRENCY}]?\s*([+-])?(\d{{1,3}}(?:[{thousands}]\d{{3}})+|\d+)"
        rf"({re.escape(decimal)}\d+)?\s*[{CURRENCY}]?\s*(%)?\s*(\))?$"
    )


#: style -> (its pattern, its decimal mark), in the order a column is tried: "$1,234.50",
#: then "€1.234,50" / "1 234,5" (spaces, also the non-breaking ones spreadsheets write)
STYLES = {
    "formatted": (_pattern(",", "."), "."),
    "formatted-decimal-comma": (_pattern(". \u00a0\u202f", ","), ","),
}
#: what shows a number was formatted (else it is a plain number, read as one already)
_MARKS = re.compile(rf"[{CURRENCY}%,()]")


def number_style(column: pd.Series) -> tuple[str, pd.Series] | None:
    """(its style, `column` as the numbers it shows) where it is text whose every value that
    does not mean missing is a formatted number of one style (`STYLES`, the first that
    reads them all), at least one with a mark of formatting (a currency sign, %, a comma or
    parentheses); else None. Each distinct value is parsed once, and a text column is
    given up at its first value that is no number."""
    if column.dtype != object and not pd.api.types.is_string_dtype(column):
        return None
    shown = column.dropna().astype(str).str.strip()
    distinct = [w for w in pd.unique(shown.to_numpy()) if not is_missing_token(w)]
    if not distinct or not any(_MARKS.search(w) for w in distinct):
        return None
    for style, (pattern, decimal) in STYLES.items():
        known: dict[str, float] = {}
        for word in distinct:
            value = _parse(word, pattern, decimal)
            if value != value:  # (NaN: not a number of this style)
                break
            known[word] = value
        else:
            return style, _mapped(column, shown, known)
    return None


def _mapped(column: pd.Series, shown: pd.Series, known: dict[str, float]) -> pd.Series:
    """`column` as float64: its stripped values `shown` through `known`, NaN elsewhere."""
    numbers = shown.map(known).astype(np.float64).reindex(column.index)
    return numbers.rename(column.name)


def formatted_numbers(column: pd.Series) -> pd.Series | None:
    """`column` as the numbers it shows where it holds formatted numbers (`number_style`),
    else None."""
    found = number_style(column)
    return None if found is None else found[1]


def formatted_column(column: pd.Series) -> bool:
    """Whether `column` holds formatted numbers (`formatted_numbers`)."""
    return formatted_numbers(column) is not None


def read_formatted(column: pd.Series, style: str | None = None) -> pd.Series:
    """`column` as float64 numbers (NaN where missing) in `style` (a spec's `NUMBER_FORMAT`;
    None: the column's own, `number_style`, else "formatted"); a value that is neither a
    formatted number nor missing stays NaN too, and is named by `unreadable`."""
    if style is None:
        found = number_style(column)
        if found is not None:
            return found[1]
    pattern, decimal = STYLES.get(style or "formatted", STYLES["formatted"])
    shown = column.dropna().astype(str).str.strip()
    known = {w: _parse(w, pattern, decimal) for w in pd.unique(shown.to_numpy())}
    return _mapped(column, shown, known)


def read_number_formats(
    frame: pd.DataFrame, features: list[str]
) -> tuple[pd.DataFrame, dict[str, str]]:
    """`frame` with each feature column of formatted numbers (`number_style`) read as
    numbers, with a note; and those columns' styles by name (their specs keep them as
    `NUMBER_FORMAT`)."""
    read = {c: found for c in features if (found := number_style(frame[c])) is not None}
    if not read:
        return frame, {}
    frame = frame.copy()
    for name, (style, numbers) in read.items():
        shown = frame[name].dropna()
        example = str(shown.iloc[0]).strip()
        frame[name] = numbers
        marks = "thousands commas" if style == "formatted" else "thousands dots, a decimal comma"
        note(
            f"column {name!r}: formatted numbers read as numbers ({example!r} as "
            f"{numbers[shown.index[0]]:g}: currency signs and {marks} read, a percentage "
            "divided by 100, parentheses negative)"
        )
    return frame, {name: style for name, (style, _) in read.items()}


def unreadable(column: pd.Series, numbers: pd.Series | None = None) -> list[str]:
    """The values of `column` that are neither formatted numbers nor missing (`numbers`: its
    `read_formatted`, where the caller has it)."""
    numbers = read_formatted(column) if numbers is None else numbers
    words = column[numbers.isna() & column.notna()].astype(str).str.strip()
    return sorted(set(words[~words.map(is_missing_token)]))


def _parse(text: str, pattern: re.Pattern[str], decimal: str) -> float:
    """The number `text` shows in `pattern`'s style, or NaN where it is not one."""
    m = pattern.fullmatch(text)
    if m is None or bool(m.group(1)) != bool(m.group(7)) or (m.group(2) and m.group(3)):
        return np.nan
    whole = re.sub(r"\D", "", m.group(4))
    value = float(whole + (m.group(5) or "").replace(decimal, "."))
    if m.group(6):
        value /= 100.0
    negative = (m.group(2) or m.group(3)) == "-" or bool(m.group(1))
    return -value if negative else value


__all__ = [
    "NUMBER_FORMAT",
    "STYLES",
    "formatted_column",
    "formatted_numbers",
    "number_style",
    "read_formatted",
    "read_number_formats",
    "unreadable",
]
