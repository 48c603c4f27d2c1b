"""What each column of a user's table becomes as a feature: numbers, a boolean, or one-hot
categories, and which columns cannot be features (identifiers, free text, dates in their
hundreds), refused together in one message rather than one per run."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..errors import SgemUserError
from .table_contract import is_numeric as _is_numeric
from .table_contract import note
from .table_missing import placeholder_tokens, without_placeholders

#: a categorical feature with more categories than this is refused (one-hot would explode)
MAX_CATEGORIES = 200


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
    frame: pd.DataFrame, features: list[str], placeholders: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """Each feature's spec (with its `placeholders` tokens, if any); the columns that cannot
    be features are refused together."""
    specs, unusable = [], []
    for name in features:
        spec = _column_spec(frame[name], name)
        if isinstance(spec, str):
            unusable.append(spec)
        else:
            specs.append(
                spec | ({"placeholders": placeholders[name]} if name in placeholders else {})
            )
    if unusable:
        raise SgemUserError(
            "these columns cannot be features: "
            + "; ".join(unusable)
            + ". Leave them out (--features a,b,...), or encode them as numbers yourself"
        )
    return specs


def _column_spec(column: pd.Series, name: str) -> dict[str, Any] | str:
    """The spec of a feature column, or why it cannot be one."""
    dtype = str(column.dtype)
    if _is_numeric(column):
        return {"name": name, "kind": "numeric", "dtype": dtype}
    if pd.api.types.is_bool_dtype(column):
        return {"name": name, "kind": "bool", "dtype": dtype}
    categories = sorted({str(v) for v in column.dropna().to_numpy()})
    if len(categories) > MAX_CATEGORIES:
        if pd.api.types.is_datetime64_any_dtype(column) or _looks_like_dates(column):
            return (
                f"{name!r} holds {len(categories)} distinct dates or times (e.g. "
                f"{column.dropna().iloc[0]!s}: as categories, a new date would be unseen; "
                "turn them into numbers such as days since a start, month, weekday)"
            )
        return (
            f"{name!r} has {len(categories)} distinct text values (more than "
            f"{MAX_CATEGORIES}: an identifier or free text)"
        )
    return {"name": name, "kind": "onehot", "dtype": dtype, "categories": categories}


def _looks_like_dates(column: pd.Series) -> bool:
    """Whether a text column's first values read as dates (ISO "2024-03-01" and the like)."""
    import warnings

    sample = column.dropna().astype(str).head(20)
    if sample.empty or not sample.str.contains(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}").all():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bool(pd.to_datetime(sample, errors="coerce").notna().all())


__all__ = ["MAX_CATEGORIES", "column_specs", "read_placeholders"]
