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

The pieces live in `sgem.data.tsf_format` (`TSFData`, `TSFFormatError`, the format's
constants), `sgem.data.tsf_reader` (`read_tsf`) and `sgem.data.tsf_writer` (`write_tsf`);
all are re-exported here.
"""

from __future__ import annotations

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
from .tsf_reader import read_tsf
from .tsf_writer import write_tsf

__all__ = [
    "ATTRIBUTE_TYPES",
    "DATE_EXAMPLE",
    "DATE_FORMAT",
    "HEADER_TAGS",
    "UTF8_BOM",
    "AttributeType",
    "AttributeValue",
    "TSFData",
    "TSFFormatError",
    "read_tsf",
    "write_tsf",
]
