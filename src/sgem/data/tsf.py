"""Read and write the Monash Forecasting Archive's `.tsf` text format.

A `.tsf` file is a header followed by one line per series::

    # comment lines start with '#'
    @relation tourism
    @attribute series_name string
    @attribute start_timestamp date
    @frequency monthly
    @horizon 24
    @missing false
    @equallength false
    @data
    T1:1979-01-01 00-00-00:1149.87,1053.8002,1388.8798,...

Each data line holds the attribute values in declaration order, separated by `:`, then the
comma-separated values of the series. `?` marks a missing value (allowed only when the file
does not say `@missing false`). Attribute types are `string`, `numeric` and `date`; dates are
written `YYYY-MM-DD HH-MM-SS` (dashes in the time too, so that they never contain a `:`).

`read_tsf` streams the file line by line (the archive's files reach hundreds of megabytes)
and converts each series with one numpy call, not a Python loop per value. Anything
malformed raises `TSFFormatError` (a `SgemUserError`) that names the file, the 1-based line
and what was expected there. A `.zip` holding a single `.tsf` (the archive's download form)
is read directly.

The archive's own files are Windows-1252 where they are not ASCII (tourism's comment has an
en dash); lines are decoded as UTF-8 first, then Windows-1252, then Latin-1, so any byte
reads. A UTF-8 byte-order mark (as Windows editors save it) is skipped. `write_tsf` writes
UTF-8, without a byte-order mark.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import SgemUserError

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


# -- reading ----------------------------------------------------------------------------


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("cp1252")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _read_lines(path: Path) -> TSFData:
    """Parse a `.tsf` file, or the single `.tsf` member of a `.zip`, streaming its lines."""
    if path.suffix.lower() != ".zip":
        with open(path, "rb") as stream:
            return _parse(stream, str(path))
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise SgemUserError(
            f"{path} is not a valid zip archive ({exc}); download it again (sgem download "
            "monash DIR) or pass the unzipped .tsf file"
        ) from exc
    with archive:
        members = [n for n in archive.namelist() if n.lower().endswith(".tsf")]
        if len(members) != 1:
            raise SgemUserError(
                f"{path}: expected exactly one .tsf file inside the zip archive, found "
                f"{members or 'none'}; unzip it and pass the .tsf file instead"
            )
        with archive.open(members[0]) as stream:
            return _parse(stream, f"{path}:{members[0]}")


def _parse_bool(value: str, tag: str, err) -> bool:
    low = value.lower()
    if low not in ("true", "false"):
        raise err(f"{tag} must be 'true' or 'false', got {value!r}")
    return low == "true"


def _parse_attribute(text: str, name: str, kind: str, err) -> AttributeValue:
    if kind == "string":
        return text
    if kind == "numeric":
        try:
            return int(text)
        except ValueError:
            pass
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise err(f"attribute {name!r} is numeric but its value is {text!r}; expected a number")
        return value
    try:
        return datetime.strptime(text, DATE_FORMAT)
    except ValueError:
        raise err(
            f"attribute {name!r} is a date but its value is {text!r}; expected "
            f"YYYY-MM-DD HH-MM-SS (e.g. {DATE_EXAMPLE!r})"
        ) from None


def _parse_values(text: str, allow_missing: bool, err) -> np.ndarray:
    """The comma-separated series values, converted in one numpy call."""
    if not text.strip():
        raise err("no values after the attribute fields; expected comma-separated numbers")
    n_missing = text.count("?")
    if n_missing and not allow_missing:
        tokens = [t.strip() for t in text.split(",")]
        where = f" (value {tokens.index('?') + 1})" if "?" in tokens else ""
        raise err(
            f"missing value '?'{where} but the header says '@missing false'; set "
            "'@missing true' or fill the gap"
        )
    tokens = (text.replace("?", "nan") if n_missing else text).split(",")
    try:
        values = np.array(tokens, dtype=np.float64)
    except ValueError:
        values = None
    if values is not None:
        nan_count = int(np.isnan(values).sum())
        if nan_count == n_missing and not np.isinf(values).any():
            return values
    # slow path, only for a bad line: find the first offending value to name it
    for i, token in enumerate(text.split(","), start=1):
        stripped = token.strip()
        if stripped == "?":
            continue
        try:
            value = float(stripped)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            shown = token if len(token) <= 40 else token[:40] + "..."
            hint = (
                "an empty value (two commas in a row, or a trailing comma)"
                if not stripped
                else repr(shown)
            )
            raise err(
                f"value {i} of the series is {hint}; expected a finite number, or '?' for a "
                "missing value"
            )
    raise err("could not parse the series values")  # pragma: no cover - defensive


def _parse(lines: Iterable[bytes], name: str) -> TSFData:
    attribute_types: dict[str, AttributeType] = {}
    header: dict[str, object] = {}
    comments: list[str] = []
    series: list[np.ndarray] = []
    attributes: list[dict[str, AttributeValue]] = []
    in_data = False
    first_length: tuple[int, int] | None = None  # (length, line) of the first series
    lineno = 0

    for lineno, raw in enumerate(lines, start=1):
        if lineno == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]  # saved "with BOM" (Notepad, Excel): not part of the text
        line = _decode(raw).strip()

        def err(problem: str, _line: int = lineno) -> TSFFormatError:
            return TSFFormatError(name, _line, problem)

        if not line:
            continue
        if line.startswith("#"):
            comments.append(line[1:])
            continue
        if not in_data:
            if not line.startswith("@"):
                raise err(
                    f"expected a header line ('@relation', '@attribute', ..., '@data') or a "
                    f"'#' comment before '@data', got {line[:40]!r}"
                )
            tag, _, rest = line.replace("\t", " ").partition(" ")
            tag = tag.lower()
            rest = rest.strip()
            if tag not in HEADER_TAGS:
                raise err(f"unknown header tag {tag!r}; expected one of {', '.join(HEADER_TAGS)}")
            if tag == "@data":
                if rest:
                    raise err(f"'@data' must stand alone on its line, got {line[:40]!r}")
                if not attribute_types:
                    raise err(
                        "'@data' before any '@attribute' line; declare the attributes "
                        "(e.g. '@attribute series_name string') before the data"
                    )
                in_data = True
                continue
            if tag == "@attribute":
                parts = rest.split()
                if len(parts) != 2:
                    raise err(f"expected '@attribute NAME TYPE', got {line!r}")
                attr, kind = parts[0], parts[1].lower()
                if kind not in ATTRIBUTE_TYPES:
                    raise err(
                        f"attribute {attr!r} has unknown type {parts[1]!r}; expected one of "
                        f"{', '.join(ATTRIBUTE_TYPES)}"
                    )
                if attr in attribute_types:
                    raise err(f"attribute {attr!r} is declared twice")
                attribute_types[attr] = kind  # type: ignore[assignment]
                continue
            if not rest:
                raise err(f"{tag} needs a value, e.g. '{tag} {_EXAMPLES[tag]}'")
            if tag in header:
                raise err(f"{tag} is given twice")
            if tag == "@horizon":
                try:
                    header[tag] = int(rest)
                except ValueError:
                    raise err(f"@horizon must be an integer, got {rest!r}") from None
            elif tag in ("@missing", "@equallength"):
                header[tag] = _parse_bool(rest, tag, err)
            else:
                header[tag] = rest
            continue

        # a data line
        if line.startswith("@"):
            raise err(f"header line {line[:40]!r} after '@data'; move it before '@data'")
        fields = line.split(":")
        n_attr = len(attribute_types)
        if len(fields) != n_attr + 1:
            raise err(
                f"expected {n_attr} attribute field(s) ({', '.join(attribute_types)}) then the "
                f"values, separated by ':', i.e. {n_attr + 1} ':'-separated fields; got "
                f"{len(fields)}"
            )
        attrs = {
            attr: _parse_attribute(text, attr, kind, err)
            for (attr, kind), text in zip(attribute_types.items(), fields, strict=False)
        }
        values = _parse_values(fields[-1], header.get("@missing") is not False, err)
        if header.get("@equallength") is True:
            if first_length is None:
                first_length = (len(values), lineno)
            elif len(values) != first_length[0]:
                raise err(
                    f"series has {len(values)} values but the header says '@equallength true' "
                    f"and the first series (line {first_length[1]}) has {first_length[0]}; set "
                    "'@equallength false'"
                )
        series.append(values)
        attributes.append(attrs)

    if not in_data:
        raise TSFFormatError(
            name,
            lineno,
            "end of file before '@data'; expected a header ending with an '@data' line, "
            "followed by one line per series",
        )
    if not series:
        raise TSFFormatError(name, lineno, "no series after '@data'; expected at least one")
    return TSFData(
        series=series,
        attributes=attributes,
        attribute_types=attribute_types,
        relation=header.get("@relation"),  # type: ignore[arg-type]
        frequency=header.get("@frequency"),  # type: ignore[arg-type]
        horizon=header.get("@horizon"),  # type: ignore[arg-type]
        missing=header.get("@missing"),  # type: ignore[arg-type]
        equal_length=header.get("@equallength"),  # type: ignore[arg-type]
        comments=comments,
    )


_EXAMPLES = {
    "@relation": "tourism",
    "@frequency": "hourly",
    "@horizon": "24",
    "@missing": "true",
    "@equallength": "false",
}


def read_tsf(path: str | os.PathLike) -> TSFData:
    """Parse a `.tsf` file (or a `.zip` holding one) into a `TSFData`.

    Raises FileNotFoundError for a missing file and `TSFFormatError` (a ValueError naming the
    file and the 1-based line) for a malformed one.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such .tsf file: {path}")
    return _read_lines(path)


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
