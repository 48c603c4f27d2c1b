"""A table's dates become numbers (days since 1970, year, month, day, weekday, hour), read
the same way at fit and at predict; identifiers (text, or whole numbers
numbering the rows) and free text are left out with a note, and a column of many repeated
categories keeps its commonest ones."""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_fit import TINY

import sgem
from sgem.data.files import encode_table, read_table
from sgem.data.table_contract import TableWarning
from sgem.data.table_dates import date_format, parse_dates
from sgem.errors import SgemUserError


def _frame(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    days = pd.date_range("2020-01-01", periods=n, freq="D")
    return pd.DataFrame(
        {
            "id": [f"user-{i}" for i in range(n)],
            "when": days.strftime("%Y-%m-%d"),
            "x": rng.normal(size=n),
            "y": (days.dayofweek >= 5).astype(int),  # weekends: only the date can tell
        }
    )


def read_table_frame(frame: pd.DataFrame):
    """`read_table` on `frame` written as a CSV."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.csv"
        frame.to_csv(path, index=False)
        return read_table(path, target="y")


def test_dates_become_their_parts_and_identifiers_are_left_out(tmp_path) -> None:
    _frame().to_csv(tmp_path / "t.csv", index=False)
    with pytest.warns(TableWarning) as caught:
        data = read_table(tmp_path / "t.csv", target="y")
    said = " | ".join(str(w.message) for w in caught)
    assert "'when': dates, used as days, year, month, day, weekday" in said
    assert "left out of the features: 'id' has 300 distinct text values in 300 rows" in said
    assert data.feature_names == [
        "when.days", "when.year", "when.month", "when.day", "when.weekday", "x",
    ]  # fmt: skip
    assert data.x[0, :5].tolist() == [18262.0, 2020.0, 1.0, 1.0, 2.0]  # a Wednesday
    # a date never seen in training still has its numbers; a DataFrame's own timestamps
    # and text read alike
    new = pd.DataFrame({"when": ["2031-07-05", None], "x": [0.5, 0.1]})
    with pytest.warns(TableWarning, match="no missing dates in training; 1 missing dates"):
        x = encode_table(new, data.encoding)
    assert (
        x[0, 1:5].tolist() == [2031.0, 7.0, 5.0, 5.0]
        and x[1, 1] == data.encoding["columns"][1]["median"]
    )
    with pytest.warns(TableWarning, match=r"'when': 1 values are not dates \(e.g. 'soon'\)"):
        unread = encode_table(pd.DataFrame({"when": ["soon"], "x": [0.0]}), data.encoding)
    assert unread[0, 1] == data.encoding["columns"][1]["median"]
    stamped = new.assign(when=pd.to_datetime(new["when"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        np.testing.assert_array_equal(encode_table(stamped, data.encoding), x)
    json.dumps(data.encoding)  # the encoding stays plain JSON


def test_numeric_row_identifiers_are_left_out_and_codes_named_id_are_kept() -> None:
    """pandas' written index ("Unnamed: 0") and a PassengerId-like column number the rows:
    left out with a note. A column named like an id whose numbers repeat (a store code),
    or a column of distinct numbers not named like one (a measurement), stays a feature."""
    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame(
        {
            "Unnamed: 0": np.arange(n),
            "PassengerId": rng.permutation(n) + 1000,
            "store_id": rng.integers(1, 9, n),
            "width": rng.permutation(n),
            "y": rng.normal(size=n),
        }
    )
    with pytest.warns(TableWarning) as caught:
        data = read_table_frame(frame)
    said = " | ".join(str(w.message) for w in caught)
    assert "'Unnamed: 0' holds 200 distinct whole numbers (a row identifier)" in said
    assert "'PassengerId' holds 200 distinct whole numbers" in said
    assert data.feature_names == ["store_id", "width"]
    assert data.encoding["left_out"] == ["Unnamed: 0", "PassengerId"]
    # a gap (a missing id) or a fraction is not a row number: the column stays
    holed = frame.assign(PassengerId=frame["PassengerId"].astype(float))
    holed.loc[3, "PassengerId"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        assert "PassengerId" in read_table_frame(holed).feature_names


def test_day_first_dates_are_read_day_first_at_fit_and_at_predict() -> None:
    text = pd.Series(["31/01/2020", "01/02/2020", "15/03/2020"])
    assert date_format(text) == "day first"
    with pytest.warns(TableWarning, match="no day above 12 tells"):
        assert date_format(pd.Series(["01/02/2020", "03/04/2020"])) == "month first"
    assert date_format(pd.Series(["red", "2020-01-01"])) is None
    assert date_format(pd.Series(["12-3-45", "11-4-46"])) is None  # codes, not dates
    assert date_format(pd.Series(["1.2.3", "1.10.2"])) is None  # versions
    assert date_format(pd.Series(["2020-01-05 13:30", "2021-02-01"])) == "ISO8601"
    named = pd.Series(["Jan 31, 2020", "31-Jan-2020", "Feb 2 2021"])
    assert date_format(named) == "mixed"
    assert parse_dates(named, "mixed").dt.month.tolist() == [1, 1, 2]
    assert date_format(pd.Series(["Mr Smith 12, 2020", "red"])) is None
    frame = pd.DataFrame({"when": text, "x": [1.0, 2.0, 3.0], "y": [0.0, 1.0, 2.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        data = read_table_frame(frame)
        # the same day written day first with another separator, or as ISO: 2 January 2021
        new = pd.DataFrame({"when": ["02/01/2021", "02.01.2021", "2021-01-02"], "x": 0.0})
        x = encode_table(new, data.encoding)
    assert (x[:, 2:4] == [1.0, 2.0]).all()  # month 1, day 2 in each


def test_one_order_for_the_whole_column_whatever_else_it_holds() -> None:
    """Day-first dates with 2 % 'unknown' (one among the first values too) are all read day
    first: pandas' own reading took 03/08/2020 as 8 March beside 21/03/2020 as 21 March."""
    rng = np.random.default_rng(0)
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 700, 500), unit="D")
    text = pd.Series(days.strftime("%d/%m/%Y"), dtype=object)
    text[rng.random(500) < 0.02] = "unknown"
    text[3] = "not recorded"
    assert date_format(text) == "day first"
    frame = pd.DataFrame({"when": text, "y": rng.normal(size=500)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        data = read_table_frame(frame)
    month = data.x[:, data.feature_names.index("when.month")]
    read = ~text.isin(["unknown", "not recorded"]).to_numpy()
    assert (month[read] == days.month[read]).all() and read.mean() > 0.95
    # a model fitted on timestamps reads day-first text as the text shows
    stamped = pd.DataFrame({"when": days[:50], "y": rng.normal(size=50)})
    from sgem.data.table_columns import column_specs
    from sgem.data.table_dates import with_date_parts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        specs = column_specs(stamped, ["when"], {})
        parts = with_date_parts(pd.DataFrame({"when": text[:50]}), specs)
    assert (parts["when.month"].to_numpy()[read[:50]] == days.month[:50][read[:50]]).all()


def test_many_repeated_categories_keep_the_commonest_and_identifiers_alone_are_refused() -> None:
    rng = np.random.default_rng(0)
    codes = np.r_[np.repeat(np.arange(150), 6), np.arange(150, 450)]  # 450 categories
    frame = pd.DataFrame({"shop": [f"s{c}" for c in codes], "y": rng.normal(size=len(codes))})
    with pytest.warns(TableWarning, match=r"'shop': 450 categories; the 200 most frequent"):
        data = read_table_frame(frame)
    spec = data.encoding["columns"][0]
    assert len(spec["categories"]) == 200 and spec["other"]
    assert {f"s{c}" for c in range(150)} <= set(spec["categories"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", TableWarning)  # a rare category: no note at predict
        assert encode_table(pd.DataFrame({"shop": ["s449"]}), data.encoding).sum() == 0
    only_ids = pd.DataFrame({"id": [f"u{i}" for i in range(300)], "y": np.arange(300.0)})
    with pytest.raises(SgemUserError, match="no column can be a feature: 'id' has 300"):
        read_table_frame(only_ids)


def test_text_unique_to_its_rows_is_left_out_however_few_rows() -> None:
    """A column of 120 distinct names in 120 rows (fewer than the 200 categories one-hot
    keeps) would give each row a feature of its own; 30 cities repeated over them stay."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "name": [f"customer {i}" for i in range(120)],
            "city": [f"c{i % 30}" for i in range(120)],
            "y": rng.normal(size=120),
        }
    )
    with pytest.warns(TableWarning, match="'name' has 120 distinct text values in 120 rows"):
        data = read_table_frame(frame)
    assert [c["name"] for c in data.encoding["columns"]] == ["city"]


def test_a_model_fitted_on_dates_predicts_from_dates(tmp_path) -> None:
    """Through fit, save, load and predict (the saved encoding passes the load checks)."""
    frame = _frame(400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        sgem.fit(frame, target="y", out=tmp_path / "run", progress=False, config=TINY)
        model = sgem.load(tmp_path / "run")
        new = _frame(20).drop(columns="y")
        assert model.predict(new).shape == (20,)
        proba = model.predict_proba(new.drop(columns="id"))
    assert proba.shape == (20, 2) and np.isfinite(proba).all()


@pytest.fixture(scope="module")
def date_model(tmp_path_factory):
    """A model fitted on dates and numbers, saved without a combination (ONNX exports it)."""
    out = tmp_path_factory.mktemp("dates") / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        sgem.fit(_frame(400), target="y", out=out, progress=False, config=TINY, combine=False)
    return sgem.load(out)


def test_a_date_model_exports_with_its_parts_as_numeric_inputs(date_model, tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    from sgem.export import export_onnx
    from sgem.export.feeds import parity

    model = date_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        export_onnx(model, tmp_path / "m.onnx")
        diffs = parity(model, tmp_path / "m.onnx", _frame(30).drop(columns=["y", "id"]))
    assert max(diffs.values()) <= 1e-4, diffs


def test_zero_one_columns_are_not_standardised(tmp_path) -> None:
    """A category on a few rows in 600 stays 0 / 1 in the model's inputs (standardised it
    read about 24, and a network with a square op predicted 434 for a target of 101)."""
    from sgem.data.user_tasks import table_task

    rng = np.random.default_rng(0)
    shop = np.where(rng.random(600) < 0.005, "rare", rng.choice(["a", "b"], 600))
    frame = pd.DataFrame({"shop": shop, "x": rng.normal(5, 2, 600), "y": rng.normal(size=600)})
    frame.to_csv(tmp_path / "t.csv", index=False)
    task = table_task({"path": str(tmp_path / "t.csv"), "target": "y", "n_clusters": 4}, 0)
    pre = task.meta["standardisation"]
    names = task.meta["feature_names"]
    onehot = [i for i, n in enumerate(names) if n.startswith("shop=")]
    assert (pre["mean"][onehot] == 0).all() and (pre["std"][onehot] == 1).all()
    assert pre["std"][names.index("x")] == pytest.approx(2, rel=0.1)
    assert set(np.unique(task.train.x[:, onehot])) <= {0.0, 1.0}


def test_placeholders_codes_and_left_out_columns_at_predict() -> None:
    """'?' in 20 % of a numeric column is still numbers; '?' at predict in a column that had
    none at fit is missing, not refused; codes '1', '2', 'X' read as floats at predict
    match their categories; columns fit left out are not 'ignored' again at predict."""
    rng = np.random.default_rng(0)
    n = 400
    age = rng.integers(18, 70, n).astype(object)
    age[rng.random(n) < 0.2] = "?"
    frame = pd.DataFrame(
        {
            "age": age,
            "income": rng.normal(50, 10, n),
            "zone": rng.choice(["1", "2", "X"], n),
            "id": [f"u{i}" for i in range(n)],
            "y": rng.normal(size=n),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        data = read_table_frame(frame)
    assert data.feature_names[:2] == ["age", "age:missing"] and data.encoding["left_out"] == ["id"]
    new = pd.DataFrame({"age": [30.0, 40.0], "income": ["?", "55"], "zone": [1.0, 2.0]})
    new["id"] = ["a", "b"]
    with pytest.warns(TableWarning) as caught:
        x = encode_table(new, data.encoding)
    said = " | ".join(str(w.message) for w in caught)
    assert "'income': its values ['?'] read as missing" in said and "ignored" not in said
    assert "not seen in training" not in said
    income = data.feature_names.index("income")
    spec = next(c for c in data.encoding["columns"] if c["name"] == "income")
    assert x[0, income] == spec["median"]  # imputed, not NaN
    zone = [data.feature_names.index(f"zone={z}") for z in ("1", "2")]
    assert x[0, zone].tolist() == [1.0, 0.0] and x[1, zone].tolist() == [0.0, 1.0]


def test_predicted_labels_keep_the_targets_dtype(tmp_path) -> None:
    """Integer and boolean targets come back as numbers and booleans, not objects
    (scikit-learn's metrics refused a mix of binary and unknown targets)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    frame = pd.DataFrame({"x": x, "y": (x > 0).astype(int)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sgem.fit(frame, target="y", out=tmp_path / "run", progress=False, config=TINY)
        labels = model.predict(frame.drop(columns="y"))
    assert labels.dtype.kind == "i"


def test_onnx_feeds_read_a_placeholder_as_predict_does(date_model) -> None:
    """'?' in a numeric column is a missing value in the graph's inputs too (NaN, which the
    graph imputes), and a column of words is refused by its name."""
    from sgem.export.feeds import onnx_feeds

    model = date_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        new = _frame(3).drop(columns=["y", "id"]).astype({"x": object})
        new.loc[1, "x"] = "?"
        feeds = onnx_feeds(model, new)
    x = feeds["x"][:, -1]  # (the date's parts first, then x)
    assert np.isnan(x[1]) and np.isfinite(x[[0, 2]]).all()
    new.loc[1, "x"] = "high"
    with pytest.raises(SgemUserError, match=r"'x' was numeric in training.*\(e.g. 'high'\)"):
        onnx_feeds(model, new)
