"""A spreadsheet's export in a comma-decimal locale (";"-separated, "1,5", "1.234,5") is read
as the numbers it holds, by a fit and a predict alike; other CSVs are read as before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgem.data.csv_dialect import with_decimal_commas
from sgem.data.files import encode_table, read_frame, read_table
from sgem.data.files_series import read_long_series


def _frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {"a": rng.normal(size=n).round(4), "b": rng.normal(size=n).round(4) * 1000,
         "colour": rng.choice(["red", "blue"], n), "y": rng.integers(0, 2, n)}
    )  # fmt: skip


def test_decimal_commas_are_numbers_at_fit_and_at_predict(tmp_path) -> None:
    frame = _frame()
    path = tmp_path / "export.csv"
    frame.to_csv(path, sep=";", decimal=",", index=False)
    data = read_table(path, target="y")
    assert data.feature_names == ["a", "b", "colour=blue", "colour=red"]
    np.testing.assert_allclose(read_frame(path)[["a", "b"]], frame[["a", "b"]])
    plain = tmp_path / "plain.csv"
    frame.to_csv(plain, index=False)
    np.testing.assert_allclose(read_table(plain, target="y").x, data.x)  # the same features
    new = tmp_path / "new.csv"
    frame.drop(columns="y").head(5).to_csv(new, sep=";", decimal=",", index=False)
    np.testing.assert_allclose(encode_table(str(new), data.encoding), data.x[:5])


def test_thousands_points_and_missing_tokens(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("amount;name;y\n1.234,5;Hans;1\n2,25;Eva;0\n?;Jo;1\n1.000.000;Li;0\n7;Al;1\n")
    frame = read_frame(path)
    assert frame["amount"].tolist()[:2] == [1234.5, 2.25] and frame["amount"][3] == 1e6
    data = read_table(path, target="y")
    assert "amount" in data.feature_names and "amount:missing" in data.feature_names
    assert not any(name.startswith("amount=") for name in data.feature_names)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a;b\n1.5;x\n2.25;y\n", [1.5, 2.25]),  # ";" with decimal points: as pandas reads it
        ('a,b\n"1,5",x\n"2,25",y\n', ["1,5", "2,25"]),  # "," separated: quoted text stays
        ("a;b\n1,2,3;x\n4,5,6;y\n", ["1,2,3", "4,5,6"]),  # not numbers: text
    ],
)
def test_other_files_read_as_before(tmp_path, text, expected) -> None:
    path = tmp_path / "f.csv"
    path.write_text(text)
    assert read_frame(path)["a"].tolist() == expected


def test_a_long_format_series_file_with_decimal_commas(tmp_path) -> None:
    path = tmp_path / "s.csv"
    days = pd.date_range("2024-01-01", periods=30, freq="D").strftime("%Y-%m-%d")
    values = np.linspace(1.5, 30.25, 30)
    frame = pd.DataFrame({"unique_id": "001", "ds": days, "y": values})
    frame.to_csv(path, sep=";", decimal=",", index=False)
    data = read_long_series(path)
    assert data.names == ["001"]
    np.testing.assert_allclose(data.series["001"], values)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e7, 1e7, allow_nan=False), min_size=1, max_size=20))
def test_written_with_a_decimal_comma_read_back(values) -> None:
    written = [f"{v:.3f}".replace(".", ",") for v in values]
    if not any("," in w for w in written):
        return
    frame = with_decimal_commas(pd.DataFrame({"v": written}, dtype=object), skip=set())
    np.testing.assert_allclose(frame["v"].to_numpy(float), np.round(values, 3), atol=1e-9)
