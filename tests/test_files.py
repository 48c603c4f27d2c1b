"""`sgem.data.files`: readers for the user's own tables, series and images, on small files
written here; every user mistake is an `SgemUserError` naming the problem and the fix."""

from __future__ import annotations

import json
import logging
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from sgem.data.files import (
    check_series_lengths,
    default_context,
    encode_table,
    read_image_folder,
    read_image_npz,
    read_images_for_predict,
    read_long_series,
    read_table,
)
from sgem.data.table_contract import TableWarning
from sgem.data.tsf import TSFData, write_tsf
from sgem.errors import SgemUserError

# -- tables -------------------------------------------------------------------------------------


def _frame(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "size": rng.normal(size=n).round(3),
            "colour": np.array(["red", "green", "blue"])[np.arange(n) % 3],
            "count": np.arange(n),
            "label": np.where(np.arange(n) % 2 == 0, "cat", "dog"),
        }
    )


def test_csv_with_string_target_and_categorical_column(tmp_path):
    path = tmp_path / "t.csv"
    _frame().to_csv(path, index=False)
    data = read_table(path, target="label")
    assert data.task_kind == "classification" and data.classes == ["cat", "dog"]
    assert data.y.dtype == np.int64 and data.y[:4].tolist() == [0, 1, 0, 1]
    assert data.x.dtype == np.float64 and data.x.shape == (40, 5)
    assert data.feature_names == ["size", "colour=blue", "colour=green", "colour=red", "count"]
    assert data.x[0, 1:4].tolist() == [0, 0, 1]  # red
    # the encoding is JSON and rebuilds the same features from a new table
    encoding = json.loads(json.dumps(data.encoding))
    new = pd.read_csv(path).drop(columns="label")  # no target at predict time
    np.testing.assert_array_equal(encode_table(new, encoding), data.x)
    np.testing.assert_array_equal(encode_table(path, encoding), data.x)


def test_encode_table_unseen_category_and_missing_column(tmp_path):
    path = tmp_path / "t.csv"
    _frame().to_csv(path, index=False)
    encoding = read_table(path, target="label").encoding
    new = _frame(3).drop(columns="label")
    new.loc[1, "colour"] = "purple"
    with pytest.warns(TableWarning, match=r"'purple'\).*all zero"):
        x = encode_table(new, encoding)
    assert x[1, 1:4].tolist() == [0, 0, 0] and x[0, 1:4].tolist() == [0, 0, 1]
    with pytest.raises(SgemUserError, match=r"\['count'\] not in the table; its columns"):
        encode_table(new.drop(columns="count"), encoding)


def test_parquet_and_regression_target(tmp_path):
    frame = _frame().assign(price=np.linspace(0.5, 20, 40))
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    data = read_table(path, target="price", features=["size", "count"])
    assert data.task_kind == "regression" and data.classes is None
    assert data.y.dtype == np.float64 and data.x.shape == (40, 2)
    # integer-valued with few values: classes; an explicit kind wins
    assert read_table(path, target="count", features=["size"]).task_kind == "regression"
    small = frame.assign(grade=np.arange(40) % 2 + 1)
    small.to_parquet(path)
    graded = read_table(path, target="grade", features=["size"])
    assert graded.task_kind == "classification" and graded.classes == [1, 2]
    assert read_table(path, target="grade", features=["size"], kind="regression").y.dtype == (
        np.float64
    )


def test_a_level_far_above_the_spread_keeps_its_digits(tmp_path):
    """float32 rounds 123456789 + small changes to multiples of 8: target and features
    stay float64 until they are standardised."""
    x = np.arange(40, dtype=np.float64)
    frame = pd.DataFrame({"stamp": 1.7e9 + x, "y": 123456789 + 0.5 * x})
    frame.to_csv(tmp_path / "t.csv", index=False)
    data = read_table(tmp_path / "t.csv", target="y")
    np.testing.assert_array_equal(np.diff(data.y), 0.5)
    np.testing.assert_array_equal(np.diff(data.x[:, 0]), 1.0)
    np.testing.assert_array_equal(encode_table(frame, data.encoding)[:, 0], frame["stamp"])


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "t.parquet"
    _frame().to_parquet(path)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` now fails
    with pytest.raises(SgemUserError, match=r"pip install sgem\[parquet\]"):
        read_table(path, target="label")


def test_npz_table(tmp_path):
    path = tmp_path / "t.npz"
    x = np.arange(200, dtype=np.float64).reshape(100, 2)
    np.savez(path, x=x, y=np.arange(100) % 3)  # 3 classes <= 5% of 100 rows
    data = read_table(path)
    assert data.feature_names == ["x0", "x1"] and data.task_kind == "classification"
    assert data.classes == [0, 1, 2]
    np.testing.assert_array_equal(encode_table(x, data.encoding), x)


def test_table_errors(tmp_path):
    path = tmp_path / "t.csv"
    _frame().to_csv(path, index=False)
    with pytest.raises(SgemUserError, match=r"'lbl'\] not in the table; its columns are \['size'"):
        read_table(path, target="lbl")
    with pytest.raises(SgemUserError, match=r"non-numeric feature columns \['colour'\].*onehot"):
        read_table(path, target="label", categorical="refuse")

    _frame().assign(label="cat").to_csv(path, index=False)
    with pytest.raises(SgemUserError, match="single class"):
        read_table(path, target="label")

    bad = _frame()
    bad.loc[[3, 7], "size"] = np.nan
    bad["count"] = bad["count"].astype(float)
    bad.loc[9, "count"] = np.inf
    bad.to_csv(path, index=False)
    with pytest.raises(SgemUserError, match=r"'size' \(2 rows\), 'count' \(1 rows\).*rows 3, 7, 9"):
        read_table(path, target="label", missing="error")

    bad = _frame()
    bad.loc[5, "label"] = None
    bad.to_csv(path, index=False)
    with pytest.raises(
        SgemUserError, match=r"target column 'label' has 1 missing values \(rows 5\)"
    ):
        read_table(path, target="label", missing="error")

    path.write_text("")
    with pytest.raises(SgemUserError, match="is empty"):
        read_table(path, target="label")
    path.write_text("a,b\n")
    with pytest.raises(SgemUserError, match="no data rows"):
        read_table(path, target="a")
    with pytest.raises(SgemUserError, match="no such file"):
        read_table(tmp_path / "nope.csv", target="a")
    with pytest.raises(SgemUserError, match="unsupported file type"):
        read_table(_touch(tmp_path / "t.xls"), "a")


def _touch(path: Path) -> Path:
    path.write_text("x")
    return path


# -- series -------------------------------------------------------------------------------------


def _long_csv(path: Path) -> None:
    rows = []
    for sid, n in (("b", 30), ("a", 50), ("c", 12)):
        for i, t in enumerate(pd.date_range("2021-03-01", periods=n, freq="h")):
            if sid == "a" and i in (10, 11):
                continue  # a gap of two hours
            rows.append((sid, t, float(i) if not (sid == "b" and i == 4) else np.nan))
    frame = pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).sample(frac=1, random_state=0)
    frame.to_csv(path, index=False)


def test_long_csv_with_gap(tmp_path):
    path = tmp_path / "long.csv"
    _long_csv(path)
    data = read_long_series(path)
    assert data.freq == "h" and set(data.names) == {"a", "b", "c"}
    assert data.lengths.tolist() == [len(data.series[k]) for k in data.names]
    a, b, c = data.series["a"], data.series["b"], data.series["c"]
    assert len(a) == 50 and np.isnan(a[10:12]).all() and a[12] == 12.0 and a.dtype == np.float64
    assert len(b) == 30 and np.isnan(b[4]) and len(c) == 12 and not np.isnan(c).any()
    assert data.start["a"] == pd.Timestamp("2021-03-01") and data.n_missing == 3
    assert check_series_lengths(data, context=4, horizon=8) == data.names
    with pytest.raises(
        SgemUserError, match=r"1 of 3 series .* shortest, 'c', has 12 values.*at most 4"
    ):
        check_series_lengths(data, context=20, horizon=8)
    assert check_series_lengths(data, 20, 8, drop_short=True) == [n for n in data.names if n != "c"]


def test_a_file_of_mostly_gaps_is_warned_of(tmp_path, caplog):
    """Timestamps at irregular days, read on their commonest step (a day), leave most of the
    grid to be filled: the reader says so (it filled 136 of 196 days silently)."""
    days = np.sort(np.random.default_rng(0).choice(200, 60, replace=False))
    times = pd.Timestamp("2024-01-01") + pd.to_timedelta(days, unit="D")
    path = tmp_path / "irregular.csv"
    pd.DataFrame({"unique_id": "a", "ds": times, "y": np.arange(60.0)}).to_csv(path, index=False)
    with caplog.at_level(logging.WARNING):
        data = read_long_series(path)
    assert data.freq == "D" and np.isnan(data.series["a"]).mean() > 0.5
    assert "have no value" in caplog.text and "aggregate them to a regular step" in caplog.text
    caplog.clear()
    steps = pd.DataFrame({"unique_id": "a", "ds": [0, 1, 2, 3, 100], "y": np.arange(5.0)})
    with caplog.at_level(logging.WARNING):
        read_long_series(steps)  # integer time steps: the same
    assert "96 of the 101 steps on the series' step-1 grid" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _long_csv(tmp_path / "long.csv")
        read_long_series(tmp_path / "long.csv")  # a few gaps: no such warning
    assert "have no value" not in caplog.text


def test_series_left_out_of_training_are_told_how_to_train_them(caplog):
    """Left out of training, a short series is still forecast: the note names the flag that
    trains on it too, and none where no flag does (it once said 'to keep them: drop ...')."""
    series = {"a": np.arange(40.0), "b": np.arange(5.0), "c": np.arange(1.0)}
    with caplog.at_level("WARNING"):
        assert check_series_lengths(series, 8, 6, drop_short=True, pad=True) == ["a"]
    assert "left out of training, not of forecasting" in caplog.text
    assert "drop" not in caplog.text and "to train on them" not in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        check_series_lengths({"a": np.arange(40.0), "b": np.arange(5.0)}, 8, 6, drop_short=True)
    assert "to train on them too: use --horizon 3 or less" in caplog.text


def test_series_ids_are_read_as_written(tmp_path):
    """Ids "001" and "1" are two series, and "001" stays "001" (read as integers, a
    forecast's ids no longer joined back to the file, and the two series collided)."""
    path = tmp_path / "ids.csv"
    days = pd.date_range("2021-01-01", periods=6, freq="D").strftime("%Y-%m-%d")
    rows = [(i, d, float(k)) for i in ("001", "1", "02") for k, d in enumerate(days)]
    path.write_text("unique_id,ds,y\n" + "".join(f"{i},{d},{v}\n" for i, d, v in rows))
    assert read_long_series(path).names == ["001", "1", "02"]
    empty = pd.read_csv(path).iloc[:0]  # (an IndexError deep in reading its times, before)
    with pytest.raises(SgemUserError, match="no rows"):
        read_long_series(empty)
    blank = pd.read_csv(path, dtype={"unique_id": str})
    blank.loc[[0, 7], "unique_id"] = None  # (as text, they made a series named "nan")
    with pytest.raises(SgemUserError, match=r"'unique_id' is empty in 2 rows \(rows 0, 7\)"):
        read_long_series(blank)


def test_a_semicolon_separated_csv_is_read(tmp_path):
    path = tmp_path / "t.csv"
    _frame().to_csv(path, index=False, sep=";")
    data = read_table(path, target="label")
    assert data.classes == ["cat", "dog"] and data.x.shape == (40, 5)


def test_long_series_errors_and_tsf(tmp_path):
    path = tmp_path / "long.csv"
    pd.DataFrame({"id": ["x", "x"], "ds": ["2020-01-01", "2020-01-01"], "y": [1, 2]}).to_csv(
        path, index=False
    )
    with pytest.raises(SgemUserError, match=r"columns \['unique_id'\] not found"):
        read_long_series(path)
    with pytest.raises(SgemUserError, match="repeat an \\(id, time\\) pair"):
        read_long_series(path, id_col="id")
    tsf = write_tsf(
        TSFData(
            [np.arange(5.0), np.array([1.0, np.nan, 3.0])],
            [{"series_name": "T1"}, {"series_name": "T2"}],
            {"series_name": "string"},
            frequency="monthly",
            horizon=2,
        ),
        tmp_path / "m.tsf",
    )
    zipped = tmp_path / "m.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.write(tsf, "m.tsf")
    for source in (tsf, zipped):
        data = read_long_series(source)
        assert data.names == ["T1", "T2"] and data.freq == "MS" and data.horizon == 2
        assert np.isnan(data.series["T2"][1])


def test_default_context_rule():
    assert default_context("h", 24) == 168 and default_context("hourly", 48) == 192
    assert default_context("D", 14) == 56 and default_context("D", 3) == 28
    assert default_context("MS", 24) == 48 and default_context("monthly", 6) == 24
    assert default_context("30min", 10) == 336 and default_context("10min", 10) == 512
    assert default_context("W", 8) == 52 and default_context("QS", 8) == 16
    assert default_context("YS", 6) == 12 and default_context("YS", 1) == 8
    assert default_context(None, 10) == 40
    for freq in ("h", "D", "W", "MS", "QS", "YS", "4s", None):
        for horizon in (1, 7, 60, 300):
            assert default_context(freq, horizon) >= 2 * horizon
    with pytest.raises(SgemUserError, match="unknown frequency"):
        default_context("fortnightly-ish", 3)


# -- images -------------------------------------------------------------------------------------


def _image(path: Path, size=(8, 6), colour=(200, 10, 10), mode="RGB") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, colour if mode == "RGB" else colour[0]).save(path)


@pytest.fixture
def image_folder(tmp_path) -> Path:
    root = tmp_path / "imgs"
    for i in range(3):
        _image(root / "cats" / f"c{i}.png")
    _image(root / "cats" / "c3.jpg", colour=(0, 0, 250))
    _image(root / "dogs" / "d0.png", mode="L", colour=(90,))
    _image(root / "dogs" / "sub" / "d1.jpeg", size=(16, 12))  # another size
    (root / "dogs" / "notes.txt").write_text("not an image")
    (root / ".DS_Store").write_text("x")
    return root


def test_image_folder(image_folder, caplog):
    with caplog.at_level(logging.WARNING):
        data = read_image_folder(image_folder)
    assert data.x.shape == (6, 6, 8, 3) and data.x.dtype == np.uint8
    assert data.class_names == ["cats", "dogs"] and data.y.tolist() == [0, 0, 0, 0, 1, 1]
    assert data.files[-1] == "dogs/sub/d1.jpeg" and data.n_resized == 1
    assert "resized 1 of 6 images to 6x8" in caplog.text
    assert data.x[0, 0, 0].tolist() == [200, 10, 10] and data.x[4, 0, 0].tolist() == [90, 90, 90]
    sized = read_image_folder(image_folder, image_size=4)
    assert sized.x.shape == (6, 4, 4, 3) and sized.n_resized == 6
    x, names = read_images_for_predict(image_folder, image_size=(6, 8))
    assert x.shape == (6, 6, 8, 3) and names == data.files
    x, names = read_images_for_predict(image_folder / "cats" / "c3.jpg")
    assert x.shape == (1, 6, 8, 3) and names == ["c3.jpg"]


def test_a_few_unreadable_images_are_left_out_of_a_fit(image_folder, caplog):
    """One corrupt file among ten or more images is left out with a warning naming it (it
    stopped the fit); at predict it is still refused (every input gets a row)."""
    for i in range(5):
        _image(image_folder / "cats" / f"more{i}.png")
    (image_folder / "dogs" / "broken.png").write_bytes(b"\x89PNG not really")
    with caplog.at_level(logging.WARNING):
        data = read_image_folder(image_folder)
    assert len(data.y) == 11 and "dogs/broken.png" not in data.files
    assert "left out 1 unreadable of 12 images" in caplog.text and "broken.png" in caplog.text
    with pytest.raises(SgemUserError, match=r"broken\.png: not a readable image"):
        read_images_for_predict(image_folder, image_size=(6, 8))
    for name in ("d1.jpeg", "d2.png"):
        (image_folder / "dogs" / "sub" / name).write_bytes(b"not an image")
    with pytest.raises(SgemUserError, match=r"3 of 13 images are not readable"):
        read_image_folder(image_folder)


def test_image_folder_errors(image_folder, tmp_path):
    (image_folder / "dogs" / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(SgemUserError, match=r"broken\.png: not a readable image"):
        read_image_folder(image_folder)
    (image_folder / "dogs" / "broken.png").unlink()
    (image_folder / "birds").mkdir()
    with pytest.raises(SgemUserError, match=r"class folders \['birds'\] hold no images"):
        read_image_folder(image_folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SgemUserError, match="is empty; put one sub-folder per class"):
        read_image_folder(empty)
    _image(empty / "loose.png")
    with pytest.raises(SgemUserError, match="no class folders"):
        read_image_folder(empty)
    with pytest.raises(SgemUserError, match="no such folder"):
        read_image_folder(tmp_path / "missing")


def test_image_npz(tmp_path):
    path = tmp_path / "i.npz"
    x = np.zeros((5, 4, 4), dtype=np.uint8)
    np.savez(path, x=x, y=np.array([3, 7, 3, 7, 7]))
    data = read_image_npz(path)
    assert data.x.shape == (5, 4, 4, 1) and data.y.tolist() == [0, 1, 0, 1, 1]
    assert data.class_names == ["3", "7"]
    np.savez(
        path, x=x[..., None].repeat(3, -1), y=np.array([0, 1, 0, 1, 1]), class_names=["a", "b"]
    )
    data = read_image_npz(path)
    assert data.x.shape == (5, 4, 4, 3) and data.class_names == ["a", "b"]
    np.savez(path, x=x.astype(np.float32), y=np.zeros(5))
    with pytest.raises(SgemUserError, match="expected uint8"):
        read_image_npz(path)
    np.savez(path, images=x)
    with pytest.raises(SgemUserError, match=r"holds arrays \['images'\]; expected 'x'"):
        read_image_npz(path)


def test_gaps_in_every_series_and_integer_time(tmp_path):
    path = tmp_path / "m.csv"
    rows = [
        (sid, t, float(i))
        for sid in "ab"
        for i, t in enumerate(pd.date_range("2020-01-01", periods=24, freq="MS"))
        if i not in (5, 9)  # no series is regular end to end: infer_freq fails on each
    ]
    pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).to_csv(path, index=False)
    data = read_long_series(path)
    assert data.freq == "MS" and data.lengths.tolist() == [24, 24] and data.n_missing == 4
    ints = pd.DataFrame({"id": ["a"] * 5 + ["b"] * 3, "t": [0, 1, 2, 4, 5, 10, 11, 12], "v": 1.0})
    ints.to_csv(path, index=False)
    data = read_long_series(path, id_col="id", time_col="t", value_col="v")
    assert data.freq is None and data.start == {"a": 0, "b": 10}
    assert np.isnan(data.series["a"][3]) and len(data.series["a"]) == 6


def test_columns_beside_id_time_and_value_are_named_as_unused(tmp_path, caplog):
    """Exogenous columns are not modelled; the reader says so instead of dropping them
    silently."""
    frame = pd.DataFrame(
        {"unique_id": 7, "ds": pd.date_range("2020-01-01", periods=30), "y": np.arange(30.0)}
    )
    frame["price"], frame["store"] = 1.0, "north"
    frame.to_csv(tmp_path / "x.csv", index=False)
    with caplog.at_level("WARNING"):
        data = read_long_series(tmp_path / "x.csv")
    assert data.names == ["7"]
    assert "columns ['price', 'store'] are not used" in caplog.text
