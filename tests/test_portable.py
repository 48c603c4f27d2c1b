"""`sgem.moe.portable`: fitted sklearn models as JSON + arrays, predicted with numpy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import load_file, save_file
from sklearn.ensemble import (
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
)
from sklearn.linear_model import LogisticRegression, Ridge
from threadpoolctl import threadpool_limits

from sgem.moe.portable import PortableModel, export

ATOL = 1e-10


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny fits: OpenMP threads only spin on a loaded shared machine
    with threadpool_limits(limits=1):
        yield


def _data(seed: int, n: int = 300, d: int = 5, n_classes: int = 2, nan: float = 0.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    score = x @ rng.normal(size=d) + 0.5 * np.sin(3 * x[:, 0])
    y_reg = score + 0.1 * rng.normal(size=n)
    y_cls = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    if nan:
        x[rng.random(x.shape) < nan] = np.nan
    return x, y_cls, y_reg


def _hgb(cls, **kw):
    return cls(max_iter=15, max_leaf_nodes=8, random_state=0, early_stopping=False, **kw)


CLASSIFIERS = {
    "logistic": lambda: LogisticRegression(max_iter=500),
    "hgb": lambda: _hgb(HistGradientBoostingClassifier),
}
REGRESSORS = {
    "ridge": lambda: Ridge(alpha=0.3),
    "hgb": lambda: _hgb(HistGradientBoostingRegressor),
}


def _check_classifier(model, x, portable=None):
    portable = portable or PortableModel.from_state(*export(model))
    diff = np.abs(portable.predict_proba(x) - model.predict_proba(x)).max()
    assert diff <= ATOL, diff
    assert np.allclose(portable.decision(x), model.decision_function(x), atol=ATOL, rtol=0)
    assert np.array_equal(portable.predict(x), model.predict(x))
    return diff


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_parity(name, n_classes):
    x, y, _ = _data(0, n_classes=n_classes)
    labels = np.array(["ant", "bee", "cat"])[y] if name == "hgb" else y * 10 - 5
    model = CLASSIFIERS[name]().fit(x, labels)
    x_new, _, _ = _data(1, n=200)
    _check_classifier(model, x_new)
    state, _ = export(model)
    assert state["classes"] == sorted(set(labels.tolist()))


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_regressor_parity(name):
    x, _, y = _data(2)
    model = REGRESSORS[name]().fit(x, y)
    x_new, _, _ = _data(3, n=200)
    portable = PortableModel.from_state(*export(model))
    assert np.allclose(portable.predict(x_new), model.predict(x_new), atol=ATOL, rtol=0)
    assert np.allclose(portable.decision(x_new), model.predict(x_new), atol=ATOL, rtol=0)


def test_ridge_multi_target_and_no_intercept():
    x, _, y = _data(4)
    y2 = np.c_[y, -2 * y + 1]
    for model in (
        Ridge().fit(x, y2),
        Ridge(fit_intercept=False).fit(x, y),
        Ridge().fit(x, y2[:, :1]),
    ):
        portable = PortableModel.from_state(*export(model))
        assert portable.predict(x).shape == model.predict(x).shape
        assert np.allclose(portable.predict(x), model.predict(x), atol=ATOL, rtol=0)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_hgb_missing_values_routed_like_sklearn(n_classes):
    x, y, y_reg = _data(5, n=400, n_classes=n_classes, nan=0.15)
    _check_classifier(_hgb(HistGradientBoostingClassifier).fit(x, y), x)
    reg = _hgb(HistGradientBoostingRegressor).fit(x, y_reg)
    assert np.allclose(PortableModel.from_state(*export(reg)).predict(x), reg.predict(x), atol=ATOL)
    _, arrays = export(reg)
    assert arrays["missing_go_to_left"][arrays["is_leaf"] == 0].any()


def _round_trip(model, tmp_path):
    state, arrays = export(model)
    state2 = json.loads(json.dumps(state))
    save_file(arrays, str(tmp_path / "m.safetensors"))
    return PortableModel.from_state(state2, load_file(str(tmp_path / "m.safetensors")))


@pytest.mark.parametrize(
    "make",
    [
        lambda: LogisticRegression(max_iter=500),
        lambda: _hgb(HistGradientBoostingClassifier),
        lambda: Ridge(),
        lambda: _hgb(HistGradientBoostingRegressor),
    ],
)
def test_json_and_safetensors_round_trip_identical(make, tmp_path):
    x, y, y_reg = _data(6, n_classes=3)
    model = make()
    model.fit(x, y_reg if "Regressor" in type(model).__name__ or type(model) is Ridge else y)
    before = PortableModel.from_state(*export(model))
    after = _round_trip(model, tmp_path)
    assert np.array_equal(before.decision(x), after.decision(x))
    assert np.array_equal(before.predict(x), after.predict(x))
    if before.classes is not None:
        assert np.array_equal(before.predict_proba(x), after.predict_proba(x))


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(20, 120),
    d=st.integers(1, 6),
    n_classes=st.integers(2, 4),
)
def test_property_hgb_classifier_parity(seed, n, d, n_classes):
    x, y, _ = _data(seed, n=n, d=d, n_classes=n_classes)
    if len(np.unique(y)) < 2:
        return
    model = HistGradientBoostingClassifier(max_iter=5, min_samples_leaf=3, random_state=0)
    _check_classifier(model.fit(x, y), _data(seed + 1, n=50, d=d)[0])


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(10, 80), d=st.integers(1, 8))
def test_property_logistic_parity(seed, n, d):
    x, y, _ = _data(seed, n=n, d=d, n_classes=3)
    if len(np.unique(y)) < 2:
        return
    _check_classifier(LogisticRegression(max_iter=200).fit(x, y), x)


@pytest.fixture(scope="module")
def hgb_export():
    x, y, _ = _data(7, n_classes=3)
    return export(_hgb(HistGradientBoostingClassifier).fit(x, y))


def _tampered(hgb_export, name, fn):
    state, arrays = hgb_export
    arrays = {k: v.copy() for k, v in arrays.items()}
    arrays[name] = fn(arrays[name], arrays["is_leaf"] == 0)
    return state, arrays


def _first(mask):
    return int(np.flatnonzero(mask)[0])


@pytest.mark.parametrize(
    ("name", "fn", "match"),
    [
        ("left", lambda a, s: (a.__setitem__(_first(s), 10**6), a)[1], "child index"),
        ("right", lambda a, s: (a.__setitem__(_first(s), -1), a)[1], "child index"),
        ("left", lambda a, s: (a.__setitem__(_first(s), 0), a)[1], "child index"),  # a cycle
        ("feature_idx", lambda a, s: (a.__setitem__(_first(s), 5), a)[1], "feature"),
        ("value", lambda a, s: (a.__setitem__(3, np.nan), a)[1], "non-finite"),
        ("num_threshold", lambda a, s: (a.__setitem__(_first(s), np.nan), a)[1], "NaN"),
        ("num_threshold", lambda a, s: (a.__setitem__(_first(s), -np.inf), a)[1], "-inf"),
        ("left", lambda a, s: a.astype(np.int32), "int64"),
        ("value", lambda a, s: a.astype(np.float32), "float64"),
        ("is_leaf", lambda a, s: a[:-1], "shape"),
        ("is_leaf", lambda a, s: a * 2, "0 and 1"),
        ("tree_offsets", lambda a, s: a[::-1].copy(), "tree_offsets"),
    ],
)
def test_tampered_hgb_refused(hgb_export, name, fn, match):
    with pytest.raises(ValueError, match=match):
        PortableModel.from_state(*_tampered(hgb_export, name, fn))


def test_missing_array_and_bad_state_refused(hgb_export):
    state, arrays = hgb_export
    with pytest.raises(ValueError, match="missing array 'right'"):
        PortableModel.from_state(state, {k: v for k, v in arrays.items() if k != "right"})
    for key, bad, match in [
        ("kind", "forest", "unknown kind"),
        ("n_features", -1, "n_features"),
        ("baseline", [float("nan")] * 3, "baseline"),
        ("baseline", [1e308, 0.0, 0.0], "baseline"),  # model.json has no checksum
        ("classes", [0, 1], "n_trees_per_iteration"),
        ("n_iterations", 10**6, "tree_offsets"),
    ]:
        with pytest.raises(ValueError, match=match):
            PortableModel.from_state({**state, key: bad}, arrays)
    x, y, _ = _data(8)
    state, arrays = export(LogisticRegression().fit(x, y))
    with pytest.raises(ValueError, match="coef"):
        PortableModel.from_state(state, {**arrays, "coef": np.ones((1, 4))})
    with pytest.raises(ValueError, match="non-finite"):
        PortableModel.from_state(state, {**arrays, "intercept": np.array([np.inf])})
    with pytest.raises(ValueError, match="missing array 'coef'"):
        PortableModel.from_state(state, {"intercept": arrays["intercept"]})


def test_unsupported_models_refused():
    x, y, y_reg = _data(9)
    with pytest.raises(ValueError, match="supported are LogisticRegression, Ridge"):
        export(RandomForestClassifier(n_estimators=2).fit(x, y))
    with pytest.raises(ValueError, match="unfitted"):
        export(Ridge())
    with pytest.raises(ValueError, match="squared_error"):
        export(_hgb(HistGradientBoostingRegressor, loss="absolute_error").fit(x, y_reg))
    xc = x.copy()
    xc[:, 0] = np.arange(len(x)) % 4
    model = _hgb(HistGradientBoostingClassifier, categorical_features=[0]).fit(xc, y)
    with pytest.raises(ValueError, match="categorical"):
        export(model)
    portable = PortableModel.from_state(*export(Ridge().fit(x, y_reg)))
    with pytest.raises(ValueError, match="classifier"):
        portable.predict_proba(x)
    with pytest.raises(ValueError, match="shape"):
        portable.predict(x[:, :3])


@pytest.mark.parametrize("n_classes", [2, 3])
def test_compiled_and_numpy_tree_walks_agree_and_numpy_answers_without_it(n_classes, monkeypatch):
    """scikit-learn's compiled traversal (`sgem.moe.portable_compiled`) and the numpy walk
    give the same leaf values bit for bit, missing values included; where the compiled one
    is not there (a scikit-learn without it), numpy answers alone."""
    import sgem.moe.portable_compiled as compiled

    x, y, y_reg = _data(7, n=400, n_classes=n_classes, nan=0.15)
    for model in (
        _hgb(HistGradientBoostingClassifier).fit(x, y),
        _hgb(HistGradientBoostingRegressor).fit(x, y_reg),
    ):
        portable = PortableModel.from_state(*export(model))
        walked = compiled.compiled_leaf_values(compiled.compiled_trees(portable.arrays), x)
        assert walked is not None and np.array_equal(walked, portable._numpy_leaf_values(x))
        before = portable.decision(x)
        monkeypatch.setattr(compiled, "_routine", lambda: None)
        alone = PortableModel.from_state(*export(model))
        assert np.array_equal(alone.decision(x), before) and alone._trees == []
        monkeypatch.undo()
