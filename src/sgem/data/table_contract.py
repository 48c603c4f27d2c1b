"""The column contract of a table model: new data is matched to the training columns BY NAME.

A DataFrame with its columns in another order, or with columns the model never saw, must
give the same predictions as the training layout; only a bare array is read by position,
and then with a warning when the model's columns carry names that could have been checked.
Everything here is plain pandas; `encode_table` (files_tabular) and the saved
`TabularPreprocessor` call it, so the Python API and `sgem predict` share one contract.

Inputs accepted (`as_frame`): a DataFrame; a dict, column -> values (or column -> one value
for a single sample); a list of row dicts; a Series (one sample, index = column names); a
2-D array (n, d) in the model's column order, or a 1-D array of d values (one sample).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import SgemUserError

#: what a table input may be, for messages
ACCEPTED = (
    "a pandas DataFrame, a dict (column -> values), a list of row dicts, or a 2-D array "
    "in the model's column order"
)


class TableWarning(UserWarning):
    """A note about a table given to sgem: ignored columns, imputed values, categories not
    seen in training, an array whose column names cannot be checked. Silence them with
    ``warnings.filterwarnings("ignore", category=TableWarning)``."""


def note(message: str) -> None:
    """Tell the user something sgem did to their table (a `TableWarning`)."""
    warnings.warn(message, TableWarning, stacklevel=3)


def first_rows(mask: np.ndarray, k: int = 5) -> str:
    """The first `k` row numbers (0-based) where `mask` holds, for messages."""
    rows = np.flatnonzero(mask)
    shown = ", ".join(str(r) for r in rows[:k])
    return shown + (", ..." if len(rows) > k else "")


def is_numeric(series: pd.Series) -> bool:
    """Numbers (booleans excluded: they are their own kind)."""
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def is_named(table: Any) -> bool:
    """Whether `table` names its columns (a DataFrame, dict, Series or list of row dicts)."""
    if isinstance(table, pd.DataFrame | pd.Series | Mapping):
        return True
    return (
        isinstance(table, Sequence)
        and not isinstance(table, str)
        and len(table) > 0
        and all(isinstance(row, Mapping) for row in table)
    )


def _named_frame(table: Any) -> pd.DataFrame:
    if isinstance(table, pd.DataFrame):
        return table.rename(columns=str)
    if isinstance(table, pd.Series):  # one sample: its index names the columns
        return pd.DataFrame([table.to_dict()]).rename(columns=str)
    if isinstance(table, Mapping):
        if all(np.ndim(v) == 0 for v in table.values()):  # column -> one value: one sample
            return pd.DataFrame([dict(table)]).rename(columns=str)
        try:
            return pd.DataFrame(dict(table)).rename(columns=str)
        except ValueError as exc:
            raise SgemUserError(
                f"a dict of columns must map each column name to a list of values of the same "
                f"length ({exc}); or give a list of row dicts"
            ) from exc
    return pd.DataFrame(list(table)).rename(columns=str)


def as_frame(table: Any, names: list[str], named: bool) -> pd.DataFrame:
    """`table` as a DataFrame with string column names.

    A bare array is read by position as the columns `names` (its width must match); when
    `named` (the model's columns have real names) a `TableWarning` says they are unchecked.
    """
    if is_named(table):
        return _named_frame(table)
    if isinstance(table, str | bytes) or table is None:
        raise SgemUserError(
            f"cannot read {type(table).__name__} {table!r} as a table; give {ACCEPTED}"
        )
    try:
        x = np.asarray(table)
    except (TypeError, ValueError) as exc:
        raise SgemUserError(
            f"cannot read a {type(table).__name__} as a table; give {ACCEPTED}"
        ) from exc
    d = len(names)
    if x.ndim == 1 and (len(x) == d or d == 1):
        x = x[None, :] if len(x) == d and d > 1 else x[:, None]
    if x.ndim != 2 or x.shape[1] != d:
        raise SgemUserError(
            f"an array of shape {x.shape} is read by position, but the model reads {d} feature "
            f"columns {names}: expected (n, {d}); give a DataFrame or a dict (column -> values) "
            "to have the columns matched by name"
        )
    if named:
        note(
            f"a bare array is read by position as the columns {names}: their names are "
            "unchecked; give a DataFrame or a dict (column -> values) to have them matched by name"
        )
    return pd.DataFrame(x, columns=names)


def select_columns(
    frame: pd.DataFrame,
    names: list[str],
    target: str | None = None,
    fix: str = "",
    known: Sequence[str] = (),
) -> pd.DataFrame:
    """The columns `names` of `frame`, by name and in that order.

    A missing column is refused, naming each one (`fix` adds what else would help); a
    column the model does not read (other than the target and the `known` ones fit left
    out, with its own note) is ignored with a note.
    """
    absent = [c for c in names if c not in frame.columns]
    if absent:
        raise SgemUserError(
            f"feature columns {absent} not in the table; its columns are {list(frame.columns)}. "
            f"Add {'it' if len(absent) == 1 else 'them'} under the training name(s) (the model "
            f"reads {names}){fix}"
        )
    twice = sorted({c for c in frame.columns[frame.columns.duplicated()] if c in names})
    if twice:
        raise SgemUserError(f"columns {twice} appear more than once in the table; keep one of each")
    extra = [c for c in frame.columns if c not in names and c != target and c not in known]
    if extra:
        note(f"ignored column(s) {extra}: the model reads only its training columns {names}")
    return frame[names]


def to_numbers(column: pd.Series) -> np.ndarray | None:
    """A column as float64 (NaN where missing; booleans as 0/1; numbers written as text or
    as categories converted), or None when it holds text that is not a number."""
    if is_numeric(column):
        return column.to_numpy(dtype=np.float64, na_value=np.nan)
    try:
        values = pd.to_numeric(column.astype(object))
    except (TypeError, ValueError):
        return None
    return values.astype("float64").to_numpy(dtype=np.float64, na_value=np.nan)


def numeric_frame(frame: pd.DataFrame) -> np.ndarray:
    """An all-numeric table as float64 (n, d); text columns are refused, naming them."""
    columns = {c: to_numbers(frame[c]) for c in frame.columns}
    text = [c for c, v in columns.items() if v is None]
    if text:
        raise SgemUserError(
            f"column(s) {text} are not numeric, but the model reads numbers there (it has no "
            "categorical encoding); give numeric values"
        )
    if not columns:
        return np.zeros((len(frame), 0))
    return np.column_stack([v for v in columns.values() if v is not None])


__all__ = [
    "ACCEPTED",
    "TableWarning",
    "as_frame",
    "first_rows",
    "is_named",
    "is_numeric",
    "note",
    "numeric_frame",
    "select_columns",
    "to_numbers",
]
