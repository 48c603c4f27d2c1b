"""Formatted numbers ("$1,234.50", "12.5%", "(300)") in a table's feature column are read as
the numbers they show, at fit and at predict (files and DataFrames alike)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sgem.data.files import encode_table, read_table
from sgem.data.number_formats import NUMBER_FORMAT, formatted_column, read_formatted
from sgem.errors import SgemUserError

money = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False).map(lambda v: round(v, 2))


@given(money)
def test_currency_with_thousands_commas_reads_back(value: float) -> None:
    sign = "-" if value < 0 else ""
    shown = pd.Series([f"{sign}${abs(value):,.2f}", f"({abs(value):,.2f})", f"{value:.2f}%"])
    got = read_formatted(shown).to_numpy()
    assert got[0] == pytest.approx(value) and got[1] == pytest.approx(-abs(value))
    assert got[2] == pytest.approx(value / 100)


@given(money)
def test_a_decimal_comma_with_thousands_dots_reads_back(value: float) -> None:
    us = f"{abs(value):,.2f}"
    eu = us.replace(",", " ").replace(".", ",").replace(" ", ".")
    sign = "-" if value < 0 else ""
    shown = pd.Series([f"{sign}€{eu}", f"({eu})", f"{sign}{eu.replace('.', ' ')} €"])
    got = read_formatted(shown).to_numpy()
    assert got[0] == pytest.approx(value) and got[1] == pytest.approx(-abs(value))
    assert got[2] == pytest.approx(value)


def test_a_column_of_either_style_reads_as_that_style() -> None:
    np.testing.assert_allclose(read_formatted(pd.Series(["1,250", "$3"])), [1250.0, 3.0])
    np.testing.assert_allclose(read_formatted(pd.Series(["1,25", "1,250"])), [1.25, 1.25])
    # as the spec keeps it, whatever the new rows alone would suggest
    kept = read_formatted(pd.Series(["1,250"]), "formatted-decimal-comma")
    np.testing.assert_allclose(kept, [1.25])


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["$1,200", "€ 80", "NA", None], True),  # a missing token and an empty cell
        (["12.5%", "3%", "-"], True),
        (["1.5", "2", "?"], False),  # plain numbers: the placeholder rules read them
        (["high", "$5"], False),  # text
        (["1,2345", "$1"], True),  # a comma that does not group thousands: a decimal comma
        (["€1.234,50", "12,5 %", "1\u00a0234,5", "(3,0)"], True),  # the decimal comma's style
        (["1,234.5", "1.234,5"], False),  # two styles in one column
        (["1,2,3", "$1"], False),
        (["(5", "$1"], False),  # unbalanced parentheses
    ],
)
def test_which_columns_are_formatted_numbers(values, expected) -> None:
    assert formatted_column(pd.Series(values, dtype=object)) is expected


@pytest.fixture
def priced(tmp_path):
    rng = np.random.default_rng(0)
    price = rng.uniform(100, 5000, 300)
    frame = pd.DataFrame(
        {
            "price": [f"${p:,.2f}" for p in price],
            "share": [f"{s:.1f}%" for s in rng.uniform(0, 100, 300)],
            "label": np.where(price > 2500, "dear", "cheap"),
        }
    )
    frame.loc[3, "price"] = "n/a"
    frame.to_csv(tmp_path / "t.csv", index=False)
    return tmp_path / "t.csv", price


def test_a_fit_reads_formatted_columns_as_numbers_and_predict_too(priced) -> None:
    path, price = priced
    data = read_table(path, target="label")
    assert data.feature_names == ["price", "price:missing", "share"]  # (row 3's "n/a")
    specs = {c["name"]: c for c in data.encoding["columns"]}
    assert specs["price"][NUMBER_FORMAT] == "formatted" and specs["price"]["kind"] == "numeric"
    assert data.x[0, 0] == pytest.approx(round(price[0], 2)) and data.x[3, 1] == 1.0
    assert data.x[0, 2] == pytest.approx(float(pd.read_csv(path)["share"][0][:-1]) / 100)
    raw = pd.read_csv(path).drop(columns="label").head(5)
    from_text = encode_table(raw, data.encoding)
    as_numbers = raw.assign(price=read_formatted(raw["price"]), share=read_formatted(raw["share"]))
    np.testing.assert_allclose(from_text, encode_table(as_numbers, data.encoding))
    np.testing.assert_allclose(from_text, encode_table(path, data.encoding)[:5])


def test_a_semicolon_file_of_euro_prices_reads_them_and_predict_keeps_the_style(tmp_path):
    rng = np.random.default_rng(2)
    price = rng.uniform(100, 5000, 200)
    shown = [f"€{p:,.2f}".replace(",", " ").replace(".", ",").replace(" ", ".") for p in price]
    frame = pd.DataFrame({"price": shown, "qty": rng.integers(1, 9, 200), "dear": price > 2500})
    frame.to_csv(tmp_path / "eu.csv", sep=";", index=False)  # "€3.221,11";5;True
    data = read_table(tmp_path / "eu.csv", target="dear")
    specs = {c["name"]: c for c in data.encoding["columns"]}
    assert specs["price"][NUMBER_FORMAT] == "formatted-decimal-comma"
    np.testing.assert_allclose(data.x[:, 0], np.round(price, 2))
    # new rows that alone would read as thousands ("€1,250": 1.25 in the training's style)
    got = encode_table(
        pd.DataFrame({"price": ["€1,250", "€2.000,5"], "qty": [1, 2]}), data.encoding
    )
    np.testing.assert_allclose(got[:, 0], [1.25, 2000.5])


def test_predict_names_a_value_that_is_not_a_number(priced) -> None:
    path, _ = priced
    data = read_table(path, target="label")
    new = pd.DataFrame({"price": ["$1,000", "about 5"], "share": ["1%", "2%"]})
    with pytest.raises(SgemUserError, match=r"'price' held formatted numbers.*about 5"):
        encode_table(new, data.encoding)


def test_a_formatted_target_is_a_regression_on_its_numbers(tmp_path) -> None:
    rng = np.random.default_rng(1)
    area = rng.uniform(50, 300, 200)
    frame = pd.DataFrame({"area": area, "price": [f"${1000 * a:,.0f}" for a in area]})
    frame.to_csv(tmp_path / "houses.csv", index=False)
    data = read_table(tmp_path / "houses.csv", target="price")
    assert data.task_kind == "regression" and data.y[0] == pytest.approx(round(1000 * area[0]))


def test_evaluate_reads_formatted_targets_and_names_text() -> None:
    from sgem.moe.scoring import labelled_rows

    x, cluster = np.zeros((3, 1)), np.zeros(3, dtype=int)
    _, _, y = labelled_rows(x, cluster, np.array(["$1,000", "$2", "NA"], dtype=object))
    np.testing.assert_array_equal(y, [1000.0, 2.0])
    with pytest.raises(SgemUserError, match="hold text"):
        labelled_rows(x, cluster, np.array(["$1", "lots", "$3"], dtype=object))


def test_a_series_file_of_formatted_values_reads_them(tmp_path) -> None:
    from sgem.data.files import read_long_series

    frame = pd.DataFrame(
        {
            "unique_id": ["a"] * 4,
            "ds": pd.date_range("2020-01-01", periods=4, freq="MS").astype(str),
            "y": ["$1,200.50", "$1,300", "", "$900"],
        }
    )
    frame.to_csv(tmp_path / "s.csv", index=False)
    values = read_long_series(tmp_path / "s.csv").series["a"]
    np.testing.assert_array_equal(values, [1200.5, 1300.0, np.nan, 900.0])
