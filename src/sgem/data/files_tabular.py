"""Read a user's table (CSV, Parquet or NPZ) into float features, a target and an encoding.

`read_table` turns a file into a `TabularData`: `x` float64 (n, d), `y` (int64 class codes
or float64 values: a level far above the spread, a timestamp or 1.2e8 + noise, keeps its
digits until it is standardised), the names of the d features, the task kind and the
original class labels.
Its `encoding` is a JSON-serialisable dict that says exactly how the raw columns became `x`
(numeric columns as they are, categorical columns one-hot over their training categories), so
that `encode_table(new_table, encoding)` builds the same features for a table at predict time.

Every problem the user can fix raises `sgem.errors.SgemUserError` naming the problem and the
fix. Row numbers in messages are 0-based data rows (the header is not counted).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..errors import SgemUserError
from .csv_dialect import read_csv
from .npz import read_xy_npz
from .number_formats import (
    NUMBER_FORMAT,
    read_formatted,
    read_number_formats,
    unreadable,
)
from .table_columns import MAX_CATEGORIES, column_specs, read_placeholders
from .table_contract import as_frame, is_named, note, select_columns, to_numbers
from .table_contract import is_numeric as _is_numeric
from .table_dates import source_columns, with_date_parts
from .table_missing import (
    INDICATOR_SUFFIX,
    check_policy,
    drop_missing_target,
    fill_category,
    impute_numbers,
    is_missing_token,
    learn_imputation,
    placeholder_tokens,
    policy_of,
    refusal,
    without_placeholders,
)
from .table_reuse import parse_once
from .table_target import MAX_AUTO_CLASSES, TaskKind, encode_target

#: the version tag written into every encoding
ENCODING_FORMAT = "sgem.table/1"

TABLE_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".parquet", ".pq", ".npz")


@dataclass(eq=False)
class TabularData:
    """A table read by `read_table`.

    Attributes:
        x: float64 (n, d) features.
        y: int64 class codes into `classes` (classification) or float64 values (regression).
        feature_names: the d feature names (`col` for a numeric column, `col=category` for
            each one-hot column of a categorical one).
        task_kind: "classification" or "regression".
        classes: the original target labels (str, int, float or bool), `classes[y[i]]` being
            row i's label; None for regression.
        encoding: JSON-serialisable description of how the raw columns became `x`; give it to
            `encode_table` to encode a new table the same way.
        target: the target column's name.
    """

    x: np.ndarray
    y: np.ndarray
    feature_names: list[str]
    task_kind: TaskKind
    classes: list[Any] | None
    encoding: dict[str, Any]
    target: str

    def __len__(self) -> int:
        return len(self.x)


# -- reading files ----------------------------------------------------------------------------


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for suffix in sorted(TABLE_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return suffix
    return path.suffix.lower()


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise SgemUserError(
            "reading Parquet files needs pyarrow, which is not installed: run "
            "`pip install sgem[parquet]` (or `pip install pyarrow`), or save the table as CSV"
        ) from exc


def _existing_file(path: str | os.PathLike) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise SgemUserError(f"{path}: no such file; check the path")
    if not path.is_file():
        raise SgemUserError(f"{path} is a directory; give the path of a data file")
    return path


def read_frame(
    path: str | os.PathLike, header_only: bool = False, text_columns: Sequence[str] = ()
) -> pd.DataFrame:
    """A CSV/TSV (optionally .gz) or Parquet file as a DataFrame, refusing empty files;
    `header_only`: its columns alone (no rows read), to decide what the file holds;
    `text_columns`: read as written (series ids "001" and "1" stay two series, and a
    forecast's ids join back to the file's). A CSV whose header is one column holding ";"
    is read as ";"-separated, and its decimal commas as numbers (`sgem.data.csv_dialect`)."""
    path = _existing_file(path)
    suffix = _suffix(path)
    try:
        if suffix in (".parquet", ".pq"):
            _require_pyarrow()
            if header_only:
                import pyarrow.parquet as pq

                return pd.DataFrame(columns=[str(c) for c in pq.read_schema(path).names])
            frame = pd.read_parquet(path)
        elif suffix in (".csv", ".csv.gz", ".tsv", ".tsv.gz"):
            sep = "\t" if suffix.startswith(".tsv") else ","
            frame = read_csv(path, sep, 0 if header_only else None, text_columns)
        else:
            raise SgemUserError(
                f"{path}: unsupported file type {suffix or '(no suffix)'!r}; give a .csv, .tsv, "
                ".parquet or .npz file"
            )
    except pd.errors.EmptyDataError as exc:
        raise SgemUserError(f"{path} is empty; give a file with a header row and data") from exc
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise SgemUserError(
            f"{path}: could not be read as {suffix} ({exc}); check the file"
        ) from exc
    if len(frame) == 0 and not header_only:
        raise SgemUserError(f"{path} has no data rows (columns: {list(frame.columns)})")
    frame.columns = [str(c) for c in frame.columns]
    return frame


# -- the features -------------------------------------------------------------------------------


def _check_missing_columns(frame: pd.DataFrame, wanted: list[str], what: str) -> None:
    absent = [c for c in wanted if c not in frame.columns]
    if absent:
        raise SgemUserError(
            f"{what} {absent} not in the table; its columns are {list(frame.columns)}"
        )


def _onehot(column: pd.Series, spec: dict[str, Any], absent: np.ndarray) -> np.ndarray:
    """One-hot over the training categories; an unseen category gets all-zero features
    (no training category is more right than another), with a note naming it."""
    name = spec["name"]
    values = column.astype(str).to_numpy()
    codes = pd.Index(spec["categories"]).get_indexer(values).astype(np.int64)
    if (codes < 0).any() and pd.api.types.is_float_dtype(column):  # codes '1', 'X' at fit,
        # read as 1.0 here
        whole = column.map(lambda v: str(int(v)) if float(v).is_integer() else str(v))
        codes = np.where(codes < 0, pd.Index(spec["categories"]).get_indexer(whole), codes)
    codes[absent] = -1
    unseen = (codes < 0) & ~absent
    if unseen.any() and not spec.get("other"):  # (a column with rare categories: said at fit)
        examples = ", ".join(repr(e) for e in sorted(set(values[unseen]))[:5])
        note(
            f"column {name!r}: {int(unseen.sum())} rows hold categories not seen in training "
            f"({examples}); their one-hot features are all zero"
        )
    block = np.zeros((len(column), len(spec["categories"])), dtype=np.float32)
    rows = np.flatnonzero(codes >= 0)
    block[rows, codes[rows]] = 1.0
    return block


def numbers_of(column: pd.Series, spec: dict[str, Any]) -> np.ndarray:
    """A numeric feature column as float64, NaN where missing: its placeholder tokens, and
    ones that mean missing met at predict, read as missing as `encode_table` reads them
    (`sgem.export.feeds` builds an exported graph's inputs with it)."""
    if spec.get(NUMBER_FORMAT) and not _is_numeric(column):  # "$1,234" as at fit
        numbers = read_formatted(column, spec[NUMBER_FORMAT])
        if bad := unreadable(column, numbers):
            raise SgemUserError(
                f"column {spec['name']!r} held formatted numbers in training but holds "
                f"{bad[:3]} here; fix the column's values"
            )
        column = numbers
    if spec.get("placeholders"):
        column = without_placeholders(column, spec["placeholders"])
    return _numbers(column, spec)


def _first_text(column: pd.Series) -> Any:
    """The first value of `column` that is not a number (for messages)."""
    present = column.dropna()
    text = present[pd.to_numeric(present.astype(str), errors="coerce").isna()]
    return text.iloc[0] if len(text) else present.iloc[0]


def _numbers(column: pd.Series, spec: dict[str, Any]) -> np.ndarray:
    values = to_numbers(column)
    tokens = placeholder_tokens(column, share=1.0) if values is None else []
    if tokens and all(is_missing_token(t) for t in tokens):  # "?" at predict in a column
        # that had none at fit: missing, as at fit (a word such as "high" is refused below)
        note(f"column {spec['name']!r}: its values {tokens} read as missing")
        values = to_numbers(without_placeholders(column, tokens))
    if values is None:
        raise SgemUserError(
            f"column {spec['name']!r} was numeric in training but holds text here (e.g. "
            f"{_first_text(column)!r}); fix the column's values"
        )
    return np.array(values, dtype=np.float64)  # a copy: imputation writes into it


def _encode_columns(frame: pd.DataFrame, columns: list[dict[str, Any]], missing: str) -> np.ndarray:
    """float64 features of `frame`; missing values imputed with the specs' statistics
    (policy "impute") or refused (policy "error"); infinite values always refused."""
    blocks: list[np.ndarray] = []
    bad: dict[str, np.ndarray] = {}
    for spec in columns:
        column = frame[spec["name"]]
        if spec["kind"] == "onehot":
            absent = column.isna().to_numpy()
            if absent.any() and missing != "impute":
                bad[spec["name"]] = absent
            block = _onehot(column, spec, absent)
            if absent.any() and missing == "impute":
                fill_category(block, absent, spec)
            blocks.append(block)
            continue
        values = numbers_of(column, spec)  # placeholders, at fit or met here: missing too
        absent = np.isnan(values)
        if absent.any() and missing != "impute":
            bad[spec["name"]] = absent
        infinite = np.isinf(values)
        if infinite.any():
            bad[spec["name"]] = infinite | bad.get(spec["name"], False)
        if absent.any() and missing == "impute":
            impute_numbers(values, absent, spec)
        blocks.append(values[:, None])
        if spec.get("indicator"):
            blocks.append(absent.astype(np.float64)[:, None])
    if bad:
        raise refusal(bad, missing)
    if not blocks:
        return np.zeros((len(frame), 0), dtype=np.float64)
    return np.concatenate(blocks, axis=1, dtype=np.float64)


def _feature_names(columns: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for spec in columns:
        if spec["kind"] == "onehot":
            names.extend(f"{spec['name']}={c}" for c in spec["categories"])
        else:
            names.append(spec["name"])
            if spec.get("indicator"):
                names.append(spec["name"] + INDICATOR_SUFFIX)
    return names


# -- public -----------------------------------------------------------------------------------


def _read_npz(path: Path, target: str | None) -> tuple[pd.DataFrame, str]:
    arrays = read_xy_npz(path, "(n, d) features", "(n,) targets", "np.savez(path, x=x, y=y)")
    x, y = arrays["x"], arrays["y"]
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or y.ndim != 1 or len(x) != len(y):
        raise SgemUserError(
            f"{path}: x has shape {x.shape} and y {y.shape}; expected x (n, d) and y (n,)"
        )
    if len(x) == 0:
        raise SgemUserError(f"{path} holds no rows")
    if not np.issubdtype(x.dtype, np.number) and x.dtype != bool:
        raise SgemUserError(f"{path}: x has dtype {x.dtype}; expected numbers")
    frame = pd.DataFrame(x, columns=[f"x{i}" for i in range(x.shape[1])])
    name = target or "y"
    frame[name] = y
    return frame, name


def read_table(
    path: str | os.PathLike,
    target: str | None = None,
    features: list[str] | None = None,
    categorical: Literal["onehot", "refuse"] = "onehot",
    kind: TaskKind | None = None,
    missing: str = "impute",
    learn_rows: Callable[[int], np.ndarray] | None = None,
    keep_parsed: bool = False,
) -> TabularData:
    """Read a CSV/TSV (optionally gzipped), Parquet or NPZ file into a `TabularData`.

    Args:
        path: the file; its suffix picks the reader. An `.npz` holds arrays `x` (n, d) and
            `y` (n,) (loaded without pickle); its features are named x0, x1, ...
        target: the target column (required except for `.npz`).
        features: the feature columns, in order (default: every column but the target).
        categorical: "onehot" encodes every non-numeric feature column one-hot over its
            sorted categories; "refuse" raises instead, naming the columns. Boolean columns
            are read as 0/1.
        kind: "classification" or "regression"; None decides from the target: a non-numeric
            target is classes; a numeric one is classes when all its values are integers with
            at most min(20, max(2, 5% of the rows)) distinct values, else regression.
        missing: "impute" fills missing feature values (median + missing indicator for
            numbers, most frequent category for categories; `sgem.data.table_missing`) and
            drops rows without a target, with a warning; "error" refuses both.
        learn_rows: given the number of rows kept, the rows whose values the imputation
            learns from (default all); `table_task` passes the non-test rows.
        keep_parsed: keep the parsed file for the next read of it (`sgem.data.table_reuse`).

    Raises `SgemUserError` for a missing file or column, an empty file, a target with a
    single class (or missing values, under missing="error"), infinite feature values (or
    missing ones, under missing="error"), refused categorical columns and a Parquet file
    without pyarrow installed.
    """
    missing = check_policy(missing)
    path = _existing_file(path)
    if _suffix(path) == ".npz":
        frame, target = _read_npz(path, target)
        source_format = "npz"
    else:
        if target is None:
            raise SgemUserError(f"{path}: name the target column (target=...)")
        frame = parse_once(path, read_frame, keep_parsed)
        source_format = _suffix(path).lstrip(".")
    _check_missing_columns(frame, [target], "target column")
    if features is None:
        features = [c for c in frame.columns if c != target]
    else:
        features = [str(f) for f in features]
        _check_missing_columns(frame, features, "feature columns")
        if target in features:
            raise SgemUserError(f"column {target!r} is the target; leave it out of features")
    if not features:
        raise SgemUserError(f"{path}: no feature columns besides the target {target!r}")
    frame, formatted = read_number_formats(frame, features)  # "$1,234", "12%"
    frame, placeholders = read_placeholders(frame, features)
    columns = column_specs(frame, features, placeholders, formatted)
    left_out = [c for c in features if c not in source_columns(columns)]
    frame = with_date_parts(frame, columns)
    categorical_columns = [c["name"] for c in columns if c["kind"] == "onehot"]
    if categorical_columns and categorical == "refuse":
        raise SgemUserError(
            f"non-numeric feature columns {categorical_columns}: convert them to numbers, leave "
            "them out of the features, or allow one-hot encoding (categorical='onehot')"
        )
    if categorical not in ("onehot", "refuse"):
        raise SgemUserError(f"categorical={categorical!r}: expected 'onehot' or 'refuse'")
    frame = drop_missing_target(frame, target, missing)
    y, task_kind, classes = encode_target(frame[target], target, kind)
    if missing == "impute":
        rows = np.arange(len(frame)) if learn_rows is None else np.asarray(learn_rows(len(frame)))
        learn_imputation(frame, columns, rows)
    x = _encode_columns(frame, columns, missing)
    names = _feature_names(columns)
    encoding = {
        "format": ENCODING_FORMAT,
        "source_format": source_format,
        "target": target,
        "task_kind": task_kind,
        "classes": classes,
        "missing": missing,
        "columns": columns,
        "feature_names": names,
        "left_out": left_out,
    }
    return TabularData(x, y, names, task_kind, classes, encoding, target)


def encode_table(table: Any, encoding: dict[str, Any]) -> np.ndarray:
    """Features of a new table built exactly as `read_table` built them: float64 (n, d).

    `table`: a DataFrame, a dict (column -> values), a list of row dicts, a file
    `read_table` reads, or (for an encoding without categorical columns) an array in the
    training column order (`sgem.data.table_contract`). Columns are matched by name: the
    target and any extra column are ignored (extra ones with a note), a missing feature
    column is refused naming it. A category not seen in training gets all-zero one-hot
    features, with a note. Missing values are imputed as at fit or refused, as the encoding
    says (`sgem.data.table_missing`).
    """
    if encoding.get("format") != ENCODING_FORMAT:
        raise SgemUserError(
            f"not an sgem table encoding (format {encoding.get('format')!r}, expected "
            f"{ENCODING_FORMAT!r})"
        )
    columns = encoding["columns"]
    names = source_columns(columns)  # the user's columns: a date once for all its parts
    missing = policy_of(encoding)
    if isinstance(table, str | os.PathLike):
        path = _existing_file(table)
        table = (
            np.load(path, allow_pickle=False)["x"] if _suffix(path) == ".npz" else read_frame(path)
        )
    categorical = [c["name"] for c in columns if c["kind"] == "onehot"]
    if categorical and not is_named(table) and table is not None:
        raise SgemUserError(
            f"this model has categorical columns {categorical}; give a DataFrame, a dict "
            "(column -> values) or a CSV/Parquet file with named columns, not an array"
        )
    frame = as_frame(table, names, named=encoding.get("source_format") != "npz")
    fix = "; a column of missing values is imputed" if missing == "impute" else ""
    frame = select_columns(
        frame, names, target=encoding.get("target"), fix=fix, known=encoding.get("left_out", [])
    )
    if len(frame) == 0:
        return np.zeros((0, len(encoding["feature_names"])), dtype=np.float64)
    return _encode_columns(with_date_parts(frame, columns), columns, missing)


__all__ = [
    "MAX_AUTO_CLASSES",
    "MAX_CATEGORIES",
    "TabularData",
    "encode_table",
    "numbers_of",
    "read_frame",
    "read_table",
]
