"""A table's dates become numbers (days since 1970, year, month, day, weekday, hour), read
the same way at fit and at predict; identifiers and free text are left out with a note, and
a column of many repeated categories keeps its commonest ones."""

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
from sgem.data.table_dates import date_format
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


def test_day_first_dates_are_read_day_first_at_fit_and_at_predict() -> None:
    text = pd.Series(["31/01/2020", "01/02/2020", "15/03/2020"])
    assert date_format(text) == "%d/%m/%Y"
    assert date_format(pd.Series(["01/02/2020", "03/04/2020"])) == "%m/%d/%Y"
    assert date_format(pd.Series(["red", "2020-01-01"])) is None
    assert date_format(pd.Series(["12-3-45", "11-4-46"])) is None  # codes, not dates
    assert date_format(pd.Series(["1.2.3", "1.10.2"])) is None  # versions
    assert date_format(pd.Series(["2020-01-05 13:30", "2021-02-01"])) == "ISO8601"
    assert date_format(pd.Series([1.0, 2.0])) is None
    frame = pd.DataFrame({"when": text, "x": [1.0, 2.0, 3.0], "y": [0.0, 1.0, 2.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        data = read_table_frame(frame)
        x = encode_table(pd.DataFrame({"when": ["02/01/2021"], "x": [0.0]}), data.encoding)
    assert x[0, 2:4].tolist() == [1.0, 2.0]  # month 1, day 2: day first, as at fit


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


def test_a_date_model_exports_with_its_parts_as_numeric_inputs(tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    from sgem.export import export_onnx
    from sgem.export.feeds import parity

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        sgem.fit(
            _frame(400),
            target="y",
            out=tmp_path / "run",
            progress=False,
            config=TINY,
            combine=False,
        )
        model = sgem.load(tmp_path / "run")
        export_onnx(model, tmp_path / "m.onnx")
        diffs = parity(model, tmp_path / "m.onnx", _frame(30).drop(columns=["y", "id"]))
    assert max(diffs.values()) <= 1e-4, diffs
