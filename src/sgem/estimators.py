"""scikit-learn estimators around `sgem.fit`: `SgemClassifier` and `SgemRegressor`.

    from sgem import SgemClassifier
    clf = SgemClassifier(time_budget="5m").fit(X_train, y_train)
    clf.predict(X_test); clf.predict_proba(X_test); clf.score(X_test, y_test)
    cross_val_score(make_pipeline(StandardScaler(), SgemClassifier()), X, y)

Why a wrapper rather than a new code path: each `fit` is one ordinary `sgem.fit` of the
in-memory data (a DataFrame keeps its column names, dtypes and categories; an array becomes
features x0..x{d-1}), so the search, the saved model and its column contract are exactly
those of `sgem fit`. The constructor only stores its parameters (scikit-learn's rule, so
`clone`, `GridSearchCV` and `Pipeline` work); the fitted `SgemModel` is `model_`.

`out=None` runs each fit in a fresh temporary directory that is removed once the model is
loaded (the model lives in memory); give `out=` to keep the run directory, with its model
for `sgem predict` (one directory per fit: a second fit on other data there is refused).
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d


def _named(x: Any) -> bool:
    """A DataFrame whose column names are all strings (scikit-learn's rule for names)."""
    return isinstance(x, pd.DataFrame) and all(isinstance(c, str) for c in x.columns)


class _SgemEstimator(BaseEstimator):
    """What the classifier and the regressor share: parameters, fit, input checks."""

    _task_kind: ClassVar[str]

    def __init__(
        self,
        time_budget: str | float | None = None,
        n_experts: int | str | None = None,
        n_clusters: int | None = None,
        seed: int = 0,
        config: dict | None = None,
        out: str | None = None,
        missing: str = "impute",
        progress: bool = False,
    ) -> None:
        self.time_budget = time_budget
        self.n_experts = n_experts
        self.n_clusters = n_clusters
        self.seed = seed
        self.config = config
        self.out = out
        self.missing = missing
        self.progress = progress

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # imputed as learned at fit (missing="impute")
        return tags

    def _targets(self, y: Any) -> np.ndarray:
        return column_or_1d(y, warn=True)

    def fit(self, X: Any, y: Any) -> _SgemEstimator:
        """Search and train an MoE on (X, y): `sgem.fit` of the in-memory data."""
        from .run.fitting import fit

        if _named(X):
            self.feature_names_in_ = np.asarray(X.columns, dtype=object)
            data = X.reset_index(drop=True)
        else:
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            data = check_array(X, ensure_all_finite="allow-nan")
        self.n_features_in_ = data.shape[1]
        y = self._targets(y)
        if len(y) != len(data):
            raise ValueError(f"X has {len(data)} samples but y has {len(y)}")
        out = self.out or tempfile.mkdtemp(prefix="sgem-fit-")
        try:
            model = fit(
                (data, y),
                out=out,
                progress=self.progress,
                n_experts=self.n_experts,
                time_budget=self.time_budget,
                n_clusters=self.n_clusters,
                seed=self.seed,
                config=self.config,
                missing=self.missing,
                task_kind=self._task_kind,
            )
        finally:
            if self.out is None:
                shutil.rmtree(out, ignore_errors=True)
        if self.out is None:
            model.path = None  # its run directory was temporary
        self.model_ = model
        return self

    def _input(self, X: Any) -> Any:
        """X for the model: a named DataFrame as it is (columns matched by name), anything
        else checked as an array of the fitted width."""
        check_is_fitted(self, "model_")
        names = getattr(self, "feature_names_in_", None)
        if names is not None and _named(X):
            return X
        x = check_array(
            X, ensure_all_finite="allow-nan", dtype=None if names is not None else "numeric"
        )
        if x.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {x.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )
        if names is None:
            return x
        warnings.warn(
            f"X has no feature names; its columns are read by position as {list(names)}",
            UserWarning,
            stacklevel=3,
        )
        return pd.DataFrame(x, columns=list(names))


class SgemClassifier(ClassifierMixin, _SgemEstimator):
    """An sgem Mixture-of-Experts classifier (scikit-learn API); see `sgem.estimators`.

    Parameters: `time_budget` (seconds or "10m"), `n_experts` (K, or "auto"),
    `n_clusters` (M; default from the data size), `seed`, `config` (run-config overrides,
    as `sgem.fit(config=...)`), `out` (run directory; None: temporary), `missing`
    ("impute" or "error"), `progress`. Fitted: `model_`, `classes_`, `n_features_in_`,
    `feature_names_in_` (a DataFrame with string column names).
    """

    _task_kind = "classification"

    def _targets(self, y: Any) -> np.ndarray:
        y = super()._targets(y)
        check_classification_targets(y)
        return y

    def fit(self, X: Any, y: Any) -> SgemClassifier:
        super().fit(X, y)
        self.classes_ = np.asarray(self.model_.classes)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (n, n_classes), columns in the order of `classes_`."""
        x = self._input(X)  # first: unfitted -> NotFittedError
        return self.model_.predict_proba(x)

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]


class SgemRegressor(RegressorMixin, _SgemEstimator):
    """An sgem Mixture-of-Experts regressor (Student-t experts; scikit-learn API); same
    parameters as `SgemClassifier`. `predict` gives the point prediction in the target's
    units (the Student-t location; a model saved as a combination: the mixture's mean, its
    weights chosen for that mean's squared error); `predict_quantiles(X, (0.1, 0.9))` its
    quantiles."""

    _task_kind = "regression"

    def _targets(self, y: Any) -> np.ndarray:
        return np.asarray(super()._targets(y), dtype=np.float64)

    def predict(self, X: Any) -> np.ndarray:
        x = self._input(X)
        return np.asarray(self.model_.predict(x), dtype=np.float64)

    def predict_quantiles(self, X: Any, quantiles=(0.1, 0.5, 0.9)) -> dict[float, np.ndarray]:
        x = self._input(X)
        return self.model_.predict_quantiles(x, quantiles)


__all__ = ["SgemClassifier", "SgemRegressor"]
