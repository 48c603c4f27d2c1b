"""The column contract of a table model: new data is matched to the training columns by
name (DataFrame, dict, list of row dicts, CSV / Parquet through `sgem predict`), extra
columns are ignored with a note, missing ones refused by name, categories encoded as at fit;
a bare array is read by position, with a warning when the columns have names."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fit import TINY

import sgem
from sgem.cli import main
from sgem.data.files import encode_table, read_table
from sgem.data.table_contract import TableWarning
from sgem.errors import SgemUserError
from sgem.space import Arch, TabularSpace

COLUMNS = ["a", "b", "colour", "flag"]


def _table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(-3, 1, (n // 2, 2)), rng.normal(3, 1, (n // 2, 2))]
    colour = rng.choice(["red", "green", "blue"], n)
    label = np.where(x[:, 0] + x[:, 1] + (colour == "red") > 0, "yes", "no")
    return pd.DataFrame(
        {"a": x[:, 0], "b": 10 * x[:, 1], "colour": colour, "flag": rng.random(n) < 0.5}
    ).assign(label=label)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A classifier fitted on a DataFrame with a categorical and a boolean column."""
    out = tmp_path_factory.mktemp("contract") / "run"
    model = sgem.fit(_table(), target="label", out=out, progress=False, config=TINY)
    new = _table(40, seed=1).drop(columns="label")
    return model, out, new


@given(
    order=st.permutations(COLUMNS),
    extra=st.lists(st.sampled_from(["z", "id", "label", "note"]), unique=True, max_size=3),
)
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_permuting_or_adding_columns_never_changes_predictions(fitted, order, extra) -> None:
    model, _, new = fitted
    expected = model.predict_proba(new)
    shuffled = new[list(order)].copy()
    for i, name in enumerate(extra):  # the target column is ignored too, without a note
        shuffled[name] = np.arange(len(new)) * (i + 1) if name != "label" else "yes"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        np.testing.assert_array_equal(model.predict_proba(shuffled), expected)
        np.testing.assert_array_equal(model.route(shuffled).cluster, model.route(new).cluster)


def test_extra_columns_are_named_in_a_note(fitted) -> None:
    model, _, new = fitted
    with pytest.warns(TableWarning, match=r"ignored column\(s\) \['z'\]"):
        model.predict(new.assign(z=1.0))


def test_dicts_and_row_dicts_read_by_name(fitted) -> None:
    model, _, new = fitted
    expected = model.predict(new)
    columns = {c: new[c].tolist() for c in reversed(COLUMNS)}
    np.testing.assert_array_equal(model.predict(columns), expected)
    np.testing.assert_array_equal(model.predict(new.to_dict("records")), expected)
    one = {c: new[c].iloc[0] for c in COLUMNS}  # one sample: column -> value
    assert model.predict(one).tolist() == expected[:1].tolist()


def test_a_missing_column_is_refused_naming_it(fitted) -> None:
    model, _, new = fitted
    with pytest.raises(SgemUserError, match=r"feature columns \['b', 'flag'\] not in the table"):
        model.predict(new.drop(columns=["b", "flag"]))
    with pytest.raises(SgemUserError, match=r"Add them under the training name"):
        model.predict_proba(new.drop(columns=["b", "flag"]))


def test_categorical_columns_through_the_api_and_the_cli(fitted, tmp_path) -> None:
    model, out, new = fitted
    enc = model.spec.info["encoding"]
    assert [c["kind"] for c in enc["columns"]] == ["numeric", "numeric", "onehot", "bool"]
    reversed_csv = tmp_path / "new.csv"
    new[COLUMNS[::-1]].assign(z=0).to_csv(reversed_csv, index=False)
    preds = tmp_path / "preds.csv"
    with pytest.warns(TableWarning, match=r"ignored column\(s\) \['z'\]"):
        assert main(["predict", str(out), str(reversed_csv), "--out", str(preds)]) == 0
    frame = pd.read_csv(preds)
    assert frame["prediction"].tolist() == model.predict(new).tolist()
    np.testing.assert_allclose(
        frame["p_yes"], model.predict_proba(new)[:, 1], rtol=1e-6, atol=1e-12
    )


def test_an_unseen_category_is_all_zero_with_a_note(fitted) -> None:
    model, _, new = fitted
    row = new.iloc[:1].assign(colour="purple")
    with pytest.warns(TableWarning, match=r"'purple'\).*all zero"):
        x = encode_table(row, model.spec.info["encoding"])
    names = model.spec.info["encoding"]["feature_names"]
    colour = [i for i, n in enumerate(names) if n.startswith("colour=")]
    assert x[0, colour].tolist() == [0.0, 0.0, 0.0]


def test_bare_arrays(fitted, tmp_path) -> None:
    model, _, new = fitted
    with pytest.raises(SgemUserError, match=r"categorical columns \['colour'\].*not an array"):
        model.predict(new.to_numpy())
    # an all-numeric named table: read by position with a warning; a wrong width refused
    frame = pd.DataFrame({"p": np.arange(300.0), "q": np.arange(300.0) % 7})
    frame["t"] = np.where(frame["p"] > 150, 1.0, 0.0) + frame["q"]
    path = tmp_path / "num.csv"
    frame.to_csv(path, index=False)
    enc = read_table(path, target="t", kind="regression").encoding
    with pytest.warns(TableWarning, match=r"by position as the columns \['p', 'q'\].*unchecked"):
        np.testing.assert_array_equal(
            encode_table(frame[["p", "q"]].to_numpy(), enc), encode_table(frame, enc)
        )
    with pytest.raises(SgemUserError, match=r"shape \(300, 3\).*expected \(n, 2\)"):
        encode_table(frame.to_numpy(), enc)


@pytest.fixture(scope="module")
def toy_model(tmp_path_factory) -> Path:
    """A model saved from the toy task (numeric features x0, x1, no table encoding)."""
    from sgem.final.moe_fit import train_final_moe
    from sgem.moe.artifact import save_final_moe
    from sgem.train import TrainConfig, Trainer

    task = sgem.make_toy_task(seed=0, n_per_cloud=100, n_test_per_cloud=20, n_clusters=4)
    space = TabularSpace(n_nodes=1)
    archs = [Arch(("linear",), (0,)), Arch(("rbf",), (0,))]
    trainer = Trainer(task, space, TrainConfig(steps=5))
    moe, report = train_final_moe(task, trainer, np.arange(4) % 2, archs, steps=5, seed=1)
    path = tmp_path_factory.mktemp("toy") / "model"
    save_final_moe(path, task, space, moe, trainer.n_out, metrics=report.to_json(), info={})
    return path


def test_the_toy_model_takes_arrays_and_columns_by_name(toy_model) -> None:
    model = sgem.load(toy_model)
    x = np.random.default_rng(0).normal(size=(30, 2))
    expected = model.predict_proba(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TableWarning)  # arrays are this model's own input
        np.testing.assert_array_equal(model.predict_proba(x), expected)
    frame = pd.DataFrame({"x1": x[:, 1], "x0": x[:, 0]})  # reversed: matched by name
    np.testing.assert_array_equal(model.predict_proba(frame), expected)
    with pytest.raises(SgemUserError, match=r"feature columns \['x1'\] not in the table"):
        model.predict(frame.drop(columns="x1"))
    with pytest.raises(SgemUserError, match=r"column\(s\) \['x0'\] are not numeric"):
        model.predict(frame.assign(x0="high"))
    with pytest.raises(SgemUserError, match="NaN or inf"):  # no imputation state: refused
        model.predict(frame.assign(x0=np.nan))


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (None, r"cannot read NoneType None as a table; give a pandas DataFrame"),
        ("nope.csv", r"nope.csv: no such file"),
        ({"a": [1.0, 2.0], "b": [1.0]}, r"a dict of columns must map each column name to a list"),
        (
            pd.DataFrame([[1.0, 2.0, 3.0, "red", True]], columns=["a", "b", "a", "colour", "flag"]),
            r"columns \['a'\] appear more than once in the table; keep one of each",
        ),
        (
            pd.DataFrame({"a": ["high"], "b": [1.0], "colour": ["red"], "flag": [True]}),
            r"column 'a' was numeric in training but holds text here \(e.g. 'high'\)",
        ),
    ],
)
def test_error_texts(fitted, table, message) -> None:
    model, _, _ = fitted
    with pytest.raises(SgemUserError, match=message):
        model.predict(table)


def test_fit_config_reads_paths_only() -> None:
    from sgem.run.fit_setup import fit_config

    with pytest.raises(SgemUserError, match=r"fit_config reads a file path.*sgem.fit\(data"):
        fit_config(pd.DataFrame({"a": [1]}), target="a")


def test_breast_cancer_with_its_columns_reversed_scores_the_same(tmp_path) -> None:
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer(as_frame=True)
    x, y = data.data, data.target.to_numpy()
    test = np.arange(len(x)) % 4 == 0
    frame = x[~test].assign(label=y[~test])
    model = sgem.fit(frame, target="label", out=tmp_path / "run", progress=False, config=TINY)
    as_fitted = model.predict(x[test])
    reversed_ = model.predict(x[test][x.columns[::-1]])
    np.testing.assert_array_equal(reversed_, as_fitted)
    assert (as_fitted == y[test]).mean() > 0.85
