"""A user's table's combination weights: the scikit-learn members weighed on every row
(their out-of-fold outputs on train + validation and their holdout outputs), the searched
MoE or the saved network joining them only where it clearly gains on rows it was not
chosen on (`sgem.leaderboard.cross_fit`)."""

from __future__ import annotations

import numpy as np

from ..data.task import ClusteredTask
from ..methods.result import MethodResult
from .board import ROUNDS, combination_scores, greedy_ensemble
from .cross_fit import COMBINE_MARGIN_SE, cross_fitted, standard_error
from .table_members import OUT_OF_FOLD

#: a user's table's combination is fit on its holdout rows where it has at least this many,
#: or where every scikit-learn member has out-of-fold outputs (then the members are weighed
#: on every row, and the MoE joins them only where it clearly gains on a holdout of at
#: least this many rows; the saved network, weighed on every row, only where there are at
#: least this many: on statecrime's 40 (3 splits) its out-of-fold check passed on one at
#: a share of 0.84, and the saved test RMSE was 1.10x the best scikit-learn model's;
#: without it, ridge regression 0.80 and gradient boosting 0.20, 0.91x)
MIN_HOLDOUT_ROWS = 50

#: the least share the scikit-learn members keep beside the MoE in `_members_then_moe`
#: (the MoE's weight grid stops one `ROUNDS` step short of 1). Why: the MoE gives each
#: row to one expert, which can be certain and wrong on a row of a class its clusters
#: never had. On four mixed structures (`benchmarks/mixed_csv.py --kinds linear ring
#: parabola xor`, seed 1, K = 4) one of 800 holdout rows had NLL 249 under the MoE alone:
#: the folds without that row chose the MoE alone, the fold with it lost 249 on it, the
#: cross-fitted gain failed, and the MoE got no weight, though greedy selection on
#: validation gave it 0.68 beside gradient boosting (holdout NLL 0.077 against the saved
#: members' 0.148)
MIN_MEMBERS_SHARE = 1 / ROUNDS


def table_weights(
    task: ClusteredTask,
    holdout_outs: list[np.ndarray],
    ready: list[MethodResult],
    ship_oof: np.ndarray | None,
    point: bool = False,
) -> tuple[np.ndarray, str, tuple[list[np.ndarray], np.ndarray] | None]:
    """A user's table's weights (the MoE's first), what they were fit on, and the outputs
    and targets their gain is judged on (None: the holdout's). With the saved network's
    out-of-fold outputs (`ship_oof`), greedy selection of every member on every row, the
    network's share kept where it clearly gains (`_network_gains`); without,
    `_members_then_moe`. `point`: judged by the squared error of the mean."""
    if ship_oof is None:
        weights = _members_then_moe(task, holdout_outs, ready, point)
        return weights, "the holdout (the MoE's; the members' out-of-fold rows too)", None
    y_rows = np.concatenate([task.train.y, task.val.y, task.test.y])
    every = [np.concatenate([ship_oof, holdout_outs[0]]), *_rows_of(ready, holdout_outs)]
    weights = greedy_ensemble(every, y_rows, task.loss, point=point)
    too_few = len(y_rows) < MIN_HOLDOUT_ROWS  # (as the MoE on a holdout of fewer)
    if weights[0] > 0 and (too_few or not _network_gains(every, y_rows, task.loss, point)):
        weights = np.r_[0.0, greedy_ensemble(every[1:], y_rows, task.loss, point=point)]
    fit_on = "every row (out-of-fold outputs on train + validation, the holdout's)"
    return weights, fit_on, (every, y_rows)


def _network_gains(every: list[np.ndarray], y: np.ndarray, loss: str, point: bool) -> bool:
    """Whether the saved network (`every[0]`) earns a share beside the members: greedy
    selection with it beats selection without it on rows neither was fit on (five-fold
    cross-fitted, by `COMBINE_MARGIN_SE` standard errors). Why: greedy selection gives a
    share to whatever helps on the rows it is fit on: on the smallest regression tables
    (grunfeld, engel, statecrime: 51-235 rows, 3 splits each) the network got 0.36-0.84
    on 5 splits, and the saved test RMSE was 1.09-1.20x ridge regression's on 4 of them."""
    score = combination_scores(every, y, loss, point)

    def gain_on(fit: np.ndarray, rows: np.ndarray) -> np.ndarray:
        outs = [o[fit] for o in every]
        with_it = greedy_ensemble(outs, y[fit], loss, point=point)
        without = np.r_[0.0, greedy_ensemble(outs[1:], y[fit], loss, point=point)]
        return score(with_it, rows) - score(without, rows)

    gain = cross_fitted(len(y), gain_on)
    return bool(gain.mean() > COMBINE_MARGIN_SE * standard_error(gain))


def _members_then_moe(
    task: ClusteredTask,
    holdout_outs: list[np.ndarray],
    ready: list[MethodResult],
    point: bool = False,
) -> np.ndarray:
    """A user's table's weights (the MoE's first) in two steps. The scikit-learn members'
    shares by greedy selection on every row: their out-of-fold outputs on train + validation
    and their holdout outputs. Then the MoE's weight, the share of the `ROUNDS` grid (short
    of 1 by `MIN_MEMBERS_SHARE`) whose mixture with those members scores best on the
    holdout, kept only where it gains over the members alone on holdout rows it was not
    chosen on (five-fold cross-fitted, by `COMBINE_MARGIN_SE` standard errors). Why: the
    holdout alone (91 rows on breast cancer) gave gradient boosting half the weight on two
    of three splits although logistic regression beat it on the full table; the MoE has
    holdout outputs only, and an overconfident network given 0.44 of the weight on those
    rows cost 2.6 points of test accuracy (0.956 against logistic regression's 0.982). On a
    holdout of fewer than `MIN_HOLDOUT_ROWS` rows the MoE gets no weight: on statecrime's 8
    (a 51-row table) its weight came out 1.0, one standard error ahead, and the saved MoE's
    test RMSE was 1.15x ridge regression's. `point`: a regression's weights minimise the
    squared error of the mean instead of the NLL (`combination_scores`)."""
    y_rows = np.concatenate([task.train.y, task.val.y, task.test.y])
    shares = greedy_ensemble(_rows_of(ready, holdout_outs), y_rows, task.loss, point=point)
    if len(task.test.y) < MIN_HOLDOUT_ROWS:  # too few rows to weigh the MoE on
        return np.r_[0.0, shares]
    score = combination_scores(holdout_outs, task.test.y, task.loss, point)
    grid = np.linspace(0.0, 1.0 - MIN_MEMBERS_SHARE, ROUNDS)  # steps of 1 / ROUNDS

    def mixed(w0: float, at: np.ndarray) -> np.ndarray:
        return score(np.r_[w0, (1 - w0) * shares], at)

    def moe_weight(at: np.ndarray) -> float:
        return max(grid, key=lambda w0: float(mixed(w0, at).mean()))

    def gain_on(fit: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return mixed(moe_weight(fit), rows) - mixed(0.0, rows)

    gain = cross_fitted(len(task.test.y), gain_on)
    every = np.arange(len(task.test.y))
    w0 = moe_weight(every) if gain.mean() > COMBINE_MARGIN_SE * standard_error(gain) else 0.0
    return np.r_[w0, (1 - w0) * shares]


def _rows_of(ready: list[MethodResult], holdout_outs: list[np.ndarray]) -> list[np.ndarray]:
    """Each scikit-learn member's outputs on every row: out of fold on train + validation,
    then the holdout's (`holdout_outs`: the MoE's first)."""
    pairs = zip(ready, holdout_outs[1:], strict=True)
    return [np.concatenate([m.extra[OUT_OF_FOLD], o]) for m, o in pairs]


__all__ = ["MIN_HOLDOUT_ROWS", "MIN_MEMBERS_SHARE", "table_weights"]
