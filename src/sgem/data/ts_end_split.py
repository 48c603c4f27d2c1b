"""Validation and holdout at the END of a user's series (rolling origins), not at random.

Why: a forecaster is asked about the future. With windows split at random, validation and
holdout windows sit anywhere in a series' past, where a network trained on the neighbouring
windows interpolates; the search, the leaderboard's weights and the conformal intervals
were then chosen on a question easier than the one the user asks. On a yearly competition
file the MoE tied AutoTheta on random windows and lost to it by 15 % MASE on the real
future.

Rule: every series that has room for it (at least one training window that ends before
its held-out windows begin) ends with its holdout windows (its last `origins` windows,
stride 1, the latest target ending at the series' end), validation windows just before
them, and only windows whose target ends before the first validation target may train from
it. Every other series gives training windows only (`make_windows`' sampling with one
window from every series first). So no held-out target is ever seen in training, every
series with a window still trains, and a holdout window answers the question a forecast
does.

Why every series, not a sample of them: with a fifth of the series held out whole at their
ends and the rest training up to their ends, the networks learned the very periods they
were validated on from the other series (series of one collection move together), and
only series long enough for a role were ever validated. On the yearly M3 file validation
then preferred the MoE while the competition's future preferred AutoTheta; with every
series' end held out, the fit's MASE went from 2.76 to 2.60 (AutoTheta 2.60), seed 0,
5-minute budget, 2026-11-26.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..random_streams import Stream, stream_rng
from .ts_windows import (
    Domains,
    Windows,
    _pick,
    _series_of,
    _valid_starts,
    cut_windows,
    series_window_rng,
)

#: at most this many rolling origins per series and held-out part, where the series are
#: many; few series take more, up to `MIN_HELD_OUT` windows a part in all
MAX_ORIGINS = 8
#: the windows a held-out part wants in all where few series would give fewer at
#: `MAX_ORIGINS` each: the holdout then fits a forecaster's combination weights and interval
#: width (`sgem.leaderboard.combining.MIN_HOLDOUT_WINDOWS`). Three hourly series gave 24
#: holdout windows spanning 31 hours, and the 80 % interval they calibrated covered 17 % of
#: the next day.
MIN_HELD_OUT = 100


def end_split_windows(
    domains: Domains,
    context: int,
    horizon: int,
    n_windows: int,
    seed: int,
    fractions: tuple[float, float, float],
    *,
    floor_fraction: float = 0.2,
    observed: Mapping[str, Sequence[np.ndarray]] | None = None,
    validation: str = "ends",
) -> tuple[Windows, dict[str, np.ndarray]] | None:
    """(windows, {"train", "val", "test": indices}) with held-out windows at series' ends;
    None where fewer than three series of a domain have room for them.

    `validation="random"`, where the ends cannot validate (one or two series, or clusters
    the ends leave without validation windows): only the holdout sits at the series' ends
    (each roomy series' last windows, a `fractions[2]` share in all), and validation windows
    are drawn at random among the windows before it, as the training windows are. Why: the
    holdout picks the saved model, its combination weights and its interval width, and must
    ask a forecast's question. With one daily series split at random, holdout windows sat
    anywhere in its 900 days: the networks had trained on their neighbours, and the classical
    members, fitted on the history before each window, had 67 days to go on for some. None
    where no series has room for a holdout."""
    if validation not in ("ends", "random"):
        raise ValueError(f"validation must be 'ends' or 'random', got {validation!r}")
    names = tuple(domains)
    width = context + horizon
    per_domain = n_windows // len(names)
    cuts: dict[str, list[tuple[int, int, np.ndarray]]] = {"train": [], "val": [], "test": []}
    for d, name in enumerate(names):
        series = _series_of(domains[name])
        masks = None if observed is None else [np.asarray(m, bool) for m in observed[name]]
        valid = _valid_starts(series, width, masks, context)
        roomy = [j for j, v in enumerate(valid) if len(_tail(v, 1, context, width)[0])]
        if len(roomy) < (3 if validation == "ends" else 1):  # the caller splits otherwise
            return None
        allowed = list(valid)
        most = max(MAX_ORIGINS, math.ceil(MIN_HELD_OUT / len(roomy)))
        if validation == "ends":
            want_val = round(fractions[1] * per_domain)
            origins = min(most, max(1, math.ceil(want_val / len(roomy))))
        else:  # only the holdout: its share of the windows, from the few series there are
            origins = max(most, math.ceil(round(fractions[2] * per_domain) / len(roomy)))
        held = []
        for j in roomy:  # every series ends with holdout, validation before it
            test, before = _tail(valid[j], origins, context, width)
            if validation == "random":
                cuts["test"].append((d, int(j), test))
                allowed[j] = before
                continue
            held.append((j, test, before, *_tail(before, origins, context, width)))
        turns = _turns_to_hold_out(held, fractions)
        for i, (j, test, before, val, earlier) in enumerate(held):
            if len(val) == 0:  # room for one held-out part only: it validates, or holds
                # out in its turn (`_turns_to_hold_out`)
                one, none = test, test[:0]
                val, test = (none, one) if _takes_turn(i, turns) else (one, none)
                earlier = before
            cuts["test"].append((d, int(j), test))
            cuts["val"].append((d, int(j), val))
            allowed[j] = earlier
        counts = np.array([len(v) for v in allowed], dtype=np.int64)
        n_held = sum(len(c[2]) for p in ("val", "test") for c in cuts[p] if c[0] == d)
        n_train = min(int(counts.sum()), max(per_domain - n_held, int((counts > 0).sum())))
        pick = _pick(series_window_rng(seed, d), counts, n_train, every_series=True)
        which = np.searchsorted(np.cumsum(counts), pick, side="right")
        offsets = pick - (np.cumsum(counts) - counts)[which]
        to_val = np.zeros(len(pick), dtype=bool)
        if validation == "random":
            share = fractions[1] / (fractions[0] + fractions[1])
            to_val = _random_validation(which, share, stream_rng(seed, Stream.SERIES_SPLIT))
        for j in np.unique(which):
            for part, chosen in (("train", ~to_val), ("val", to_val)):
                at = (which == j) & chosen
                if at.any():
                    cuts[part].append((d, int(j), allowed[j][offsets[at]]))
    order_of = [*cuts["train"], *cuts["val"], *cuts["test"]]
    win = cut_windows(domains, order_of, context, horizon, 1e-8, floor_fraction, observed)
    sizes = [sum(len(c[2]) for c in cuts[p]) for p in ("train", "val", "test")]
    bounds = np.cumsum([0, *sizes])
    idx = {p: np.arange(bounds[i], bounds[i + 1]) for i, p in enumerate(("train", "val", "test"))}
    return win, idx


def _random_validation(series: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """A random `share` of the windows (of `series`, one entry per window) as validation,
    never a series' only training window: each series keeps one window (random) to train."""
    order = rng.permutation(len(series))
    _, first = np.unique(series[order], return_index=True)
    trains = np.zeros(len(series), dtype=bool)
    trains[order[first]] = True  # one window of every series trains
    candidates = order[~trains[order]]  # the others, in the permutation's order
    to_val = np.zeros(len(series), dtype=bool)
    to_val[candidates[: round(share * len(series))]] = True
    return to_val


def _turns_to_hold_out(held: list, fractions: tuple[float, float, float]) -> float:
    """The share of the series with room for one held-out part only that give it to the
    holdout instead of validation: none where the series with room for both give the
    holdout `MIN_HELD_OUT` windows, else the holdout's share of the two parts. Why: 2000
    series of 10 to 20 months at h = 6 had no room for both anywhere; all went to
    validation, and the empty holdout ended the fit with a numpy error."""
    both = sum(len(test) for _, test, _, val, _ in held if len(val))
    if both >= MIN_HELD_OUT:
        return 0.0
    return fractions[2] / (fractions[1] + fractions[2])


def _takes_turn(i: int, share: float) -> bool:
    """Whether the i-th of a run of items is among an evenly spread `share` of them."""
    return math.floor((i + 1) * share) > math.floor(i * share)


def _tail(
    starts: np.ndarray, origins: int, context: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """(the last <= `origins` window starts, within the later half of `starts`, that leave
    a window ending before their targets begin; the starts of those earlier windows), or
    (empty, starts) where no such window exists."""
    if len(starts) < 2:
        return starts[:0], starts
    late = starts[starts >= max(starts[-1] - (origins - 1), starts[len(starts) // 2])]
    late = late[late + context >= starts[0] + width]
    if len(late) == 0:
        return late, starts
    return late, starts[starts + width <= late.min() + context]


__all__ = ["MAX_ORIGINS", "MIN_HELD_OUT", "end_split_windows"]
