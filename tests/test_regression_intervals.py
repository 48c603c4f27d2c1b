"""A regression saved as a combination gives an 80 % interval that covers about 80 % of new
rows: the mixture of its members' densities is widened or narrowed about its median by a
factor fit on held-out outputs (split-conformal), in `predict_quantiles` as in the export."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import TINY_SEARCH

import sgem


def _skewed(seed: int, n: int) -> pd.DataFrame:
    """A positive, right-skewed target whose spread grows with its level (visits, prices)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (n, 3))
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2]})
    frame["spend"] = np.exp(0.3 + 0.8 * x[:, 0] - 0.5 * x[:, 1]) * rng.lognormal(0, 0.8, n)
    return frame


def test_a_regression_combinations_interval_covers_80_percent_of_new_rows(tmp_path) -> None:
    """Without its width factor (as saved before it was fit, and `calibrated=False` now)
    this combination's interval covers 0.92 of new rows: its members' Normals, each as wide
    as its out-of-fold RMSE, mixed."""
    config = {"search": dict(TINY_SEARCH)}
    model = sgem.fit(
        _skewed(0, 800), target="spend", out=tmp_path / "run", progress=False, config=config
    )
    mix = model.combination
    assert mix is not None and mix.interval_scale != 1.0 and mix.width_factors is not None
    new = _skewed(1, 3000)
    q = model.predict_quantiles(new.drop(columns="spend"), (0.1, 0.5, 0.9))
    y = new["spend"].to_numpy()
    assert 0.74 <= np.mean((y >= q[0.1]) & (y <= q[0.9])) <= 0.86
    assert np.all(q[0.1] <= q[0.5]) and np.all(q[0.5] <= q[0.9])
    # per fifth of the predictions too (one factor for all rows: 0.99 of the lowest fifth
    # covered, 0.35 of the highest; the factor per bin of the prediction: 0.83 and 0.74)
    inside = (y >= q[0.1]) & (y <= q[0.9])
    fifth = pd.qcut(model.predict(new.drop(columns="spend")), 5, labels=False)
    assert all(0.65 <= inside[fifth == k].mean() <= 0.92 for k in range(5))
    raw = model.predict_quantiles(new.drop(columns="spend"), (0.1, 0.9), calibrated=False)
    assert np.mean((y >= raw[0.1]) & (y <= raw[0.9])) > 0.88  # the mixture as it mixes
    saved = model.result["leaderboard"]["rows"][-1]
    assert (
        saved["model"] == "saved model (combination)" and "bins of the prediction" in saved["note"]
    )
    assert 0.7 <= saved["holdout"]["coverage_80"] <= 0.9


def test_width_factors_are_fit_per_bin_of_the_prediction_and_checked_on_load() -> None:
    """Predictions whose errors grow with them: a factor per bin of the prediction makes
    each bin's interval cover 80 %; too few rows for two bins give none; a saved state whose
    bins do not hold together is refused."""
    from sgem.moe.combination import Combination
    from sgem.moe.interval_width import binned_spreads

    rng = np.random.default_rng(0)
    point = rng.uniform(1, 10, 5000)
    y = point + rng.normal(0, 1, 5000) * point / 5  # the error's scale grows with the point
    q = {0.1: point - 1.2816, 0.5: point, 0.9: point + 1.2816}  # one width for every row
    bins = binned_spreads(q, y, point, min_rows=50)
    assert bins is not None and len(bins[1]) == 5 and bins[1][0] < bins[1][-1]
    at = np.searchsorted(bins[0], point, side="right")
    factor = np.asarray(bins[1])[at]
    inside = np.abs(y - point) <= factor * 1.2816
    assert all(abs(inside[at == b].mean() - 0.8) < 0.02 for b in range(5))
    assert binned_spreads({k: v[:90] for k, v in q.items()}, y[:90], point[:90], 50) is None
    state = {"weights": [1.0], "names": [], "members": [], "scales": [], "loss": "student_t"}
    with pytest.raises(ValueError, match="width_edges"):
        Combination.from_state({**state, "width_edges": [2.0, 1.0], "width_factors": [1, 1, 1]}, {})
    with pytest.raises(ValueError, match="width_edges"):
        Combination.from_state({**state, "width_edges": [1.0], "width_factors": [1.0]}, {})
