"""In-memory data for `sgem.fit` (a DataFrame, an (X, y) tuple) and the scikit-learn
estimators `SgemClassifier` / `SgemRegressor`: in a Pipeline, in cross_val_score, on a
DataFrame with categories and missing values, and a chosen set of scikit-learn's own
estimator checks (the others are listed with the reason they do not apply)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_blobs
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import estimator_checks_generator
from test_fit import TINY

import sgem
from sgem import SgemClassifier, SgemRegressor
from sgem.data.files import read_table
from sgem.data.table_contract import TableWarning
from sgem.errors import SgemUserError
from sgem.run.fit_input import materialise
from sgem.run.fit_setup import infer_kind


def _blobs(n: int = 300):
    return make_blobs(n, centers=3, cluster_std=1.5, random_state=0)


def test_a_classifier_in_a_pipeline_and_cross_val_score() -> None:
    x, y = _blobs()
    pipe = make_pipeline(StandardScaler(), SgemClassifier(config=TINY))
    scores = cross_val_score(pipe, x, y, cv=2)
    assert scores.shape == (2,) and (scores > 0.6).all()  # 3 blobs: chance is 1/3


def test_a_classifier_on_a_dataframe_with_categories_and_missing_values() -> None:
    rng = np.random.default_rng(0)
    x, y = _blobs()
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "shop": rng.choice(["n", "s"], len(x))})
    frame.loc[::25, "a"] = np.nan
    labels = np.asarray(["red", "green", "blue"])[y]
    clf = SgemClassifier(config=TINY).fit(frame, pd.Series(labels))
    assert clf.classes_.tolist() == ["blue", "green", "red"]
    assert clf.feature_names_in_.tolist() == ["a", "b", "shop"] and clf.n_features_in_ == 3
    assert clf.model_.path is None  # its temporary run directory is gone
    proba = clf.predict_proba(frame)
    assert proba.shape == (300, 3) and np.allclose(proba.sum(1), 1, atol=1e-5)
    np.testing.assert_array_equal(clf.predict_proba(frame[["shop", "b", "a"]]), proba)
    assert clf.score(frame, labels) > 0.6
    with pytest.warns(UserWarning, match=r"read by position as \['a', 'b', 'shop'\]"):
        assert clf.predict(frame.to_numpy(dtype=object)).shape == (300,)


def test_a_regressor_scores_and_gives_quantiles() -> None:
    x, y = _blobs()
    target = 3 * x[:, 0] + y
    reg = SgemRegressor(config=TINY).fit(x, target)
    assert reg.score(x, target) > 0.5 and reg.n_features_in_ == 2
    assert not hasattr(reg, "feature_names_in_")
    q = reg.predict_quantiles(x[:10], (0.1, 0.9))
    assert (q[0.1] <= q[0.9]).all()
    with pytest.raises(ValueError, match="X has 3 features, but SgemRegressor is expecting 2"):
        reg.predict(np.zeros((2, 3)))


def test_fit_takes_a_dataframe_and_arrays(tmp_path) -> None:
    x, y = _blobs()
    frame = pd.DataFrame({"u": x[:, 0], "v": x[:, 1], "k": y})
    model = sgem.fit(frame, target="k", out=tmp_path / "frame", progress=False, config=TINY)
    assert (tmp_path / "frame" / "input" / "data.csv").is_file()
    assert (model.predict(frame) == y).mean() > 0.6
    model = sgem.fit((x, y), out=tmp_path / "xy", progress=False, config=TINY)
    assert model.spec.info["encoding"]["feature_names"] == ["x0", "x1"]
    assert model.spec.info["target"] == "target" and model.classes == [0, 1, 2]
    # the same data again: the finished run is reused; other data there: refused
    again = sgem.fit((x, y), out=tmp_path / "xy", progress=False, config=TINY)
    assert again.result["reused"]
    with pytest.raises(SgemUserError, match=r"already holds a run fitted on other data.*out="):
        sgem.fit((x[:200], y[:200]), out=tmp_path / "xy", progress=False, config=TINY)


@pytest.mark.parametrize(
    ("data", "kwargs", "message"),
    [
        ({"x": [1, 2]}, {}, r"cannot fit a dict; give a file path .*DataFrame.*\(X, y\)"),
        ((np.zeros(5), np.zeros(5)), {}, r"non-empty 2-D numeric array \(n, d\)"),
        ((np.zeros((5, 2)), np.zeros(4)), {}, r"y has shape \(4,\) but X has 5 rows"),
        ((np.zeros((5, 2)), np.zeros(5)), {"target": "y"}, "the target is y; leave out target="),
        ((1, 2, 3), {}, r"a tuple of 3 items; give \(X, y\)"),
        (pd.DataFrame({"a": [1.0] * 50, "b": [0, 1] * 25}), {}, "--target COLUMN"),
    ],
)
def test_bad_in_memory_data_is_refused_and_leaves_nothing(tmp_path, data, kwargs, message):
    out = tmp_path / "never"
    with pytest.raises(SgemUserError, match=message):
        sgem.fit(data, out=out, progress=False, config=TINY, **kwargs)
    assert not out.exists()


def test_the_csv_round_trip_keeps_kinds_sensibly(tmp_path) -> None:
    n = 60
    frame = pd.DataFrame(
        {
            "size": pd.Categorical(np.arange(n) % 3 + 1),  # numbers as categories
            "shop": pd.Categorical(np.where(np.arange(n) % 2, "n", "s")),
            "open": np.arange(n) % 4 == 0,
            "day": pd.date_range("2024-01-01", periods=4).repeat(15),
            "y": np.arange(n) % 2,
        }
    )
    path, target, _ = materialise(frame, tmp_path / "run", "y")
    enc = read_table(path, target=target).encoding
    kinds = {c["name"]: c["kind"] for c in enc["columns"]}
    parts = {f"day.{p}": "numeric" for p in ("days", "year", "month", "day", "weekday")}
    assert kinds == {"size": "numeric", "shop": "onehot", "open": "bool", **parts}
    day = next(c for c in enc["columns"] if c["name"] == "day.day")
    assert day["date_of"] == "day" and day["date_format"] == "ISO8601"
    from sgem.data.files import encode_table

    # predicting on the original dtypes builds the features the file gave
    np.testing.assert_array_equal(encode_table(frame, enc), read_table(path, target="y").x)
    series = pd.DataFrame({"unique_id": "a", "ds": pd.date_range("2020", periods=9), "y": 1.0})
    spath, _, _ = materialise(series, tmp_path / "series", None)
    assert infer_kind(spath) == "timeseries"


# scikit-learn's checks that apply to a search that needs data: each fits on >= 100 samples
# (or never). Not run, and why:
# - check_dont_overwrite_parameters, check_n_features_in_after_fitting, check_estimators_dtypes,
#   check_pipeline_consistency, check_estimators_pickle, check_f_contiguous_array_estimator,
#   check_classifier_data_not_an_array, check_classifiers_classes, check_dict_unchanged,
#   check_methods_sample_order_invariance, check_methods_subset_invariance,
#   check_fit2d_predict1d, check_regressors_no_decision_function, check_fit2d_1sample,
#   check_fit2d_1feature: they fit on 1 to 30 samples; SGEM needs at least 3 clusters with
#   training and validation samples and refuses less with a SgemUserError naming the fix;
# - check_classifiers_train, check_regressors_train, check_fit_idempotent,
#   check_estimators_overwrite_params, check_regressor_data_not_an_array, check_dtype_object,
#   check_readonly_memmap_input: they pass, but fit 2 to 6 times (seconds each);
# - check_array_api_input: needs SCIPY_ARRAY_API=1 and an array API library.
APPLICABLE = {
    "check_estimator_cloneable",
    "check_estimator_repr",
    "check_no_attributes_set_in_init",
    "check_parameters_default_constructible",
    "check_get_params_invariance",
    "check_set_params",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_mixin_order",
    "check_estimators_unfitted",
    "check_fit1d",
    "check_complex_data",
    "check_estimators_empty_data_messages",
    "check_supervised_y_no_nan",
    "check_requires_y_none",
    "check_classifiers_one_label",
    "check_classifiers_regression_target",
    "check_fit_check_is_fitted",
    "check_n_features_in",
    "check_estimators_fit_returns_self",
}


def _checks():
    for estimator in (SgemClassifier(config=TINY), SgemRegressor(config=TINY)):
        for est, check in estimator_checks_generator(estimator, mark=None):
            name = getattr(check, "func", check).__name__
            if name in APPLICABLE:
                yield pytest.param(est, check, id=f"{type(est).__name__}-{name}")


@pytest.mark.parametrize(("estimator", "check"), list(_checks()))
def test_sklearn_estimator_checks(estimator, check) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        check(estimator)


def test_the_checks_run_are_the_ones_listed() -> None:
    names = {p.id.split("-", 1)[1] for p in _checks()}
    assert names == APPLICABLE
