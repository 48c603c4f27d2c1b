"""What `SgemModel.forecast` returns: per series and step, the predictive distribution,
its quantiles and who forecast it, with a long-format table for pandas users."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SgemUserError


@dataclass(frozen=True)
class Forecast:
    """Per series and forecast step, in the series' original units.

    `loc`, `scale`, `df`: the Student-t (location, scale, degrees of freedom; a saved
    combination's `scale` and `df` are NaN, its `loc` the mixture's median); `point`: its
    median (= loc); `quantiles`: {q: (n, horizon)}; `cluster`, `expert`: who forecast it.
    """

    loc: np.ndarray
    scale: np.ndarray
    df: np.ndarray
    quantiles: dict[float, np.ndarray]
    cluster: np.ndarray
    expert: np.ndarray

    @property
    def point(self) -> np.ndarray:
        return self.loc

    @property
    def mean(self) -> np.ndarray:
        return self.loc  # df > 2, so the mean exists and equals the location

    def to_frame(self, ids: Sequence[Any] | None = None, ds: Any = None):
        """Long format (one row per series and step): unique_id, ds, step, forecast, the
        quantile columns q0.1 ..., loc/scale/df, expert, cluster.

        `ds` gives the time of every forecast: an (n, horizon) array-like (dates or
        integers), or a flat sequence of n * horizon in row order; None: ds is the step
        number 1..horizon (the times are unknown), as `step` always is.
        """
        import pandas as pd

        n, h = self.loc.shape
        ids = list(range(n)) if ids is None else list(ids)
        if len(ids) != n:
            raise SgemUserError(f"to_frame: {len(ids)} ids for {n} forecast series")
        steps = np.tile(np.arange(1, h + 1), n)
        if ds is None:
            times: Any = steps
        else:
            times = np.asarray(ds).reshape(-1)
            if len(times) != n * h:
                raise SgemUserError(
                    f"to_frame: ds holds {len(times)} times for {n} series x {h} steps; give "
                    "one time per series and step"
                )
        cols: dict[str, Any] = {
            "unique_id": np.repeat(np.asarray(ids, dtype=object), h),
            "ds": times,
            "step": steps,
            "forecast": self.point.reshape(-1),
        }
        for q, v in self.quantiles.items():
            cols[f"q{q:g}"] = v.reshape(-1)
        cols.update(
            loc=self.loc.reshape(-1),
            scale=self.scale.reshape(-1),
            df=self.df.reshape(-1),
            expert=np.repeat(self.expert, h),
            cluster=np.repeat(self.cluster, h),
        )
        return pd.DataFrame(cols)


__all__ = ["Forecast"]
