"""`sgem predict`: read a file for a saved model, predict, write one row per sample or step.

Inputs by model kind: a classifier or regressor on tables reads CSV / Parquet (the model's
feature columns, encoded as in training) or NPZ (`x`); a forecaster reads a long-format
CSV / Parquet (`unique_id`, `ds`, `y`) or a Monash `.tsf` file; an image model reads a
folder of images (resized to the model's size, with a note) or NPZ (`x`, uint8).
Every output row names the expert that made it and the cluster that sent it there.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import SgemUserError
from ..moe.model import SgemModel
from ..moe.preprocess import ForecastPreprocessor, ImagePreprocessor
from ..moe.series_io import forecast_long, forecastable, read_series

log = logging.getLogger(__name__)

TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".parquet", ".pq")


def _exists(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.exists():
        raise SgemUserError(f"input {path} does not exist")
    return path


def _npz_x(path: Path) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as data:
            if "x" not in data:
                raise SgemUserError(f"{path} holds {sorted(data)}, but predict reads array 'x'")
            return data["x"]
    except (OSError, ValueError) as exc:
        raise SgemUserError(f"{path} is not a readable .npz file: {exc}") from exc


def _table_frame(path: Path) -> pd.DataFrame:
    """The file as a DataFrame, as it is: the model matches its columns by name, encodes
    categories and imputes (or refuses) missing values as at fit (`SgemModel._prepare`,
    `sgem.data.table_contract`), so the CLI and the Python API read a table alike."""
    from ..data.files import read_frame

    return read_frame(path)


def predict_table(
    model: SgemModel, x: Any, ids: list | None = None, quantiles=(0.1, 0.5, 0.9)
) -> pd.DataFrame:
    """One row per sample: prediction, class probabilities or the `quantiles` (regression),
    expert, cluster."""
    import warnings

    from ..data.table_contract import TableWarning

    routing = model.route(x)  # notes about the table (ignored columns, ...) come from here
    n = len(routing.cluster)
    frame = pd.DataFrame({"row": ids if ids is not None else np.arange(n)})
    with warnings.catch_warnings():  # ... and not again for each output read from `x`
        warnings.simplefilter("ignore", TableWarning)
        if model.is_classifier:  # (the label is the likeliest class: one pass, not two)
            proba = model.predict_proba(x)
            frame["prediction"] = np.asarray(model.classes)[proba.argmax(1)]
            for j, name in enumerate(model.classes):
                frame[f"p_{name}"] = proba[:, j]
        else:
            frame["prediction"] = model.predict(x)
            for q, values in model.predict_quantiles(x, quantiles).items():
                frame[f"q{q:g}"] = values
    frame["expert"] = routing.expert
    frame["cluster"] = routing.cluster
    return frame


def predict_file(
    model: SgemModel, path: str | os.PathLike, quantiles=(0.1, 0.5, 0.9)
) -> pd.DataFrame:
    """Read `path` as the model's kind of input and return the predictions table."""
    if isinstance(model.preprocessor, ForecastPreprocessor):
        return forecast_long(model, _exists(path), quantiles)
    x, ids = read_input(model, path)
    return predict_table(model, x, ids, quantiles)


def read_input(model: SgemModel, path: str | os.PathLike) -> tuple[Any, list | None]:
    """`path` read as the model's kind of input, as `sgem predict` reads it (`sgem explain`
    shares it): (input, an id per sample). Series: the forecastable ones and their names;
    images: the pixels and file names (or positions); tables: the rows, ids None."""
    path = _exists(path)
    pre = model.preprocessor
    suffix = path.suffix.lower()
    if isinstance(pre, ForecastPreprocessor):
        series = read_series(model, path).series
        names = forecastable(pre, series)
        return [series[n] for n in names], names
    if isinstance(pre, ImagePreprocessor):
        if suffix == ".npz":
            x = _npz_x(path)
            ids = list(range(len(x)))
        else:
            from ..data.files import read_images_for_predict

            x, ids = read_images_for_predict(path, image_size=(pre.height, pre.width))
            log.info("read %d images from %s at %dx%d", len(x), path, pre.height, pre.width)
            if pre.channels == 1:
                x = x.mean(axis=-1, keepdims=True).round().astype(np.uint8)
        return x, ids
    if suffix == ".npz":
        return _npz_x(path), None
    if suffix not in TABLE_SUFFIXES:
        raise SgemUserError(
            f"a tabular model reads CSV, Parquet or NPZ (array 'x'), not {path.name}"
        )
    return _table_frame(path), None


def write_table(frame: pd.DataFrame, out: str | os.PathLike) -> Path:
    """CSV, or Parquet when `out` ends in .parquet; written whole or not at all."""
    out = Path(out)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True)
    tmp = out.with_name(f".{out.name}.tmp")
    if out.suffix.lower() in (".parquet", ".pq"):
        frame.to_parquet(tmp, index=False)
    else:
        frame.to_csv(tmp, index=False)
    tmp.replace(out)
    return out


__all__ = ["forecastable", "predict_file", "predict_table", "read_input", "write_table"]
