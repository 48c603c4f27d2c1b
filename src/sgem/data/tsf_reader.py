"""Reading `.tsf` files (or a `.zip` holding one) into `TSFData`: `read_tsf`.

The file is streamed line by line and each series converted with one numpy call; anything
malformed raises `TSFFormatError` naming the file, the 1-based line and what was expected.
Lines are decoded as UTF-8, then Windows-1252, then Latin-1; a UTF-8 byte-order mark is
skipped. See `sgem.data.tsf` for the format; `read_tsf` is also importable from there.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import numpy as np

from ..errors import SgemUserError
from .tsf_format import (
    ATTRIBUTE_TYPES,
    DATE_EXAMPLE,
    DATE_FORMAT,
    HEADER_TAGS,
    UTF8_BOM,
    AttributeType,
    AttributeValue,
    TSFData,
    TSFFormatError,
)

__all__ = ["read_tsf"]

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
