"""scikit-learn's and statsmodels' bundled tables as a user meets them: a seeded 80 / 20
split written as CSV files (the fit sees the 80 % only), and what a scikit-learn user fits in
seconds on the same rows, scored on the same 20 % (`benchmarks/leaderboard.py`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

#: scikit-learn's bundled tables: the issue's three, and two small ones (178 and 150 rows:
#: a 20 % test of 36 and 30 rows, where one row is 2.8 and 3.3 points of accuracy)
TABLES = ("breast_cancer", "digits", "diabetes", "wine", "iris")
#: statsmodels' bundled tables, none of which any choice in sgem was made on: extramarital
#: affairs (any: yes / no, 6366 rows), party identification (7 classes, 944 rows), firms'
#: investment (220 rows, the firm a category), the share of a school's pupils above the
#: median (303 rows), visits to a doctor (a skewed count, 20 190 rows), households' food
#: spending from their skewed income (235 rows), US states' violent crime rate (51 rows)
STATSMODELS_TABLES = ("fair", "anes96", "grunfeld", "star98", "randhie", "engel", "statecrime")
#: large tables (no shared file has one): 200 000 seeded rows of scikit-learn's
#: `make_classification` (30 numbers, 3 classes of 3 clusters each), two text columns and
#: 5 % of one column missing; 600 000 rows of 54 numbers and 7 classes (a forest-cover
#: table's size) - whether a fit of a few minutes keeps its budget and its search
LARGE_TABLES = ("classification_200k", "classification_600k")
#: which of them are classification tasks
CLASSES = {"breast_cancer", "digits", "wine", "iris", "fair", "anes96", *LARGE_TABLES}


def frame_of(name: str):
    """Table `name` as a DataFrame with its target in column "target"."""
    if name in TABLES:
        from sklearn import datasets

        return getattr(datasets, f"load_{name}")(as_frame=True).frame
    if name in LARGE_TABLES:
        return _large_table(name)
    from statsmodels import datasets as sm

    data = getattr(sm, name).load_pandas().data
    if name == "fair":
        return data.assign(target=(data.pop("affairs") > 0).astype(int))
    if name == "anes96":
        return data.assign(target=data.pop("PID").astype(int))
    if name == "grunfeld":
        return data.assign(target=data.pop("invest"))
    if name == "star98":
        above, below = data.pop("NABOVE"), data.pop("NBELOW")
        return data.assign(target=above / (above + below))
    if name == "randhie":
        return data.assign(target=data.pop("mdvis"))
    if name == "engel":
        return data.assign(target=data.pop("foodexp"))
    if name == "statecrime":
        return data.assign(target=data.pop("violent"))
    raise ValueError(f"unknown table {name!r}: one of {TABLES + STATSMODELS_TABLES + LARGE_TABLES}")


def _large_table(name: str):
    """`LARGE_TABLES`' table `name`: seeded rows of `make_classification` (the 200 000-row
    one with two text columns and missing values as well)."""
    import pandas as pd
    from sklearn.datasets import make_classification

    if name == "classification_600k":
        x, y = make_classification(
            n_samples=600_000, n_features=54, n_informative=20, n_redundant=6, n_classes=7,
            n_clusters_per_class=2, class_sep=1.0, random_state=1,
        )  # fmt: skip
        return pd.DataFrame(x, columns=[f"x{i}" for i in range(x.shape[1])]).assign(target=y)
    x, y = make_classification(
        n_samples=200_000, n_features=30, n_informative=12, n_redundant=6, n_classes=3,
        n_clusters_per_class=3, class_sep=0.8, random_state=0,
    )  # fmt: skip
    frame = pd.DataFrame(x, columns=[f"x{i}" for i in range(x.shape[1])])
    rng = np.random.default_rng(0)
    other = rng.choice(["c", "d", "e"], len(frame))
    frame["city"] = np.where(x[:, 0] > 0.5, "a", np.where(x[:, 1] > 0, "b", other))
    frame["plan"] = rng.choice(["basic", "plus", "pro", "max"], len(frame))
    frame.loc[rng.random(len(frame)) < 0.05, "x3"] = np.nan
    return frame.assign(target=y)


def tables(runs: Path, seed: int, names: tuple[str, ...] = TABLES) -> dict[str, tuple[Path, Path]]:
    """(train CSV, test CSV) per table of `names`: 80 / 20, stratified for classes, seeded.
    The test rows are the user's own: no part of the fit sees them."""
    from sklearn.model_selection import train_test_split

    runs.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in names:
        frame = frame_of(name)
        classes = frame["target"] if name in CLASSES else None
        train, test = train_test_split(frame, test_size=0.2, random_state=seed, stratify=classes)
        paths[name] = (runs / f"{name}-{seed}-train.csv", runs / f"{name}-{seed}-test.csv")
        train.to_csv(paths[name][0], index=False)
        test.to_csv(paths[name][1], index=False)
    return paths


def scikit_learn(train, test, classes: bool, seed: int) -> dict[str, float]:
    """What a scikit-learn user fits in seconds, scored on the same test rows: text columns
    one-hot encoded and missing numbers imputed by their mean for the linear model,
    categories and missing values of gradient boosting's own."""
    from sklearn.compose import make_column_transformer
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    x, y = train.drop(columns="target"), train["target"]
    xt, yt = test.drop(columns="target"), test["target"]
    text = [c for c in x.columns if x[c].dtype == object]
    numbers = [c for c in x.columns if c not in text]
    encode = make_column_transformer(
        (make_pipeline(SimpleImputer(), StandardScaler()), numbers),
        (OneHotEncoder(handle_unknown="ignore"), text),
    )
    linear = LogisticRegression(max_iter=2000) if classes else Ridge(alpha=1.0)
    boosting = (HistGradientBoostingClassifier if classes else HistGradientBoostingRegressor)(
        random_state=seed, categorical_features="from_dtype"
    )
    as_category = {c: "category" for c in text}
    xb, xtb = x.astype(as_category), xt.astype(as_category)
    for c in text:  # the test's categories as the training's
        xtb[c] = xtb[c].cat.set_categories(xb[c].cat.categories)
    models = {
        ("logistic regression" if classes else "ridge regression"): (
            make_pipeline(encode, linear),
            x,
            xt,
        ),
        "gradient boosting": (boosting, xb, xtb),
    }
    out = {}
    for name, (model, fit_x, test_x) in models.items():
        pred = model.fit(fit_x, y).predict(test_x)
        out[name] = metric(yt.to_numpy(), np.asarray(pred), classes)
    return out


def metric(y, pred, classes: bool) -> float:
    if classes:
        return float(np.mean(y == pred))
    return float(np.sqrt(np.mean((y - pred.astype(np.float64)) ** 2)))


def interval_coverage(model, x, y) -> dict:
    """A saved regression's 80 % interval on these rows: the share inside it as saved and
    in each fifth of the rows by their prediction (lowest first), and (a combination) the
    same before its width is fit on held-out outputs (`predict_quantiles(calibrated=False)`)
    and with one width factor for every row instead of one per bin of the prediction, side
    by side from one fit."""
    import pandas as pd

    fifth = pd.qcut(np.asarray(model.predict(x)), 5, labels=False, duplicates="drop")

    def covered(calibrated: bool, name: str) -> dict:
        q = model.predict_quantiles(x, (0.1, 0.9), calibrated=calibrated)
        inside = (y >= q[0.1]) & (y <= q[0.9])
        by = [round(float(inside[fifth == k].mean()), 3) for k in np.unique(fifth)]
        return {name: float(inside.mean()), f"{name}_by_fifth": by}

    out = covered(True, "saved_coverage_80")
    mix = model.combination
    if mix is not None:
        out |= covered(False, "unfitted_width_coverage_80")
        out |= {"interval_scale": mix.interval_scale, "width_factors": mix.width_factors}
        if mix.width_factors is not None:  # the one factor for all rows instead of the bins
            model.combination = replace(mix, width_edges=None, width_factors=None)
            try:
                out |= covered(True, "one_factor_coverage_80")
            finally:
                model.combination = mix
    return out


__all__ = [
    "CLASSES",
    "LARGE_TABLES",
    "STATSMODELS_TABLES",
    "TABLES",
    "frame_of",
    "interval_coverage",
    "metric",
    "scikit_learn",
    "tables",
]
