"""A regression saved as a combination gives an 80 % interval that covers about 80 % of new
rows: the mixture of its members' densities is widened or narrowed about its median by a
factor fit on held-out outputs (split-conformal), in `predict_quantiles` as in the export."""

from __future__ import annotations

import numpy as np
import pandas as pd
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
    assert mix is not None and mix.interval_scale != 1.0
    new = _skewed(1, 3000)
    q = model.predict_quantiles(new.drop(columns="spend"), (0.1, 0.5, 0.9))
    y = new["spend"].to_numpy()
    assert 0.74 <= np.mean((y >= q[0.1]) & (y <= q[0.9])) <= 0.86
    assert np.all(q[0.1] <= q[0.5]) and np.all(q[0.5] <= q[0.9])
    raw = model.predict_quantiles(new.drop(columns="spend"), (0.1, 0.9), calibrated=False)
    assert np.mean((y >= raw[0.1]) & (y <= raw[0.9])) > 0.88  # the mixture as it mixes
    saved = model.result["leaderboard"]["rows"][-1]
    assert saved["model"] == "saved model (combination)" and "interval width x" in saved["note"]
    assert 0.7 <= saved["holdout"]["coverage_80"] <= 0.9
