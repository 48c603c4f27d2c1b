"""Writing `TSFData` as a `.tsf` file: `write_tsf` (UTF-8, no byte-order mark, values
that read back to the same float64). See `sgem.data.tsf` for the format; `write_tsf` is
also importable from there.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np

from ..errors import SgemUserError
from .tsf_format import DATE_FORMAT, AttributeValue, TSFData

__all__ = ["write_tsf"]

# -- writing ----------------------------------------------------------------------------


def _format_values(values: np.ndarray) -> str:
    """Shortest text that reads back to the same float64 (`repr`), integers without '.0'."""
    out = []
    for v in values.tolist():
        if v != v:
            out.append("?")
        elif v.is_integer() and abs(v) < 1e15:
            out.append(str(int(v)))
        else:
            out.append(repr(v))
    return ",".join(out)


def _format_attribute(value: AttributeValue, name: str, kind: str, index: int) -> str:
    if kind == "date":
        if not isinstance(value, datetime):
            raise SgemUserError(f"series {index}: date attribute {name!r} must be a datetime")
        return value.strftime(DATE_FORMAT)
    if kind == "numeric":
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise SgemUserError(f"series {index}: numeric attribute {name!r} must be a number")
        if not math.isfinite(float(value)):
            raise SgemUserError(f"series {index}: numeric attribute {name!r} is not finite")
        return str(int(value)) if isinstance(value, int | np.integer) else repr(float(value))
    text = str(value)
    bad = [c for c in (":", "\n", "\r") if c in text]
    if bad or text.strip() != text or text.startswith(("#", "@")):
        raise SgemUserError(
            f"series {index}: string attribute {name!r} = {text!r} cannot be written to a .tsf "
            "line (no ':' or line breaks, no surrounding spaces, no leading '#' or '@')"
        )
    return text


def _lines(data: TSFData) -> Iterator[str]:
    for comment in data.comments:
        if "\n" in comment or "\r" in comment:
            raise SgemUserError("a comment cannot contain a line break; split it into several")
        yield f"#{comment}"
    if data.relation is not None:
        yield f"@relation {data.relation}"
    for name, kind in data.attribute_types.items():
        if not name or any(c.isspace() for c in name) or ":" in name:
            raise SgemUserError(f"attribute name {name!r} must be non-empty, without spaces or ':'")
        yield f"@attribute {name} {kind}"
    if not data.attribute_types:
        raise SgemUserError("a .tsf file needs at least one attribute (e.g. series_name string)")
    if data.frequency is not None:
        yield f"@frequency {data.frequency}"
    if data.horizon is not None:
        yield f"@horizon {int(data.horizon)}"
    if data.missing is not None:
        yield f"@missing {str(bool(data.missing)).lower()}"
    if data.equal_length is not None:
        yield f"@equallength {str(bool(data.equal_length)).lower()}"
    yield "@data"
    lengths = {len(s) for s in data.series}
    if data.equal_length and len(lengths) > 1:
        raise SgemUserError(
            f"equal_length=True but the series have lengths {sorted(lengths)[:5]}...; set "
            "equal_length=False"
        )
    for i, (values, attrs) in enumerate(zip(data.series, data.attributes, strict=True)):
        values = np.asarray(values, dtype=np.float64)  # `series` may be reassigned after init
        if values.ndim != 1:
            raise SgemUserError(
                f"series {i} must be 1-D (one value per time step), got shape {values.shape}; "
                "write a (T, C) multichannel series as C series (e.g. list(values.T))"
            )
        if len(values) == 0:
            raise SgemUserError(f"series {i} is empty; a .tsf series needs at least one value")
        if np.isinf(values).any():
            raise SgemUserError(f"series {i} contains inf; .tsf values must be finite or missing")
        if data.missing is False and np.isnan(values).any():
            raise SgemUserError(f"series {i} has missing values (NaN) but missing=False")
        fields = [
            _format_attribute(attrs[name], name, kind, i)
            for name, kind in data.attribute_types.items()
        ]
        fields.append(_format_values(values))
        yield ":".join(fields)


def write_tsf(data: TSFData, path: str | os.PathLike) -> Path:
    """Write `data` as a `.tsf` file (UTF-8, '\\n' line ends). Returns the path.

    Values are written with the shortest text that reads back to the same float64, so
    `read_tsf(write_tsf(d, p)) == d`. The file is written to a temporary name first and
    renamed, so a failure (e.g. an attribute with a ':') never leaves a half-written file.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for line in _lines(data):
                f.write(line)
                f.write("\n")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
