"""What an exported graph is fed, built from what `SgemModel` takes, and the parity check.

    feeds = onnx_feeds(model, frame)          # {"x": ..., "categories": ...} / {"history": ...}
    out = OnnxRunner(path).run(feeds)         # {"probabilities": ..., "cluster": ...}
    parity(model, path, frame)                # max |onnxruntime - sgem| per output

A service builds the same arrays itself (the file's metadata names the columns); these
helpers serve the tests, the latency benchmark and users checking an export on their data.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import SgemUserError
from ..moe.model import SgemModel
from .onnx_export import MISSING_CATEGORY, _columns, kind_of, require_onnx


def _history_matrix(series: Any) -> np.ndarray:
    """Series (a 2-D array or a list of 1-D arrays) -> (n, L) float64, left-padded with NaN
    to the longest."""
    rows = list(series) if isinstance(series, list | tuple) else list(np.atleast_2d(series))
    rows = [np.asarray(r, dtype=np.float64).reshape(-1) for r in rows]
    length = max([1, *(len(r) for r in rows)])
    out = np.full((len(rows), length), np.nan)
    for i, r in enumerate(rows):
        if len(r):
            out[i, -len(r) :] = r
    return out


def onnx_feeds(model: SgemModel, x: Any) -> dict[str, np.ndarray]:
    """The graph's inputs for data `predict` takes: a table (DataFrame, dict, array in the
    fitted column order) or series (a list of 1-D histories, or a 2-D array)."""
    if kind_of(model) == "forecaster":
        return {"history": _history_matrix(x)}
    from ..data.files_tabular import numbers_of
    from ..data.table_contract import as_frame, is_named, select_columns, to_numbers
    from ..data.table_dates import source_columns, with_date_parts

    numeric, categorical = _columns(model)
    if not is_named(x):
        if categorical:
            raise SgemUserError(
                "this model has categorical columns: give a DataFrame or dict with named columns"
            )
        return {"x": np.atleast_2d(np.asarray(x, dtype=np.float64))}
    columns = model.spec.info.get("encoding", {}).get("columns", [])
    names = source_columns(columns) or numeric + [c["name"] for c in categorical]
    frame = with_date_parts(select_columns(as_frame(x, names, named=True), names), columns)
    specs = {c["name"]: c for c in columns}
    cols = []
    for name in numeric:  # read as predict reads them ("?" missing), else refused by name
        values = numbers_of(frame[name], specs[name]) if name in specs else to_numbers(frame[name])
        if values is None:
            raise SgemUserError(f"the numeric column {name!r} must hold numbers")
        cols.append(values)
    feeds = {"x": np.column_stack(cols).astype(np.float64) if cols else np.zeros((len(frame), 0))}
    if categorical:
        text = np.empty((len(frame), len(categorical)), dtype=object)
        for j, spec in enumerate(categorical):
            column = frame[spec["name"]]
            text[:, j] = np.where(column.isna(), MISSING_CATEGORY, column.astype(str))
        feeds["categories"] = text
    return feeds


class OnnxRunner:
    """An onnxruntime session of an exported file (one thread by default: one request at a
    time is what a latency-bound service runs)."""

    def __init__(self, path: str | os.PathLike, threads: int = 1) -> None:
        _, ort = require_onnx()
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.outputs = [o.name for o in self.session.get_outputs()]

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.outputs, self.session.run(None, feeds), strict=True))


def sgem_outputs(model: SgemModel, x: Any, quantiles: Sequence[float]) -> dict[str, np.ndarray]:
    """What the graph's outputs stand for, computed by `SgemModel` (the parity reference)."""
    qs = sorted(float(q) for q in quantiles)
    route = model.route(x)
    out = {"cluster": route.cluster, "expert": route.expert}
    kind = kind_of(model)
    if kind == "classifier":
        probs = model.predict_proba(x)
        return out | {"probabilities": probs, "label_index": probs.argmax(1)}
    if kind == "regressor":
        q = model.predict_quantiles(x, qs)
        return out | {"quantiles": np.stack([q[v] for v in qs], 1), "point": model.predict(x)}
    fc = model.forecast(x, qs)
    return out | {"quantiles": np.stack([fc.quantiles[v] for v in qs], 1), "point": fc.point}


def parity(
    model: SgemModel, path: str | os.PathLike, x: Any, quantiles: Sequence[float] | None = None
) -> dict[str, float]:
    """max |onnxruntime - sgem| per output on `x` (the exported quantiles by default)."""
    import json

    from .onnx_export import read_metadata

    qs = quantiles or json.loads(read_metadata(path)["sgem.quantiles"])
    got = OnnxRunner(path).run(onnx_feeds(model, x))
    want = sgem_outputs(model, x, qs)
    return {
        k: float(np.max(np.abs(np.asarray(got[k], np.float64) - np.asarray(v, np.float64))))
        for k, v in want.items()
    }


__all__ = ["OnnxRunner", "onnx_feeds", "parity", "sgem_outputs"]
