"""The `.tsf` format's vocabulary: `TSFData` (a file's content), `TSFFormatError` and the
header tags, attribute types and date format that `sgem.data.tsf_reader` and
`sgem.data.tsf_writer` share. See `sgem.data.tsf` for the format itself; everything here is
also importable from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import numpy as np

from ..errors import SgemUserError

__all__ = ["TSFData", "TSFFormatError"]

AttributeType = Literal["string", "numeric", "date"]
AttributeValue = str | int | float | datetime

ATTRIBUTE_TYPES: tuple[str, ...] = ("string", "numeric", "date")
DATE_FORMAT = "%Y-%m-%d %H-%M-%S"
UTF8_BOM = b"\xef\xbb\xbf"
DATE_EXAMPLE = "1979-01-01 00-00-00"
HEADER_TAGS: tuple[str, ...] = (
    "@relation",
    "@attribute",
    "@frequency",
    "@horizon",
    "@missing",
    "@equallength",
    "@data",
)


class TSFFormatError(SgemUserError):
    """A malformed `.tsf` file (a `SgemUserError`, so a `ValueError`). `path` and `line`
    (1-based) say where."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        super().__init__(f"{path}: line {line}: {problem}")


@dataclass(eq=False)
class TSFData:
    """The content of a `.tsf` file.

    Attributes:
        series: one float64 array per series; NaN marks a missing value (`?` in the file).
        attributes: per series, a dict attribute name -> value (str for `string`, int or
            float for `numeric`, `datetime` for `date`), in declaration order.
        attribute_types: attribute name -> "string" | "numeric" | "date", in the order the
            file declares them (which is the order of the fields on each data line).
        relation: the `@relation` name, or None when the header has none.
        frequency: `@frequency` ("hourly", "daily", "monthly", "4_seconds", ...), or None.
        horizon: `@horizon`, the archive's forecast horizon for this dataset, or None.
        missing: `@missing`; None when the header does not say. `False` forbids NaN.
        equal_length: `@equallength`; None when the header does not say. `True` requires
            all series to have the same length.
        comments: the `#` comment lines, without the leading `#`; written back before the
            header.

    Equality (`==`) compares everything, series with NaN == NaN.
    """

    series: list[np.ndarray]
    attributes: list[dict[str, AttributeValue]]
    attribute_types: dict[str, AttributeType]
    relation: str | None = None
    frequency: str | None = None
    horizon: int | None = None
    missing: bool | None = None
    equal_length: bool | None = None
    comments: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        series = []
        for i, s in enumerate(self.series):
            try:
                values = np.asarray(s, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise SgemUserError(
                    f"series {i} could not be read as numbers ({exc}); give one 1-D array of "
                    "floats per series"
                ) from None
            if values.ndim != 1:
                raise SgemUserError(
                    f"series {i} must be 1-D (one value per time step), got shape "
                    f"{values.shape}. A .tsf series has one channel: store a (T, C) "
                    "multichannel series as C series (e.g. list(values.T)), a single "
                    "series as a 1-D array"
                )
            series.append(values)
        self.series = series
        self.attribute_types = dict(self.attribute_types)
        for name, kind in self.attribute_types.items():
            if kind not in ATTRIBUTE_TYPES:
                raise SgemUserError(
                    f"attribute {name!r} has type {kind!r}; expected one of {ATTRIBUTE_TYPES}"
                )
        if len(self.attributes) != len(self.series):
            raise SgemUserError(
                f"{len(self.series)} series but {len(self.attributes)} attribute dicts: give "
                "one dict of attribute values per series"
            )
        names = list(self.attribute_types)
        for i, attrs in enumerate(self.attributes):
            if list(attrs) != names:
                raise SgemUserError(
                    f"series {i} has attributes {list(attrs)}, expected {names} (the keys of "
                    "attribute_types, in that order)"
                )

    def __len__(self) -> int:
        return len(self.series)

    __hash__ = None  # mutable, compared by value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TSFData):
            return NotImplemented
        return (
            self.relation == other.relation
            and self.frequency == other.frequency
            and self.horizon == other.horizon
            and self.missing == other.missing
            and self.equal_length == other.equal_length
            and self.comments == other.comments
            and list(self.attribute_types.items()) == list(other.attribute_types.items())
            and self.attributes == other.attributes
            and len(self.series) == len(other.series)
            and all(
                np.array_equal(a, b, equal_nan=True)
                for a, b in zip(self.series, other.series, strict=True)
            )
        )

    @property
    def attribute_names(self) -> list[str]:
        return list(self.attribute_types)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(s) for s in self.series], dtype=np.int64)

    def names(self) -> list[str]:
        """`series_name` of each series when the file has one, else "0", "1", ..."""
        if "series_name" in self.attribute_types:
            return [str(a["series_name"]) for a in self.attributes]
        return [str(i) for i in range(len(self.series))]
