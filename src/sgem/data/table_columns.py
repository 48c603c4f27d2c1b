"""What each column of a user's table becomes as a feature: numbers, a boolean, one-hot
categories (the commonest 200 of a column with more), or a date's parts; and which columns
cannot be features (identifiers, free text), left out with a note."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import SgemUserError
from .number_formats import NUMBER_FORMAT
from .table_contract import is_numeric as _is_numeric
from .table_contract import note
from .table_dates import date_specs
from .table_missing import placeholder_tokens, without_placeholders

#: a categorical feature one-hot encodes at most this many categories (its commonest)
MAX_CATEGORIES = 200
#: ... and one with more, whose distinct values are at least this share of its rows, is an
#: identifier or free text: left out of the features
IDENTIFIER_SHARE = 0.5
#: a text column of more than this many distinct values, at least `UNIQUE_SHARE` of whose
#: rows hold a value no other row has, is an identifier or free text too, however few rows
#: it has: one-hot, each of its features would mark one row (a 200-row table's
#: "€3.221,11"-style price column became 200 such features before it was read as numbers)
MIN_FREE_TEXT_VALUES = 20
UNIQUE_SHARE = 0.9
#: names of row numbers and identifiers: index, id, row, "Unnamed: 0" (pandas' written
#: index), and names ending in _id / " id" / Id / ID (PassengerId, customer_id)
ID_NAME = re.compile(r"(?i:index|idx|id|row|row_?num(ber)?|unnamed: ?\d+|.*[_ ]id)|.*[a-z](Id|ID)")


def read_placeholders(
    frame: pd.DataFrame, features: list[str]
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """`frame` with each mostly numeric text column read as numbers, its placeholder
    tokens missing (`sgem.data.table_missing.placeholder_tokens`), with a note; and those
    tokens by column, which its spec keeps for predict."""
    found = {c: t for c in features if (t := placeholder_tokens(frame[c]))}
    if not found:
        return frame, found
    frame = frame.copy()
    for name, tokens in found.items():
        n = int(frame[name].astype(str).str.strip().isin(tokens).sum())
        frame[name] = without_placeholders(frame[name], tokens)
        note(
            f"column {name!r}: read as numbers, its {n} values {tokens} as missing (if they "
            "mean something else, replace them in the file)"
        )
    return frame, found


def column_specs(
    frame: pd.DataFrame,
    features: list[str],
    placeholders: dict[str, list[str]],
    formatted: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Each feature's spec (with its `placeholders` tokens, if any, and `NUMBER_FORMAT` where
    it was read from `formatted` numbers, `sgem.data.number_formats`; a date column's parts,
    `sgem.data.table_dates`). Identifiers and free text are left out with a note; a table
    with nothing else is refused."""
    specs, left_out = [], []
    for name in features:
        column = frame[name]
        dated = None if _is_numeric(column) else date_specs(column, name)
        if dated is not None:
            specs.extend(dated)
            continue
        spec = _column_spec(column, name)
        if isinstance(spec, str):
            left_out.append(spec)
        else:
            specs.append(
                spec
                | ({"placeholders": placeholders[name]} if name in placeholders else {})
                | ({NUMBER_FORMAT: formatted[name]} if formatted and name in formatted else {})
            )
    if left_out and not specs:
        raise SgemUserError(
            "no column can be a feature: "
            + "; ".join(left_out)
            + ". Add feature columns, or encode these as numbers yourself"
        )
    if left_out:
        note(
            "left out of the features: "
            + "; ".join(left_out)
            + " (choose the features with --features a,b,... / features=[...])"
        )
    return specs


def _column_spec(column: pd.Series, name: str) -> dict[str, Any] | str:
    """The spec of a feature column, or why it cannot be one."""
    dtype = str(column.dtype)
    if column.isna().all():  # (nothing to learn from, nor to impute it with)
        return f"{name!r} holds no values (every row missing)"
    if _is_numeric(column):
        if _numbers_rows(column, name):
            return f"{name!r} holds {len(column)} distinct whole numbers (a row identifier)"
        return {"name": name, "kind": "numeric", "dtype": dtype}
    if pd.api.types.is_bool_dtype(column):
        return {"name": name, "kind": "bool", "dtype": dtype}
    text = column.dropna().astype(str)
    counts = text.value_counts(sort=False)
    once = int((counts == 1).sum())
    free_text = len(counts) > MIN_FREE_TEXT_VALUES and once >= UNIQUE_SHARE * len(text)
    if len(counts) > MAX_CATEGORIES or free_text:
        if len(counts) >= IDENTIFIER_SHARE * len(text):
            return (
                f"{name!r} has {len(counts)} distinct text values in {len(text)} rows (an "
                "identifier or free text)"
            )
        # the commonest categories one-hot, the rare ones all zero (as an unseen one)
        kept = counts.sort_values(ascending=False, kind="stable").index[:MAX_CATEGORIES]
        note(
            f"column {name!r}: {len(counts)} categories; the {MAX_CATEGORIES} most frequent "
            f"are one-hot features, the {len(counts) - MAX_CATEGORIES} rarer ones "
            f"({int((~text.isin(kept)).sum())} rows) are all zero"
        )
        return {
            "name": name,
            "kind": "onehot",
            "dtype": dtype,
            "categories": sorted(str(c) for c in kept),
            "other": True,
        }
    return {"name": name, "kind": "onehot", "dtype": dtype, "categories": sorted(counts.index)}


def _numbers_rows(column: pd.Series, name: str) -> bool:
    """A numeric column named like an identifier (`ID_NAME`) whose values are distinct
    whole numbers, none missing: it numbers the rows. As a feature it would only place a
    row by its position in the file: the clustering would split the table by file order,
    and a network fitted on it extrapolates to the next file's numbers."""
    if not ID_NAME.fullmatch(str(name).strip()) or len(column) < 2:
        return False
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    if not np.isfinite(values).all() or (values != np.round(values)).any():
        return False
    return len(np.unique(values)) == len(values)


__all__ = ["IDENTIFIER_SHARE", "MAX_CATEGORIES", "column_specs", "read_placeholders"]
