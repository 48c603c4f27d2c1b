"""Missing values in tables: imputation learned at fit (median + indicator for numbers, most
frequent category for categories) on the train + validation rows, stored in the encoding and
applied alike at predict; rows without a target dropped with a warning; `missing="error"`
(CLI --missing error) refuses them at fit and in the saved model. One test per error text."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from test_fit import TINY

import sgem
from sgem.cli import main
from sgem.data.files import encode_table, read_table
from sgem.data.table_contract import TableWarning
from sgem.errors import SgemUserError
from sgem.run.fit_setup import fit_config
from sgem.run.runconfig import RunConfig


def _holey(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(-3, 1, (n // 2, 2)), rng.normal(3, 1, (n // 2, 2))]
    frame = pd.DataFrame(
        {"a": x[:, 0], "b": x[:, 1], "colour": rng.choice(["red", "green", "blue"], n)}
    )
    frame["label"] = np.where(x[:, 0] + x[:, 1] > 0, "yes", "no")
    frame.loc[[1, 5, 9, 11], "a"] = np.nan
    frame.loc[[2, 6], "colour"] = None
    frame.loc[[3, 7, 8], "label"] = None
    return frame


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("missing") / "run"
    with pytest.warns(TableWarning, match=r"dropped 3 of 400 rows with a missing target"):
        model = sgem.fit(_holey(), target="label", out=out, progress=False, config=TINY)
    return model, out


def test_fit_learns_and_records_the_imputation(fitted) -> None:
    model, out = fitted
    enc = model.spec.info["encoding"]
    a, b, colour = enc["columns"]
    assert enc["missing"] == "impute"
    assert a["n_missing"] == 4 and a["indicator"] and np.isfinite(a["median"])
    assert b["n_missing"] == 0 and not b["indicator"]
    assert colour["n_missing"] == 2 and colour["fill"] in colour["categories"]
    assert enc["feature_names"][:2] == ["a", "a:missing"]
    assert model.spec.input_shape[0] == len(enc["feature_names"]) == 6
    config = (out / "config.yaml").read_text()
    assert "missing: impute" in config and "input/data.csv" in config
    assert "imputed as in training" in model.summary() and "['a']" in model.summary()


def test_the_median_is_learned_on_the_train_and_validation_rows_only(tmp_path) -> None:
    frame = pd.DataFrame({"v": [np.nan, 1.0, 2.0, 100.0, 200.0], "t": [0, 1, 0, 1, 0]})
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    data = read_table(path, target="t", kind="classification", learn_rows=lambda n: np.arange(3))
    assert data.encoding["columns"][0]["median"] == 1.5  # rows 1 and 2; 3 and 4 held out
    assert data.x[0].tolist() == [1.5, 1.0]  # the value, then the missing indicator


def test_predict_imputes_as_fit_did(fitted) -> None:
    model, _ = fitted
    enc = model.spec.info["encoding"]
    a, b, colour = enc["columns"]
    new = _holey(20, seed=3).drop(columns="label").dropna()
    holey = new.assign(a=np.nan, colour=None)
    x = encode_table(holey, enc)
    assert (x[:, 0] == a["median"]).all() and (x[:, 1] == 1).all()
    assert (x[:, 3 + colour["categories"].index(colour["fill"])] == 1).all()
    # b had no missing values at fit: imputed with its median too, with a note, and then
    # predicted exactly as a row holding that median
    with pytest.warns(TableWarning, match=r"'b' had no missing values in training; 3 missing"):
        got = model.predict_proba(new.assign(b=[np.nan] * 3 + new["b"].tolist()[3:]))
    filled = new.assign(b=[b["median"]] * 3 + new["b"].tolist()[3:])
    np.testing.assert_allclose(got, model.predict_proba(filled), rtol=1e-6)


def test_a_saved_model_imputes_through_the_cli(fitted, tmp_path) -> None:
    model, out = fitted
    new = _holey(30, seed=4).drop(columns="label")
    new.loc[[0, 1], "a"] = np.nan
    path = tmp_path / "new.csv"
    new.to_csv(path, index=False)
    preds = tmp_path / "p.csv"
    assert main(["predict", str(out), str(path), "--out", str(preds)]) == 0
    assert pd.read_csv(preds)["prediction"].tolist() == model.predict(new).tolist()


def test_missing_error_refuses_at_fit_and_in_the_saved_model(tmp_path, capsys) -> None:
    path = tmp_path / "holey.csv"
    _holey().to_csv(path, index=False)
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(json.dumps(TINY))  # JSON is YAML
    args = ["fit", str(path), "--target", "label", "--missing", "error", "--config", str(cfg)]
    assert main([*args, "--out", str(tmp_path / "never")]) == 2
    assert "--missing impute" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()
    clean = _holey().dropna()
    clean.to_csv(path, index=False)
    out = tmp_path / "strict"
    assert main([*args, "--out", str(out), "--quiet"]) == 0
    model = sgem.load(out)
    assert model.spec.info["encoding"]["missing"] == "error"
    assert "refused (fitted with --missing error)" in model.summary()
    with pytest.raises(SgemUserError, match=r"'a' \(1 rows\).*missing='error'.*--missing impute"):
        model.predict(clean.drop(columns="label").head(3).assign(a=[np.nan, 1.0, 2.0]))


def test_an_encoding_saved_before_imputation_existed_refuses_missing_values(tmp_path) -> None:
    frame = _holey().dropna()
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    enc = read_table(path, target="label").encoding
    old = {k: v for k, v in enc.items() if k != "missing"}
    row = frame.drop(columns="label").head(2).assign(b=[np.nan, 0.0])
    with pytest.raises(SgemUserError, match="missing or infinite feature values"):
        encode_table(row, old)
    assert encode_table(row, enc).shape == (2, len(enc["feature_names"]))


@pytest.mark.parametrize(
    ("change", "kwargs", "message"),
    [
        (
            lambda f: f.assign(a=np.where(f.index == 4, np.inf, f["a"])),
            {},
            r"infinite feature "
            r"values in columns 'a' \(1 rows\).*replace them.*or with NaN to have them imputed",
        ),
        (lambda f: f.assign(label=None), {}, r"target column 'label' has no values.*--target"),
        (
            lambda f: f,
            {"missing": "error"},
            r"target column 'label' has 3 missing values.*"
            r"--missing impute",
        ),
        (lambda f: f, {"missing": "drop"}, r"missing='drop'.*--missing impute\|error"),
    ],
)
def test_error_texts(tmp_path, change, kwargs, message) -> None:
    path = tmp_path / "t.csv"
    change(_holey(60)).to_csv(path, index=False)
    with warnings.catch_warnings():  # the dropped-target note of some cases
        warnings.simplefilter("ignore", TableWarning)
        with pytest.raises(SgemUserError, match=message):
            read_table(path, target="label", **kwargs)


def test_a_column_without_values_is_left_out_and_one_without_training_values_refused(
    tmp_path,
) -> None:
    """A column missing on every row carries nothing: it is left out with a note (a fit of a
    table with one empty column was refused), and a new table's values there are ignored;
    one whose only values are outside the rows imputation learns from is still refused."""
    path = tmp_path / "t.csv"
    frame = _holey(60).assign(a=np.nan)
    frame.to_csv(path, index=False)
    with pytest.warns(TableWarning, match=r"left out of the features: 'a' holds no values"):
        data = read_table(path, target="label")
    assert not any(n.startswith("a") for n in data.feature_names)
    new = frame.drop(columns="label").head(2).assign(a=[1.0, 2.0])
    assert encode_table(new, data.encoding).shape == (2, len(data.feature_names))
    frame.assign(a=np.where(frame.index == 0, 5.0, np.nan)).to_csv(path, index=False)
    with pytest.raises(SgemUserError, match=r"column 'a' holds no values.*--features"):
        read_table(path, target="label", learn_rows=lambda n: np.arange(1, n))


def test_every_task_kind_carries_the_missing_key(tmp_path) -> None:
    rows = [
        pd.DataFrame({"unique_id": f"s{i}", "ds": pd.date_range("2021", periods=60), "y": 1.0})
        for i in range(2)
    ]
    series = tmp_path / "s.csv"
    pd.concat(rows).to_csv(series, index=False)
    table = tmp_path / "t.csv"
    _holey().to_csv(table, index=False)
    images = tmp_path / "imgs"
    (images / "cat").mkdir(parents=True)
    for kind, path, kw in (
        ("timeseries", series, {"horizon": 7}),
        ("tabular", table, {"target": "label"}),
        ("images", images, {}),
    ):
        for missing in ("impute", "error"):
            if kind == "tabular" and missing == "error":
                continue  # refused: the table has missing targets (tested above)
            run = fit_config(path, kind=kind, missing=missing, **kw)
            assert run["task"]["missing"] == missing
            RunConfig.from_dict(run)  # the run config stays valid
        assert fit_config(path, kind=kind, **kw)["task"]["missing"] == "impute"


def test_placeholder_tokens_in_a_numeric_column_are_missing_values(tmp_path) -> None:
    """'?' in 2 % of an age column: numbers with missing values at fit and at predict, not
    one category per age (ages not seen in training all got one prediction)."""
    rng = np.random.default_rng(0)
    age = rng.integers(18, 70, 300).astype(object)
    age[::50] = "?"
    frame = pd.DataFrame({"age": age, "y": rng.normal(size=300)})
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.warns(UserWarning, match=r"'age': read as numbers, its 6 values \['\?'\]"):
        data = read_table(tmp_path / "t.csv", target="y")
    assert data.feature_names == ["age", "age:missing"]
    new = pd.DataFrame({"age": ["75", "?", 90]})
    x = encode_table(new, data.encoding)
    assert x[0, 0] == 75 and x[2, 0] == 90 and x[1, 1] == 1 and x[1, 0] == x[1, 0]


def test_many_words_that_mean_missing_leave_a_column_numeric() -> None:
    """40 % "n/a" / "unknown" / "-" / "?" / "missing" in a numeric column: numbers with
    missing values (it was one-hot encoded over its numbers); real words stay text."""
    from sgem.data.table_missing import placeholder_tokens

    rng = np.random.default_rng(3)
    words = ["n/a", "unknown", "-", "?", "missing"]
    values = [
        str(round(v, 2)) if rng.random() > 0.4 else rng.choice(words) for v in rng.normal(size=300)
    ]
    column = pd.Series(values, dtype=object)
    assert sorted(placeholder_tokens(column)) == sorted(words)
    graded = pd.Series([str(v) for v in range(200)] + ["high", "low"] * 50, dtype=object)
    assert placeholder_tokens(graded) == []
    mostly_missing = pd.Series(["1.5"] * 40 + ["unknown"] * 60, dtype=object)
    assert placeholder_tokens(mostly_missing) == []  # more missing than numbers: not a guess
