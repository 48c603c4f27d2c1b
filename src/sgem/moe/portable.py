"""Fitted scikit-learn models as plain data, predicted with numpy (gradient boosting's trees:
scikit-learn's compiled walk over the checked arrays where it is there, `portable_compiled`).

A saved sgem model must be safe to load: weights as safetensors, metadata as JSON, and never
pickle or any other code execution at load time. Pickling a scikit-learn estimator would break
that, so `export` reads the fitted internals of the few supported estimators into a JSON-safe
``state`` dict plus named float64 / int64 arrays, and `PortableModel.from_state` checks every
field of them (dtypes, shapes, finite values, every child and feature index) before predicting
with vectorised numpy: a tampered file raises ValueError, never an IndexError or an endless loop.

Supported: LogisticRegression (binary, multinomial, one-vs-rest), Ridge, and
HistGradientBoostingClassifier / HistGradientBoostingRegressor (squared error, numeric splits).
"""

from __future__ import annotations

import numpy as np

from .portable_compiled import compiled_leaf_values, compiled_trees

FORMAT = "sgem.portable/1"
KINDS = ("logistic", "ridge", "hgb_classifier", "hgb_regressor")
SUPPORTED = (
    "LogisticRegression",
    "Ridge",
    "HistGradientBoostingClassifier",
    "HistGradientBoostingRegressor(loss='squared_error')",
)
NODE_FLOAT = ("value", "num_threshold")
NODE_INT = ("feature_idx", "missing_go_to_left", "left", "right", "is_leaf")
#: the arrays `export` gives (`PortableModel.from_state` derives others from them)
EXPORTED = ("coef", "intercept", "tree_offsets", *NODE_FLOAT, *NODE_INT)
_CHUNK = 1 << 22  # rows x trees of node indices held at once while traversing
#: the largest gradient boosting baseline a saved member may hold: a log-odds of class
#: frequencies or the mean of a standardised target is far inside it. Why: model.json has
#: no checksum, and a baseline edited to 1e308 loaded and predicted NaN probabilities
#: (benchmarks/fuzz_loaders.py)
MAX_BASELINE = 1e6


def _classes(model) -> list:
    out = []
    for c in np.asarray(model.classes_).tolist():
        if type(c) not in (int, str):
            raise ValueError(f"class labels must be int or str, got {type(c).__name__} {c!r}")
        out.append(c)
    return out


def export(model) -> tuple[dict, dict[str, np.ndarray]]:
    """(JSON-safe state, named float64/int64 arrays) of a fitted supported estimator, or of
    a `PortableModel` (one read back from a run directory: `sgem.run.kept_references`)."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.linear_model import LogisticRegression, Ridge

    if isinstance(model, PortableModel):  # (less what `from_state` derived from them)
        return dict(model.state), {k: a for k, a in model.arrays.items() if k in EXPORTED}
    name = type(model).__name__
    if type(model) not in (
        LogisticRegression,
        Ridge,
        HistGradientBoostingClassifier,
        HistGradientBoostingRegressor,
    ):
        raise ValueError(f"cannot export {name}: supported are {', '.join(SUPPORTED)}")
    if not hasattr(model, "n_features_in_"):
        raise ValueError(f"cannot export an unfitted {name}")
    state: dict = {"format": FORMAT, "n_features": int(model.n_features_in_)}
    if isinstance(model, (LogisticRegression, Ridge)):
        coef = np.asarray(model.coef_, dtype=np.float64)
        state["output_ndim"] = coef.ndim
        coef = np.atleast_2d(coef)
        intercept = np.broadcast_to(np.asarray(model.intercept_, np.float64), coef.shape[:1])
        arrays = {"coef": coef.copy(), "intercept": intercept.copy()}
        if isinstance(model, Ridge):
            state["kind"] = "ridge"
            return state, arrays
        # sklearn >= 1.8 has no multi_class: multiclass is then always multinomial (softmax)
        mc = getattr(model, "multi_class", "multinomial")
        ovr = mc == "ovr" or (mc == "auto" and model.solver == "liblinear")
        state.update(
            kind="logistic", classes=_classes(model), multiclass=("ovr" if ovr else "softmax")
        )
        return state, arrays
    if model.is_categorical_ is not None and np.any(model.is_categorical_):
        raise ValueError(f"cannot export {name} fitted with categorical_features")
    if isinstance(model, HistGradientBoostingRegressor):
        if model.loss != "squared_error":
            raise ValueError(f"cannot export {name} with loss={model.loss!r}: only squared_error")
        state["kind"] = "hgb_regressor"
    else:
        state.update(kind="hgb_classifier", classes=_classes(model))
    trees = [p.nodes for it in model._predictors for p in it]
    if any(t["is_categorical"].any() for t in trees):
        raise ValueError(f"cannot export {name}: it has categorical splits")
    state.update(
        n_iterations=len(model._predictors),
        n_trees_per_iteration=int(model.n_trees_per_iteration_),
        baseline=[float(b) for b in np.ravel(model._baseline_prediction)],
    )
    nodes = np.concatenate(trees)
    arrays = {k: nodes[k].astype(np.float64) for k in NODE_FLOAT}
    arrays.update({k: nodes[k].astype(np.int64) for k in NODE_INT})
    arrays["tree_offsets"] = np.cumsum([0] + [len(t) for t in trees], dtype=np.int64)
    return state, arrays


def _array(arrays: dict, name: str, dtype, shape: tuple | None = None) -> np.ndarray:
    if name not in arrays:
        raise ValueError(f"missing array {name!r}")
    a = arrays[name]
    if not isinstance(a, np.ndarray) or a.dtype != dtype:
        raise ValueError(f"array {name!r} must be a {np.dtype(dtype)} ndarray")
    if shape is not None and a.shape != shape:
        raise ValueError(f"array {name!r} has shape {a.shape}, expected {shape}")
    if dtype == np.float64 and name != "num_threshold" and not np.all(np.isfinite(a)):
        raise ValueError(f"array {name!r} has non-finite values")
    return a


def _int(state: dict, key: str, low: int = 1) -> int:
    v = state.get(key)
    if type(v) is not int or v < low:
        raise ValueError(f"state[{key!r}] must be an int >= {low}, got {v!r}")
    return v


class PortableModel:
    """Predictions of an exported model from its state and arrays."""

    def __init__(self, state: dict, arrays: dict[str, np.ndarray]):
        self.state, self.arrays = state, arrays
        self.kind: str = state["kind"]
        self.n_features: int = state["n_features"]
        self.classes: list | None = state.get("classes")
        self._trees: list[np.ndarray] | None = None  # (`_leaf_values`)

    @classmethod
    def from_state(cls, state: dict, arrays: dict[str, np.ndarray]) -> PortableModel:
        """Validate `state` / `arrays` fully (ValueError naming the problem) and wrap them."""
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(f"state must be a dict with format {FORMAT!r}")
        kind = state.get("kind")
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}: expected one of {KINDS}")
        nf = _int(state, "n_features")
        classes: list = state.get("classes") or []
        if kind in ("logistic", "hgb_classifier"):
            if (
                not isinstance(classes, list)
                or len(classes) < 2
                or len(set(classes)) != len(classes)
            ):
                raise ValueError("state['classes'] must list at least 2 distinct labels")
            if not (all(type(c) is int for c in classes) or all(type(c) is str for c in classes)):
                raise ValueError("state['classes'] must be all ints or all strs")
        out: dict[str, np.ndarray] = {}
        if kind in ("logistic", "ridge"):
            coef = out["coef"] = _array(arrays, "coef", np.float64)
            if coef.ndim != 2 or coef.shape[1] != nf or coef.shape[0] < 1:
                raise ValueError(f"array 'coef' has shape {coef.shape}, expected (k, {nf})")
            out["intercept"] = _array(arrays, "intercept", np.float64, coef.shape[:1])
            if state.get("output_ndim") not in (1, 2) or (
                state["output_ndim"] == 1 and coef.shape[0] != 1
            ):
                raise ValueError("state['output_ndim'] must be 1 (one coef row) or 2")
            if kind == "logistic":
                if state.get("multiclass") not in ("softmax", "ovr"):
                    raise ValueError("state['multiclass'] must be 'softmax' or 'ovr'")
                if coef.shape[0] != (1 if len(classes) == 2 else len(classes)):
                    raise ValueError(f"{coef.shape[0]} coef rows for {len(classes)} classes")
            return cls(state, out)
        k = _int(state, "n_trees_per_iteration")
        n_trees = _int(state, "n_iterations", 0) * k
        if k != (1 if kind == "hgb_regressor" or len(classes) == 2 else len(classes)):
            raise ValueError(f"n_trees_per_iteration={k} does not match the classes")
        base = state.get("baseline")
        if (
            not isinstance(base, list)
            or len(base) != k
            or not all(type(b) is float and abs(b) <= MAX_BASELINE for b in base)
        ):
            raise ValueError(f"state['baseline'] must list {k} floats within +-{MAX_BASELINE:g}")
        offsets = out["tree_offsets"] = _array(arrays, "tree_offsets", np.int64, (n_trees + 1,))
        if offsets[0] != 0 or np.any(np.diff(offsets) < 1):
            raise ValueError("array 'tree_offsets' must start at 0 and strictly increase")
        n = int(offsets[-1])
        for name in NODE_FLOAT:
            out[name] = _array(arrays, name, np.float64, (n,))
        for name in NODE_INT:
            out[name] = _array(arrays, name, np.int64, (n,))
        threshold = out["num_threshold"]  # +inf: scikit-learn's split on missing values
        if np.any(np.isnan(threshold) | (threshold == -np.inf)):
            raise ValueError("array 'num_threshold' has NaN or -inf values")
        for name in ("missing_go_to_left", "is_leaf"):
            if np.any((out[name] != 0) & (out[name] != 1)):
                raise ValueError(f"array {name!r} must hold only 0 and 1")
        split = out["is_leaf"] == 0
        if np.any((out["feature_idx"][split] < 0) | (out["feature_idx"][split] >= nf)):
            raise ValueError(f"array 'feature_idx' has a split feature outside [0, {nf})")
        out["feature_safe"] = np.where(split, out["feature_idx"], 0)  # leaves: never read
        local = np.arange(n) - np.repeat(offsets[:-1], np.diff(offsets))
        size = np.repeat(np.diff(offsets), np.diff(offsets))
        for name in ("left", "right"):
            c = out[name][split]
            # children after their parent (sklearn's preorder) also rules out any cycle
            if np.any((c <= local[split]) | (c >= size[split])):
                raise ValueError(f"array {name!r} has a child index outside its tree")
            out[name + "_global"] = out[name] + (np.arange(n) - local)
        return cls(state, out)

    def _check_x(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"x must have shape (n, {self.n_features}), got {x.shape}")
        return x

    def _leaf_values(self, x: np.ndarray) -> np.ndarray:
        """(n_rows, n_trees) value of the leaf each row reaches in each tree: scikit-learn's
        compiled traversal (`compiled_leaf_values`) where it is there, else numpy. numpy goes
        one tree level per pass, over the (row, tree) pairs not yet at a leaf only: a
        40 000-row table's 300 trees took 7.1 s when every pair was carried to the deepest
        level."""
        if self._trees is None:  # (once per loaded model; [] where it is not available)
            self._trees = compiled_trees(self.arrays) or []
        compiled = compiled_leaf_values(self._trees, x) if self._trees else None
        return compiled if compiled is not None else self._numpy_leaf_values(x)

    def _numpy_leaf_values(self, x: np.ndarray) -> np.ndarray:
        a = self.arrays
        starts = a["tree_offsets"][:-1]
        n_trees = len(starts)
        out = np.empty((len(x), n_trees))
        step = max(1, _CHUNK // max(1, n_trees))
        for lo in range(0, len(x), step):
            xs = x[lo : lo + step]
            idx = np.tile(starts, len(xs))  # pair (row r, tree t) at r * n_trees + t
            live = np.flatnonzero(a["is_leaf"][idx] == 0)
            while live.size:  # depth is bounded: children come after their parent
                node = idx[live]
                v = xs[live // n_trees, a["feature_safe"][node]]
                left = np.where(
                    np.isnan(v), a["missing_go_to_left"][node] == 1, v <= a["num_threshold"][node]
                )
                nxt = np.where(left, a["left_global"][node], a["right_global"][node])
                idx[live] = nxt
                live = live[a["is_leaf"][nxt] == 0]
            out[lo : lo + step] = a["value"][idx].reshape(len(xs), n_trees)
        return out

    def decision(self, x) -> np.ndarray:
        """Raw scores: (n,) for one output / binary, else (n, k)."""
        x = self._check_x(x)
        if self.kind in ("logistic", "ridge"):
            coef, intercept = self.arrays["coef"], self.arrays["intercept"]
            if coef.shape[0] == 1 and (self.kind == "logistic" or self.state["output_ndim"] == 1):
                return x @ coef[0] + intercept[0]
            return x @ coef.T + intercept
        k = self.state["n_trees_per_iteration"]
        leaves = self._leaf_values(x)
        raw = np.tile(np.asarray(self.state["baseline"]), (len(x), 1))
        for i in range(self.state["n_iterations"]):  # sklearn's order of summation
            raw += leaves[:, i * k : (i + 1) * k]
        return raw[:, 0] if k == 1 else raw

    def predict_proba(self, x) -> np.ndarray:
        """(n, n_classes) probabilities, columns in the order of state['classes']."""
        if self.classes is None:
            raise ValueError(f"predict_proba needs a classifier, this is a {self.kind}")
        d = self.decision(x)
        if d.ndim == 1:
            p = 1.0 / (1.0 + np.exp(-d))
            return np.stack([1.0 - p, p], axis=1)
        if self.state.get("multiclass") == "ovr":
            p = 1.0 / (1.0 + np.exp(-d))
            s = p.sum(axis=1, keepdims=True)
            return np.where(s == 0, 1.0 / p.shape[1], p / np.where(s == 0, 1.0, s))
        e = np.exp(d - d.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, x) -> np.ndarray:
        """Regressors: values; classifiers: class labels (argmax of the decision)."""
        d = self.decision(x)
        if self.classes is None:
            return d
        i = (d > 0).astype(np.int64) if d.ndim == 1 else np.argmax(d, axis=1)
        return np.asarray(self.classes)[i]
