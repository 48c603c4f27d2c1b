"""Gaps and short histories in a user's series, filled so that no series is refused.

Real collections have holes (an empty value, a timestamp absent from a regular grid) and
series far shorter than a useful context. Refusing a whole file for one hole, or dropping
every short series, loses the series the user most needs forecast. So gaps are filled
(linear interpolation inside a series, the nearest value at its ends) and short histories
are left-padded with their first value. What was filled is remembered as a mask
(`observed`), because a filled value may be *read* (in a context) but must never be
*scored*: training windows whose target holds a filled step are not cut
(`sgem.data.ts_windows.make_windows(observed=...)`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import SgemUserError
from .table_missing import check_policy  # the one `missing` setting of every kind


def fill_gaps(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(filled values, observed mask) of one series.

    NaN inside the series is interpolated linearly between its neighbours; NaN before the
    first or after the last value takes that value (a forecast must not extrapolate a trend
    it only guessed). A series without any value comes back unchanged (all NaN).
    """
    values = np.asarray(values, dtype=np.float64)
    observed = np.isfinite(values)
    if observed.all() or not observed.any():
        return values.copy(), observed
    filled = pd.Series(values).interpolate(limit_area="inside").ffill().bfill()
    return filled.to_numpy(dtype=np.float64), observed


def pad_left(
    values: np.ndarray, observed: np.ndarray, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """Left-pad a filled series to `length` with its first value, marked as not observed
    (the same rule as a gap at the start: the nearest value)."""
    missing = int(length) - len(values)
    if missing <= 0:
        return values, observed
    return (
        np.concatenate([np.full(missing, values[0]), values]),
        np.concatenate([np.zeros(missing, dtype=bool), observed]),
    )


@dataclass
class FilledSeries:
    """Series with their gaps filled (`values`) and what was observed (`observed`).

    `empty` names series without a single value (they cannot be filled and are left out);
    `n_filled` counts the filled values, `with_gaps` the series that had any.
    """

    values: dict[str, np.ndarray] = field(default_factory=dict)
    observed: dict[str, np.ndarray] = field(default_factory=dict)
    empty: list[str] = field(default_factory=list)
    n_filled: int = 0
    with_gaps: int = 0

    def report(self) -> dict:
        """Plain numbers for `task.meta` and messages."""
        return {
            "n_series": len(self.values) + len(self.empty),
            "series_with_gaps": self.with_gaps,
            "values_filled": self.n_filled,
            "series_without_values": list(self.empty),
        }


def refuse_gaps(series: Mapping[str, np.ndarray]) -> None:
    """The `missing="error"` policy: a `SgemUserError` when any series holds NaN."""
    gappy = {n: np.flatnonzero(~np.isfinite(v)) for n, v in series.items()}
    gappy = {n: at for n, at in gappy.items() if len(at)}
    if not gappy:
        return
    name, at = next(iter(gappy.items()))
    total = sum(len(at) for at in gappy.values())
    raise SgemUserError(
        f"{total} missing values in {len(gappy)} of {len(series)} series (the first in series "
        f"{name!r} at step {int(at[0])} of {len(series[name])}); let sgem fill them "
        "(--missing impute, the default) or fill them in the file"
    )


def fill_series(series: Mapping[str, np.ndarray], missing: str = "impute") -> FilledSeries:
    """Fill every series' gaps (`fill_gaps`), or refuse them with `missing="error"`."""
    if check_policy(missing) == "error":
        refuse_gaps(series)
    out = FilledSeries()
    for name, raw in series.items():
        values, observed = fill_gaps(raw)
        if not observed.any():
            out.empty.append(name)
            continue
        out.values[name], out.observed[name] = values, observed
        gaps = int(len(observed) - observed.sum())
        out.n_filled += gaps
        out.with_gaps += gaps > 0
    return out


__all__ = [
    "FilledSeries",
    "fill_gaps",
    "fill_series",
    "pad_left",
    "refuse_gaps",
]
