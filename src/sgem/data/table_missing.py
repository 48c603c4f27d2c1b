"""Missing values in a table: what fit learns, and how every later table is filled alike.

Policy `missing="impute"` (the default): a numeric (or boolean) column's missing values
become its training median, and a column that had missing values at fit gains a 0/1
missing-indicator feature (`name:missing`), so the experts can tell a filled value from a
measured one; a categorical column's missing values become its most frequent training
category. The statistics are learned on the rows the caller names (the training and
validation rows, never the test rows) and stored in the column specs of the table
encoding (plain JSON), so a saved model imputes new rows exactly as training did. A target
cannot be imputed: rows without one are dropped, with a warning naming the count.

A mostly numeric column holding a few placeholder tokens ("?", "NA", "-") is read as
numbers with those tokens missing (`placeholder_tokens`, kept in the column spec), not as a
category per number (a "?" in 2 % of an age column made every age a category, and ages not
seen in training got one prediction).

Policy `missing="error"` refuses any missing value, at fit and in the saved model.
An encoding written before imputation existed has no `missing` key and refuses too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import SgemUserError
from .table_contract import first_rows, note, to_numbers

MISSING_POLICIES = ("impute", "error")
#: the policy of an encoding without the key (written before imputation existed)
LEGACY_POLICY = "error"
#: the suffix of a missing-indicator feature's name
INDICATOR_SUFFIX = ":missing"
#: a text column is numbers with placeholders where its non-numeric values are at most this
#: share of its values, at most `MAX_PLACEHOLDERS` distinct tokens of at most 4 characters
#: without a digit ("?", "NA", "-", "null"; "1,234" is a number written otherwise)
PLACEHOLDER_SHARE = 0.3
MAX_PLACEHOLDERS = 3
#: ... or, where every token is a word that means missing (`is_missing_token`: "n/a",
#: "unknown", "?"), any number of them in at most this share of its values (a numeric
#: column with 40 % "n/a" / "unknown" / "-" / "?" / "missing" was one-hot encoded over its
#: 140 numbers)
MISSING_WORDS_SHARE = 0.5


def placeholder_tokens(column: pd.Series, share: float = PLACEHOLDER_SHARE) -> list[str]:
    """The placeholder tokens of a mostly numeric text column (at most `share` of its
    values), or [] for a numeric column or real text."""
    if column.dtype != object and not pd.api.types.is_string_dtype(column):
        return []
    text = column.dropna().astype(str).str.strip()
    bad = text[pd.to_numeric(text, errors="coerce").isna()]
    tokens = sorted(set(bad))
    if not tokens:
        return []
    if all(is_missing_token(t) for t in tokens):
        return tokens if len(bad) <= max(share, MISSING_WORDS_SHARE) * len(text) else []
    short = all(len(t) <= 4 and not any(ch.isdigit() for ch in t) for t in tokens)
    if short and len(tokens) <= MAX_PLACEHOLDERS:
        return tokens if len(bad) <= share * len(text) else []
    return []


#: words that mean "missing" wherever they appear (beside tokens of punctuation alone)
MISSING_WORDS = ("na", "n/a", "nan", "null", "none", "nil", "missing", "unknown")


def is_missing_token(token: str) -> bool:
    """Whether a token means "missing" by itself ("?", "-", "NA", "null"; not "high"): a
    numeric column's new token at predict, where no share of rows can tell."""
    t = token.strip().lower()
    return t in MISSING_WORDS or not any(ch.isalnum() for ch in t)


def without_placeholders(column: pd.Series, tokens: list[str]) -> pd.Series:
    """`column` as numbers, its placeholder `tokens` missing (a new Series)."""
    text = column.astype(str).str.strip()
    return pd.to_numeric(column.where(~text.isin(tokens)), errors="coerce")


def check_policy(missing: Any) -> str:
    """`missing` itself, or a `SgemUserError` naming the two policies."""
    if missing not in MISSING_POLICIES:
        raise SgemUserError(
            f"missing={missing!r}: expected 'impute' (fill missing values: table features "
            "with what fit learned, series gaps by interpolation) or 'error' (refuse them); "
            "CLI: --missing impute|error"
        )
    return str(missing)


def policy_of(encoding: dict[str, Any]) -> str:
    return str(encoding.get("missing", LEGACY_POLICY))


def drop_missing_target(frame: pd.DataFrame, target: str, missing: str) -> pd.DataFrame:
    """`frame` without the rows whose target is missing (policy "impute", with a warning
    naming the count); policy "error" refuses them."""
    absent = frame[target].isna().to_numpy()
    n = int(absent.sum())
    if n == 0:
        return frame
    rows = first_rows(absent)
    if missing == "error":
        raise SgemUserError(
            f"target column {target!r} has {n} missing values (rows {rows}); drop those rows "
            "or fill in their targets, or let sgem drop them (missing='impute', CLI --missing "
            "impute)"
        )
    if n == len(frame):
        raise SgemUserError(
            f"target column {target!r} has no values (all {n} rows are missing); check the "
            "target column (--target / target=...)"
        )
    note(
        f"target column {target!r}: dropped {n} of {len(frame)} rows with a missing target "
        f"(rows {rows}); a target cannot be imputed"
    )
    return frame.loc[~absent].reset_index(drop=True)


def learn_imputation(frame: pd.DataFrame, columns: list[dict[str, Any]], rows: np.ndarray) -> None:
    """Add to each column spec what imputation needs, learned on `rows` of `frame`:
    `n_missing` (over all rows), `median` and `indicator` (numbers, booleans) or `fill`
    (the most frequent category)."""
    for spec in columns:
        name = spec["name"]
        column = frame[name]
        spec["n_missing"] = int(column.isna().sum())
        learn = column.iloc[rows]
        if spec["kind"] == "onehot":
            codes = pd.Index(spec["categories"]).get_indexer(learn.dropna().astype(str))
            counts = np.bincount(codes[codes >= 0], minlength=len(spec["categories"]))
            if counts.sum() == 0:
                raise _empty(name)
            spec["fill"] = spec["categories"][int(np.argmax(counts))]
            continue
        values = to_numbers(learn)
        finite = values[np.isfinite(values)] if values is not None else np.zeros(0)
        if len(finite) == 0:
            raise _empty(name)
        spec["median"] = float(np.median(finite))
        spec["indicator"] = spec["n_missing"] > 0


def _empty(name: str) -> SgemUserError:
    return SgemUserError(
        f"column {name!r} holds no values in the training rows (all missing), so nothing can "
        "be learned to impute it; leave it out of the features (--features / features=...)"
    )


def impute_numbers(values: np.ndarray, absent: np.ndarray, spec: dict[str, Any]) -> None:
    """Fill `values[absent]` with the column's training median (in place), with a note when
    the column had no missing values at fit."""
    values[absent] = spec["median"]
    if "date_of" in spec and not spec.get("n_missing"):  # one note for all of a date's parts
        if spec["part"] == "days":
            note(
                f"column {spec['date_of']!r} had no missing dates in training; "
                f"{int(absent.sum())} missing dates imputed with its parts' training medians"
            )
    elif not spec.get("n_missing"):
        note(
            f"column {spec['name']!r} had no missing values in training; {int(absent.sum())} "
            f"missing values imputed with its training median {spec['median']:g}"
        )


def fill_category(block: np.ndarray, absent: np.ndarray, spec: dict[str, Any]) -> None:
    """Set the one-hot of the most frequent training category on the `absent` rows."""
    block[absent, spec["categories"].index(spec["fill"])] = 1.0
    if not spec.get("n_missing"):
        note(
            f"column {spec['name']!r} had no missing values in training; {int(absent.sum())} "
            f"missing values imputed with its most frequent category {spec['fill']!r}"
        )


def refusal(bad: dict[str, np.ndarray], missing: str) -> SgemUserError:
    """The error for missing (policy "error") or infinite feature values in `bad`
    (column -> rows), with the fix that applies under `missing`."""
    rows = np.logical_or.reduce(list(bad.values()))
    described = ", ".join(f"{c!r} ({int(m.sum())} rows)" for c, m in bad.items())
    where = f"{int(rows.sum())} rows affected (rows {first_rows(rows)})"
    if missing == "impute":
        return SgemUserError(
            f"infinite feature values in columns {described}; {where}; replace them with "
            "finite numbers, or with NaN to have them imputed (e.g. df.replace([np.inf, "
            "-np.inf], np.nan))"
        )
    return SgemUserError(
        f"missing or infinite feature values in columns {described}; {where}; the table "
        "encoding refuses missing values (missing='error'): drop or fill in those rows (e.g. "
        "df.dropna()), or fit with missing='impute' (CLI --missing impute) to have missing "
        "values imputed"
    )


def imputation_summary(encoding: dict[str, Any] | None) -> str | None:
    """One model-card line saying how missing feature values are treated (None for a model
    without a table encoding, or one saved before imputation existed)."""
    if not encoding or "missing" not in encoding:
        return None
    if policy_of(encoding) != "impute":
        return "  missing feature values: refused (fitted with --missing error)"
    flagged = [c["name"] for c in encoding["columns"] if c.get("indicator")]
    return (
        "  missing feature values: imputed as in training (numbers: training median"
        + (f", with missing indicators for {flagged}" if flagged else "")
        + "; categories: most frequent training category)"
    )


__all__ = [
    "INDICATOR_SUFFIX",
    "LEGACY_POLICY",
    "MISSING_POLICIES",
    "check_policy",
    "drop_missing_target",
    "fill_category",
    "imputation_summary",
    "impute_numbers",
    "learn_imputation",
    "policy_of",
    "refusal",
]
