"""Data given to `sgem.fit` in memory, written once into the run directory.

A run is identified by its config, and its config names a file (so `sgem resume`, config.yaml
and the store fingerprint work as for any file). A DataFrame therefore becomes
`<out>/input/data.csv` and a tuple `(X, y)` of arrays `<out>/input/data.npz` (features
x0..x{d-1}, target "target"); a tuple whose X is a DataFrame keeps its column names.
Each file is written atomically (temp file + rename) and only when it is new: the same
data again finds the same file (and a finished run is reused), other data in a directory
that already holds a run is refused rather than silently fitted under the old config.

Round trip through CSV: numbers, booleans and text stay what they are; a categorical dtype
is written as its values (numbers read back as numbers, text as categories); datetimes as
ISO text, read back as categories of a table, or as the time column of series.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import write_atomic
from ..errors import SgemUserError
from .rundir import CONFIG, INPUT

#: the target column's name for `(X, y)`
TARGET = "target"

ACCEPTED = (
    "a file path (CSV/TSV/Parquet/NPZ/.tsf, or a folder of images), a pandas DataFrame "
    "(a table, or long-format series with unique_id/ds/y columns), or a tuple (X, y) of a "
    "2-D feature array (or DataFrame) and a 1-D target"
)


def in_memory(data: Any) -> bool:
    """Whether `data` is a DataFrame or an (X, y) tuple rather than a path."""
    import pandas as pd

    return isinstance(data, pd.DataFrame | tuple)


def check_data(data: Any) -> None:
    """Refuse what `sgem.fit` cannot take, saying what it can."""
    if not in_memory(data) and not isinstance(data, str | os.PathLike):
        raise SgemUserError(f"cannot fit a {type(data).__name__}; give {ACCEPTED}")


def _target_name(columns: list[str]) -> str:
    name = TARGET
    while name in columns:
        name += "_"
    return name


def _labels(y: Any, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or len(y) != n:
        raise SgemUserError(
            f"y has shape {y.shape} but X has {n} rows; give y as a 1-D array of {n} targets"
        )
    if y.dtype == object:  # text labels (a pandas Series of strings): stored without pickle
        y = y.astype(str) if all(isinstance(v, str) for v in y) else y.astype(np.float64)
    return y


def _encode(data: Any, target: str | None) -> tuple[bytes, str, str | None]:
    """(file bytes, file name, target) of in-memory `data`."""
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        if len(data) == 0:
            raise SgemUserError("the DataFrame has no rows; give a table with data")
        frame = data.rename(columns=str)
        return frame.to_csv(index=False).encode(), "data.csv", target
    if len(data) != 2:
        raise SgemUserError(f"a tuple of {len(data)} items; give (X, y): {ACCEPTED}")
    if target is not None:
        raise SgemUserError("with (X, y) the target is y; leave out target=")
    x, y = data
    if isinstance(x, pd.DataFrame):
        frame = x.rename(columns=str).reset_index(drop=True)
        name = _target_name(list(frame.columns))
        frame[name] = _labels(y, len(frame))
        return frame.to_csv(index=False).encode(), "data.csv", name
    x = np.asarray(x)
    if x.ndim != 2 or len(x) == 0 or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        raise SgemUserError(
            f"X is a {x.dtype} array of shape {x.shape}; give a non-empty 2-D numeric array "
            "(n, d), or a DataFrame for named or categorical columns"
        )
    return _npz({"x": x, "y": _labels(y, len(x))}), "data.npz", TARGET


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz file's bytes (np.load reads it, without pickle); unlike np.savez, with fixed
    entry times, so the same arrays give the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for key, array in arrays.items():
            entry = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(entry, "w") as fh:
                np.lib.format.write_array(fh, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def materialise(
    data: Any, out: str | os.PathLike, target: str | None
) -> tuple[Path, str | None, Path | None]:
    """Write in-memory `data` into `out/input/`: (its path, the target column, the path
    again when it was written now, None when the same data was already there)."""
    check_data(data)
    content, name, target = _encode(data, target)
    folder = Path(out) / INPUT
    path = folder / name
    if path.exists() and path.read_bytes() == content:
        return path, target, None
    if (Path(out) / CONFIG).exists():
        raise SgemUserError(
            f"{out} already holds a run fitted on other data; give each fit its own out= "
            "(or delete the directory to start over)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, content)
    return path, target, path


def forget(written: Path | None, out: str | os.PathLike) -> None:
    """Remove the file `materialise` just wrote (and its folders when left empty) unless a
    run has claimed `out` since (it then needs the file to resume)."""
    claimed = (Path(out) / CONFIG).exists() or any(Path(out).glob(f"*/{CONFIG}"))  # experts-K
    if written is None or claimed:
        return
    written.unlink(missing_ok=True)
    for folder in (written.parent, written.parent.parent):
        try:
            folder.rmdir()
        except OSError:
            break


__all__ = ["ACCEPTED", "TARGET", "check_data", "forget", "in_memory", "materialise"]
