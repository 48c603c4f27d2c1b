"""A user's table's target: classes or numbers, read once at fit.

A numeric target is read as classes when it is integer-valued with few distinct values
(`MAX_AUTO_CLASSES`, `MAX_AUTO_CLASS_FRACTION`); text is classes, except numbers written for
people ("$250,000"), a regression on the numbers they show (`sgem.data.number_formats`).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from ..errors import SgemUserError
from .number_formats import formatted_numbers
from .table_contract import first_rows as _first_rows
from .table_contract import is_numeric as _is_numeric
from .table_contract import note

TaskKind = Literal["classification", "regression"]

#: a numeric target is read as classes when it is integer-valued with at most this many
#: distinct values ...
MAX_AUTO_CLASSES = 20
#: ... and at most this fraction of the rows (or 2 distinct values, whatever the row count)
MAX_AUTO_CLASS_FRACTION = 0.05


def _scalar(value: Any) -> Any:
    """A numpy / pandas scalar as the plain Python value JSON writes."""
    return value.item() if isinstance(value, np.generic) else value


def _auto_kind(y: pd.Series) -> TaskKind:
    """Classes for text and for few distinct whole numbers, else a regression."""
    if not _is_numeric(y):
        return "classification"
    values = y.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
        return "regression"
    n_distinct = len(np.unique(values))
    limit = min(MAX_AUTO_CLASSES, max(2, MAX_AUTO_CLASS_FRACTION * len(values)))
    return "classification" if n_distinct <= limit else "regression"


def encode_target(
    y: pd.Series, name: str, kind: TaskKind | None
) -> tuple[np.ndarray, TaskKind, list[Any] | None]:
    """(the target as class codes or float64 values, its kind, its classes or None): `kind`
    as given, or decided from the values (None)."""
    numbers = None if kind == "classification" else formatted_numbers(y)
    if numbers is not None and numbers.notna().all():
        y = numbers  # ("$250,000": a price to regress on, not 300 classes)
        note(f"target column {name!r}: formatted numbers read as numbers")
    if kind is None:
        kind = _auto_kind(y)
    elif kind not in ("classification", "regression"):
        raise SgemUserError(f"kind={kind!r}: expected 'classification', 'regression' or None")
    if kind == "regression":
        if not _is_numeric(y):
            raise SgemUserError(
                f"target column {name!r} is not numeric (e.g. {y.iloc[0]!r}), so it cannot be a "
                "regression target; use kind='classification' or convert it to numbers"
            )
        values = y.to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            raise SgemUserError(
                f"target column {name!r} has {int(bad.sum())} infinite values (rows "
                f"{_first_rows(bad)}); drop or fix those rows"
            )
        # float64: a float32 target loses its digits where its level dwarfs its spread
        # (y near 1.2e8 is rounded to multiples of 8); it is standardised in float64 later
        return values, "regression", None
    if _is_numeric(y) or pd.api.types.is_bool_dtype(y):
        classes, codes = np.unique(y.to_numpy(), return_inverse=True)
    else:
        classes, codes = np.unique(y.astype(str).to_numpy(), return_inverse=True)
    if len(classes) < 2:
        raise SgemUserError(
            f"target column {name!r} has a single class ({_scalar(classes[0])!r}); a classifier "
            "needs at least two: check the target column, or the rows the file holds"
        )
    return codes.astype(np.int64), "classification", [_scalar(c) for c in classes]


__all__ = ["MAX_AUTO_CLASSES", "MAX_AUTO_CLASS_FRACTION", "TaskKind", "encode_target"]
