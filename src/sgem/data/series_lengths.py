"""Whether series are long enough to train on: `check_series_lengths` says which are, and
for the others names the flag (with a value that fits) that makes them long enough."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import SgemUserError
from .files_series import SeriesData

log = logging.getLogger(__name__)


def _length_hint(shortest: int, horizon: int, pad: bool) -> tuple[str, bool]:
    """What makes a series of `shortest` values fit (a context needs >= 2 values, a padded
    one >= 1 past value), and whether that is a flag (else: drop the series)."""
    past = 1 if pad else 2
    if shortest - horizon >= past:
        fits = shortest - horizon
        return (
            f"use a context of at most {fits}: --context {fits} (the shortest length minus "
            "the horizon)"
        ), True
    if shortest > past:
        return f"use --horizon {shortest - past} or less (the shortest length minus {past})", True
    return f"drop the series with fewer than {past + 1} values", False


def check_series_lengths(
    series: SeriesData | Mapping[str, np.ndarray] | Sequence[np.ndarray],
    context: int,
    horizon: int,
    *,
    drop_short: bool = False,
    pad: bool = False,
) -> list[str]:
    """The names of the series long enough to be trained on.

    Without `pad` a series needs one window of `context + horizon` values; with `pad`
    (short histories are left-padded, `sgem.data.series_gaps.pad_left`) it needs more than
    `horizon` values (one past value before a full target). A series too short raises
    `SgemUserError` saying how many are too short, the shortest length and the flag (with
    a value that fits) that fixes it; with `drop_short=True` the short series are left out
    (a warning is logged) and only having none left raises.
    """
    if isinstance(series, SeriesData):
        series = series.series
    if not isinstance(series, Mapping):
        series = {str(i): s for i, s in enumerate(series)}
    if not series:
        raise SgemUserError("no series given")
    context, horizon = int(context), int(horizon)
    need = horizon + 1 if pad else context + horizon
    lengths = {name: len(values) for name, values in series.items()}
    short = [name for name, n in lengths.items() if n < need]
    if not short:
        return list(series)
    shortest_name = min(lengths, key=lengths.__getitem__)
    shortest = lengths[shortest_name]
    hint, is_flag = _length_hint(shortest, horizon, pad)
    if pad:
        message = (
            f"{len(short)} of {len(series)} series have at most {horizon} values, no more than "
            f"the horizon (the shortest, {shortest_name!r}, has {shortest}), so none of their "
            "windows has a past to learn from"
        )
    else:
        message = (
            f"{len(short)} of {len(series)} series are shorter than context + horizon = "
            f"{context} + {horizon} = {need} (the shortest, {shortest_name!r}, has {shortest} "
            "values)"
        )
    if drop_short and len(short) < len(series):  # (forecast still, from the model's context)
        fix = f" (to train on them too: {hint})" if is_flag else ""
        log.warning("%s; they are left out of training, not of forecasting%s", message, fix)
        return [name for name in series if lengths[name] >= need]
    raise SgemUserError(f"{message}; {hint}")


__all__ = ["check_series_lengths"]
