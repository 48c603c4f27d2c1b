"""Naive forecast: the last value, with a random-walk Student-t spread.

loc_h = x_L for every step h; scale_h = a * s * sqrt(h) with s the root-mean-square of the
one-step differences inside the context (a random walk's spread grows like sqrt(h)); the
multiplier a and the degrees of freedom are the only fitted quantities, chosen by a grid
search on the train + validation NLL (`fit_spread`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # (torch at import: the processes refitting AutoETS / AutoTheta need none)
    from ..data.task import ClusteredTask
    from ..methods.budget import MethodBudget
    from ..methods.result import MethodResult

#: Grids of the two fitted quantities (spread multiplier, degrees of freedom).
MULTIPLIERS = tuple(float(v) for v in np.geomspace(0.05, 4.0, 24))
DFS = (2.1, 2.5, 3.0, 4.0, 6.0, 10.0, 30.0)
MIN_SPREAD = 1e-3
#: the Student-t df that stands for a Normal predictive (a scikit-learn member's, a
#: classical forecaster's): its 1 % and 99 % quantiles are 0.16 % wider than the Normal's
NORMAL_DF = 1000.0


def fit_spread(loc: np.ndarray, base: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(a, df) minimising the mean Student-t NLL of y under loc, a * base, df (grid search)."""
    import torch

    from ..forecast import student_t_nll

    loc_t, base_t, y_t = (torch.as_tensor(v, dtype=torch.float64) for v in (loc, base, y))
    best = (np.inf, 1.0, 3.0)
    for a in MULTIPLIERS:
        for df in DFS:
            nll = float(student_t_nll(loc_t, a * base_t, torch.tensor(df), y_t).mean())
            if nll < best[0]:
                best = (nll, a, df)
    return best[1], best[2]


def random_walk_spread(x: np.ndarray, horizon: int) -> np.ndarray:
    """(B, H): RMS of the context's one-step differences times sqrt(h)."""
    s = np.sqrt(np.mean(np.diff(x, axis=1) ** 2, axis=1))
    s = np.maximum(s, MIN_SPREAD)
    return s[:, None] * np.sqrt(np.arange(1, horizon + 1))[None, :]


class SpreadForecaster:
    """A fixed point forecast with a base spread; only the spread multiplier and the degrees
    of freedom are fitted (`fit_spread`, on train + validation). Subclasses give `forecast`."""

    name = "spread_forecaster"
    uses_domain_labels = False

    def forecast(self, x: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """(loc, base spread), each (B, H), from contexts x (B, L)."""
        raise NotImplementedError

    def fit_evaluate(self, task: ClusteredTask, budget: MethodBudget) -> MethodResult:
        from .base import forecast_result, require_forecasting, student_t_output, train_and_val

        require_forecasting(task, self.name)
        start = time.perf_counter()
        x, y = train_and_val(task)
        horizon = y.shape[1]
        a, df = fit_spread(*self.forecast(x, horizon), y)
        xt = task.test.x.reshape(len(task.test), -1).astype(np.float64)
        loc, base = self.forecast(xt, horizon)
        out = student_t_output(loc, a * base, np.full_like(loc, df))
        return forecast_result(
            self.name, budget, out, start, {"fitted": {"multiplier": a, "df": df}}
        )


class Naive(SpreadForecaster):
    """Last value, random-walk Student-t spread."""

    name = "naive"

    def forecast(self, x: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        return np.repeat(x[:, -1:], horizon, 1), random_walk_spread(x, horizon)
