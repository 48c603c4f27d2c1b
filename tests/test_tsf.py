"""The Monash `.tsf` reader and writer: the real tourism file, round trips, malformed files."""

from __future__ import annotations

import re
import zipfile
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from sgem.data.timeseries import OFFLINE_TIMESERIES_DIR
from sgem.data.tsf import TSFData, TSFFormatError, read_tsf, write_tsf

TOURISM = OFFLINE_TIMESERIES_DIR / "tourism_monthly.tsf"

needs_tourism = pytest.mark.requires_shared_data("timeseries", files=(TOURISM.name,))


@needs_tourism
def test_tourism_is_parsed_exactly():
    data = read_tsf(TOURISM)
    assert len(data) == 366
    assert data.horizon == 24
    assert data.frequency == "monthly"
    assert data.relation == "Tourism"
    assert data.missing is False and data.equal_length is False
    assert data.attribute_types == {"series_name": "string", "start_timestamp": "date"}
    assert all(s.dtype == np.float64 and np.isfinite(s).all() for s in data.series)
    assert data.attributes[0] == {
        "series_name": "T1",
        "start_timestamp": datetime(1979, 1, 1),
    }
    assert data.names()[:3] == ["T1", "T2", "T3"]

    # the first data line, read independently of the parser
    lines = TOURISM.read_bytes().decode("latin-1").splitlines()
    first = lines[lines.index("@data") + 1]
    values = first.split(":")[-1].split(",")
    assert len(data.series[0]) == len(values)
    assert data.series[0][0] == float(values[0])
    assert data.series[0][-1] == float(values[-1])
    # lengths of every series, counted from the text
    counts = [line.count(",") + 1 for line in lines[lines.index("@data") + 1 :] if line]
    assert data.lengths.tolist() == counts


def synthetic() -> TSFData:
    return TSFData(
        series=[
            np.array([1.5, np.nan, -3.0, 1e-7, 123456789.125]),
            np.array([0.1, 0.2]),
            np.array([np.nan, 7.0, 1 / 3]),
        ],
        attributes=[
            {"series_name": "a_1", "start_timestamp": datetime(2020, 1, 2, 3, 4, 5), "k": 3},
            {"series_name": "b.2", "start_timestamp": datetime(1999, 12, 31), "k": 2.5},
            {"series_name": "c", "start_timestamp": datetime(2001, 6, 1, 23), "k": -1},
        ],
        attribute_types={"series_name": "string", "start_timestamp": "date", "k": "numeric"},
        relation="synthetic",
        frequency="hourly",
        horizon=12,
        missing=True,
        equal_length=False,
        comments=[" a comment", " another: with a colon"],
    )


def test_round_trip(tmp_path):
    data = synthetic()
    path = write_tsf(data, tmp_path / "s.tsf")
    back = read_tsf(path)
    assert back == data
    assert np.isnan(back.series[0][1]) and back.series[0][4] == 123456789.125
    assert back.series[2][2] == 1 / 3
    assert isinstance(back.attributes[0]["k"], int) and back.attributes[1]["k"] == 2.5
    assert not list(tmp_path.glob("*.part"))


def test_round_trip_without_optional_header_lines(tmp_path):
    data = TSFData([np.arange(4.0)], [{"name": "x"}], {"name": "string"})
    back = read_tsf(write_tsf(data, tmp_path / "min.tsf"))
    assert back == data and back.horizon is None and back.missing is None


def test_equality_notices_differences():
    a, b = synthetic(), synthetic()
    assert a == b
    b.series[1] = np.array([0.1, 0.25])
    assert a != b
    c = synthetic()
    c.attributes[2]["series_name"] = "d"
    assert a != c


@needs_tourism
def test_tourism_read_write_read_is_identical(tmp_path):
    data = read_tsf(TOURISM)
    again = read_tsf(write_tsf(data, tmp_path / "tourism.tsf"))
    assert again == data


def test_zip_holding_one_tsf(tmp_path):
    data = synthetic()
    write_tsf(data, tmp_path / "s.tsf")
    with zipfile.ZipFile(tmp_path / "s.zip", "w") as zf:
        zf.write(tmp_path / "s.tsf", "s.tsf")
    assert read_tsf(tmp_path / "s.zip") == data


def test_missing_file():
    with pytest.raises(FileNotFoundError, match=r"nope\.tsf"):
        read_tsf("/nonexistent/nope.tsf")


HEADER = """# test file
@relation t
@attribute series_name string
@attribute start_timestamp date
@frequency daily
@horizon 7
@missing {missing}
@equallength {equal}
@data
"""

GOOD = "s1:2020-01-01 00-00-00:1,2,3\n"

MALFORMED = [
    # (name, data lines after @data (line 10 is the first), bad line, message fragment)
    ("too_few_fields", GOOD + "s2:1,2,3\n", 11, r"expected 2 attribute field\(s\)"),
    ("too_many_fields", "s1:x:2020-01-01 00-00-00:1,2\n", 10, r"expected 2 attribute field"),
    ("non_numeric", GOOD + GOOD + "s3:2020-01-01 00-00-00:1,abc,3\n", 12, r"value 2 .*'abc'"),
    ("empty_value", "s1:2020-01-01 00-00-00:1,,3\n", 10, r"value 2 .*empty value"),
    ("no_values", "s1:2020-01-01 00-00-00:\n", 10, r"no values"),
    ("literal_nan", "s1:2020-01-01 00-00-00:1,nan,3\n", 10, r"value 2 .*'nan'.*'\?'"),
    ("bad_month", "s1:2020-13-01 00-00-00:1,2\n", 10, r"'2020-13-01 00-00-00'; expected YYYY"),
    ("bad_date_format", "s1:2020/01/01:1,2\n", 10, r"date .*'2020/01/01'.*YYYY-MM-DD HH-MM-SS"),
    ("header_after_data", GOOD + "@horizon 3\n", 11, r"header line .* after '@data'"),
]


def write(tmp_path: Path, text: str, name: str = "bad.tsf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def check(path: Path, line: int, fragment: str) -> None:
    with pytest.raises(TSFFormatError) as info:
        read_tsf(path)
    message = str(info.value)
    assert path.name in message
    assert f"line {line}:" in message, message
    assert re.search(fragment, message), message
    assert info.value.line == line
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("name", "body", "line", "fragment"), MALFORMED)
def test_malformed_data_lines(tmp_path, name, body, line, fragment):
    path = write(tmp_path, HEADER.format(missing="true", equal="false") + body, f"{name}.tsf")
    check(path, line, fragment)


def test_missing_value_while_missing_false(tmp_path):
    body = GOOD + "s2:2020-01-01 00-00-00:1,?,3\n"
    path = write(tmp_path, HEADER.format(missing="false", equal="false") + body)
    check(path, 11, r"missing value '\?' \(value 2\).*'@missing false'")


def test_missing_values_allowed(tmp_path):
    body = GOOD + "s2:2020-01-01 00-00-00:?,?,3\n"
    data = read_tsf(write(tmp_path, HEADER.format(missing="true", equal="true") + body))
    assert np.isnan(data.series[1][:2]).all() and data.series[1][2] == 3.0


def test_unequal_lengths_while_equallength_true(tmp_path):
    body = GOOD + GOOD + "s3:2020-01-01 00-00-00:1,2\n"
    path = write(tmp_path, HEADER.format(missing="false", equal="true") + body)
    check(path, 12, r"2 values .*'@equallength true'.*first series \(line 10\) has 3")


def test_no_data_section(tmp_path):
    path = write(tmp_path, HEADER.replace("@data\n", "").format(missing="true", equal="false"))
    check(path, 8, r"end of file before '@data'")


def test_no_series_after_data(tmp_path):
    path = write(tmp_path, HEADER.format(missing="true", equal="false") + "\n")
    check(path, 10, r"no series after '@data'")


@pytest.mark.parametrize(
    ("header_line", "fragment"),
    [
        ("@attribute x integer", r"unknown type 'integer'"),
        ("@attribute x", r"expected '@attribute NAME TYPE'"),
        ("@horizon soon", r"@horizon must be an integer"),
        ("@missing maybe", r"@missing must be 'true' or 'false'"),
        ("@colour blue", r"unknown header tag '@colour'"),
        ("@frequency", r"@frequency needs a value"),
        ("T1:1,2,3", r"expected a header line"),
    ],
)
def test_malformed_header(tmp_path, header_line, fragment):
    text = f"# c\n@relation t\n{header_line}\n@attribute name string\n@data\nx:1\n"
    check(write(tmp_path, text), 3, fragment)


def test_data_before_attributes(tmp_path):
    check(write(tmp_path, "@relation t\n@data\nx:1\n"), 2, r"'@data' before any '@attribute'")


def test_write_rejects_what_cannot_be_read_back(tmp_path):
    data = synthetic()
    data.attributes[0]["series_name"] = "has:colon"
    with pytest.raises(ValueError, match="cannot be written"):
        write_tsf(data, tmp_path / "x.tsf")
    assert not list(tmp_path.iterdir())  # no half-written file
    data = synthetic()
    data.missing = False
    with pytest.raises(ValueError, match="missing=False"):
        write_tsf(data, tmp_path / "x.tsf")
    data = synthetic()
    data.series[1] = np.array([1.0, np.inf])
    with pytest.raises(ValueError, match="inf"):
        write_tsf(data, tmp_path / "x.tsf")


def test_tsfdata_validation():
    with pytest.raises(ValueError, match="2 series but 1 attribute"):
        TSFData([np.ones(2), np.ones(2)], [{"n": "a"}], {"n": "string"})
    with pytest.raises(ValueError, match="expected \\['n'\\]"):
        TSFData([np.ones(2)], [{"m": "a"}], {"n": "string"})
    with pytest.raises(ValueError, match="type 'int'"):
        TSFData([np.ones(2)], [{"n": 1}], {"n": "int"})
