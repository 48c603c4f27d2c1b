"""A CSV as a spreadsheet in a comma-decimal locale writes it: ";"-separated, numbers with
decimal commas ("1,5"; "1.234,5" with thousands points). Read as a plain CSV, each such number
was text: a table's numeric column became one category per value (400 one-hot features for two
numeric columns of 200 rows) and a series' values were refused. Here such a column is read
as the numbers it holds, at fit and at predict alike (both read files through
`sgem.data.files_tabular.read_frame`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .table_missing import is_missing_token

log = logging.getLogger(__name__)

#: a number written with a decimal comma, optionally thousands points and an exponent
DECIMAL_COMMA = re.compile(r"^[+-]?(?:\d{1,3}(?:\.\d{3})+|\d+)(?:,\d+)?(?:[eE][+-]?\d+)?$")
#: a column is read as decimal-comma numbers where its other values mean "missing" ("?",
#: "NA") or are at most 1 - this share of them (both left as written, for the rules of
#: `sgem.data.table_missing`)
NUMBER_SHARE = 0.95


def read_csv(
    path: Path, sep: str, nrows: int | None, text_columns: Sequence[str] = ()
) -> pd.DataFrame:
    """`path` read with `sep`, or with ";" where `sep` "," reads one column holding ";" (a
    spreadsheet's ";"-separated export); under ";" or a tab, decimal-comma columns become
    numbers (`text_columns` are read as written)."""
    text = {c: str for c in text_columns}
    frame = pd.read_csv(path, sep=sep, nrows=nrows, dtype=text)
    if sep == "," and len(frame.columns) == 1 and ";" in str(frame.columns[0]):
        sep = ";"
        frame = pd.read_csv(path, sep=sep, nrows=nrows, dtype=text)
    if sep == ",":
        return frame  # (an unquoted decimal comma would have split its row)
    return with_decimal_commas(frame, skip=set(text_columns), where=str(path))


def with_decimal_commas(frame: pd.DataFrame, skip: set[str], where: str = "") -> pd.DataFrame:
    """`frame` with each text column of decimal-comma numbers (`NUMBER_SHARE` of its
    non-empty values, one of them with a comma) as numbers; the values that are not
    numbers stay as written."""
    converted = []
    for name in frame.columns:
        column = frame[name]
        if name in skip or column.dtype != object:
            continue
        present = column.dropna()
        words = present.astype(str).str.strip()
        numbers = words.str.fullmatch(DECIMAL_COMMA)
        tokens = words[~numbers].map(is_missing_token).all()  # ("?", "NA": missing values)
        enough = len(words) and (tokens or numbers.mean() >= NUMBER_SHARE)
        if not enough or not words[numbers].str.contains(",").any():
            continue
        plain = words[numbers].str.replace(".", "", regex=False).str.replace(",", ".")
        values = column.astype(object).copy()
        values[plain.index] = pd.to_numeric(plain).to_numpy()
        frame[name] = pd.to_numeric(values, errors="coerce") if numbers.all() else values
        converted.append(str(name))
    if converted:
        log.info("%s: read %s as numbers with decimal commas", where, ", ".join(converted))
    return frame


__all__ = ["DECIMAL_COMMA", "read_csv", "with_decimal_commas"]
