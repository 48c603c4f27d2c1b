"""The saved combination: the searched MoE mixed with the references a user would
otherwise pick (scikit-learn models on tables, AutoETS / AutoTheta on series), with weights
from greedy ensemble selection (Caruana et al. 2004, as AutoGluon's weighted ensemble), and
the small accessors of a leaderboard entry (`sgem.leaderboard.contest` builds the board).
"""

from __future__ import annotations

import logging

import numpy as np

from ..data.task import ClusteredTask
from ..data.timeseries import validation_at_random
from ..data.ts_end_split import MIN_HELD_OUT
from ..methods.result import Fitted, MethodResult
from ..moe.combination import (
    WQL_GRID,
    averaged_quantiles,
    member_quantiles,
    mixture_mean,
    mixture_quantiles,
    quantile_loss,
    stacked_locations,
)
from ..moe.interval_width import binned_spreads, conformal_spread
from .board import (
    greedy_ensemble,
    greedy_quantile_ensemble,
    scored,
)
from .cross_fit import COMBINE_MARGIN_SE, cross_fitted_gain, standard_error
from .forecast_cost import forecast_report, within_allowance
from .series_members import MIN_SUBSET_WINDOWS, SUBSET
from .table_members import OUT_OF_FOLD, REFIT_ROWS
from .table_weights import MIN_HOLDOUT_ROWS, table_weights

log = logging.getLogger(__name__)

#: why a combination gives the MoE no weight (`combine(with_moe=False)`)
UNTRAINED = "the time budget's fence cut its final training short (`final_training_cut`)"
#: a forecasting combination's weights: this share the classical members' equal
#: combination (the prior), the rest from greedy selection, so the combination is saved
#: without a test and the MoE carries weight as far as held-out windows show it earns it
SHRINK_TO_EQUAL = 0.5
#: a forecasting combination's prior keeps the statsforecast members whose held-out quantile
#: loss is at most this many times the best one's (`_prior`)
PRIOR_LOSS_RATIO = 1.15
#: ... and is no prior where the MoE alone beats it on the held-out windows by this many
#: standard errors of the paired per-window quantile loss (`_prior`)
PRIOR_MARGIN_SE = 2.0
#: a forecasting combination's weights and interval width are fit on the holdout windows
#: where it has at least this many (else on validation): see `combine`. The series' end split
#: holds out at least as many where the series allow (few series take more origins each).
MIN_HOLDOUT_WINDOWS = MIN_HELD_OUT
#: a regression combination's interval width is fit per bin of its prediction where the
#: rows it is fit on give every bin at least this many (`binned_spreads`)
MIN_BIN_ROWS = 50


def entry(name: str, seed: int, val: np.ndarray | None, test: np.ndarray) -> MethodResult:
    """A leaderboard row of the searched or the saved MoE (outputs made here)."""
    return MethodResult(name, seed, kind="sgem", val_output=val, test_output=test)


def val_of(member: MethodResult) -> np.ndarray:
    assert member.val_output is not None
    return member.val_output


def test_of(member: MethodResult) -> np.ndarray:
    assert isinstance(member.test_output, np.ndarray)
    return member.test_output


def fitted_of(member: MethodResult) -> Fitted:
    return member.fitted or Fitted()


def combine(
    task: ClusteredTask,
    ship_val,
    ship_test,
    refs: list[MethodResult],
    has: np.ndarray,
    ship_oof: np.ndarray | None = None,
    with_moe: bool = True,
):
    """The combination of the selective-routing MoE with the members that greedy ensemble
    selection picks on validation (tables: the scikit-learn models; series: AutoETS and
    AutoTheta, refitted per series at forecast time), kept only where it beats the MoE alone
    by `COMBINE_MARGIN_SE` standard errors of the paired per-sample log density on samples
    its weights were not fit on (`cross_fitted_gain`) - on a user's table the weights are
    fit on the holdout rows instead, and greedy selection alone decides; a forecaster's
    weights are shrunk toward the classical members' equal combination (`SHRINK_TO_EQUAL`;
    not where the MoE alone clearly beats it on the windows the weights are fit on),
    fit on the holdout where it has `MIN_HOLDOUT_WINDOWS` windows, its interval width on
    validation and holdout pooled, both on the windows every member has
    (`_where_all_scored`), and it is always saved. `ship_oof`: the saved network's
    out-of-fold outputs on train + validation (a user's table whose saved model is one
    network), weighed on every row with the members. Returns
    ((Combination, state, arrays, holdout scores), its leaderboard row), or (None, None)."""
    from ..moe.classical import season_of
    from ..moe.combination import Combination
    from ..moe.portable import export

    def combinable(m: MethodResult) -> bool:  # (a classical member may be on some series)
        if m.val_output is None or m.test_output is None:
            return False
        fit = fitted_of(m)
        return bool(fit.estimator) if m.kind == "scikit-learn" else fit.classical is not None

    ready = [m for m in refs if combinable(m)]
    if not ready:
        return None, None
    forecasting = any(fitted_of(m).classical is not None for m in ready)
    # a small user's table (wine's 142 rows: a holdout of 28) still weighs its members on
    # every row where they have out-of-fold outputs: on validation alone, where the search
    # chose the networks, a combination had to prove itself against them, and one network
    # was saved 3 to 5 points below logistic regression / gradient boosting on new rows
    folded_members = task.name == "table" and all(OUT_OF_FOLD in m.extra for m in ready)
    table_holdout = task.name == "table" and (len(task.test) >= MIN_HOLDOUT_ROWS or folded_members)
    if ship_val is None and not (forecasting or table_holdout):
        return None, None
    y_val = task.val.y[has]
    outs = [] if ship_val is None else [ship_val[has], *[val_of(m)[has] for m in ready]]
    fit_on = "validation"
    # the holdout, where nothing was chosen, decides where validation cannot be trusted:
    # - a forecaster's: it asks what a forecast asks (the saved MoE and the members refitted
    #   on everything before each window, on the latest windows of the series); on the
    #   yearly M3 file validation preferred the MoE's quantiles while the holdout and the
    #   competition's future preferred AutoETS' and AutoTheta's; where validation windows
    #   were drawn at random (one or two series: only the holdout is at the series' ends),
    #   the holdout decides whatever its size;
    # - a user's table's: validation chose the search's cells, lengths and routing, and its
    #   networks' validation NLL is far below what they reach on new rows (breast cancer:
    #   0.007 on validation, 0.31-0.62 on the holdout; logistic regression 0.04 and 0.09).
    # A benchmark's table never: there the holdout is the paper's test split.
    random_val = forecasting and validation_at_random(task)
    if (
        forecasting and (ship_val is None or len(task.test) >= MIN_HOLDOUT_WINDOWS or random_val)
    ) or table_holdout:
        fit_on, y_val = "holdout", np.asarray(task.test.y)
        outs = [ship_test, *[np.asarray(test_of(m)) for m in ready]]
    if forecasting:  # weights on the windows every member has (some ran on some series)
        ready, outs, on = _where_all_scored(ready, outs)
        y_val = y_val[on]
    folded = fit_on == "holdout" and not forecasting and folded_members
    point = not forecasting and task.loss != "cross_entropy"  # a regression: its RMSE
    judged: tuple[list[np.ndarray], np.ndarray] | None = None
    prior_note = "" if with_moe else "; the MoE at no weight: " + UNTRAINED
    first = 0 if with_moe else 1  # (the members from `first` on are weighed)
    if folded and with_moe:
        weights, fit_on, judged = table_weights(task, outs, ready, ship_oof, point)
    elif forecasting:  # quantiles averaged, weights for the quantile loss (the wQL's levels),
        # shrunk halfway to the equal combination of AutoETS and AutoTheta: held-out windows
        # are a few per series and the future is not exchangeable with them, and that
        # combination is the robust default of forecasting competitions (on the M3 files it
        # beat both members on two of three; an MoE given a third of the weight by default
        # cost 0.5 to 4 % MASE on each file at a 5-minute budget); not where the MoE alone
        # clearly beats that combination on these windows (`_prior`). Each window's loss
        # counts as it is (in units of its context's mean |x|); tried: each divided by its
        # context's seasonal-naive error, as MASE scales a series'. Paired on the same 2-minute
        # fits (seeds 0 and 1, MASE on the future): better on M3 "other" (-0.7 %, -0.5 %),
        # the macro series (-2.3 %, -1.5 %), tourism monthly (-0.2 %), level on M3 yearly and
        # quarterly, worse on the tourism sums (quarterly +0.7 %, +0.9 %; yearly +3.0 %,
        # +1.8 %: more weight on the MoE); not adopted
        greedy = greedy_quantile_ensemble(outs, y_val, first=first)
        prior, why = _prior(ready, outs, y_val, with_moe)
        prior_note += why
        weights = (
            greedy if prior is None else SHRINK_TO_EQUAL * prior + (1 - SHRINK_TO_EQUAL) * greedy
        )
    else:
        weights = greedy_ensemble(outs, y_val, task.loss, point=point, first=first)
    if weights[0] == 1.0:
        return None, None
    used = [i for i in range(1, len(outs)) if weights[i] > 0]
    w = np.asarray([weights[0], *[weights[i] for i in used]])
    chosen = [outs[i] for i in (0, *used)]
    if forecasting:  # per window: the MoE's quantile loss minus the combination's
        combined = averaged_quantiles(chosen, w, WQL_GRID)
        gain = quantile_loss(_wql_quantiles(outs[0]), y_val) - quantile_loss(combined, y_val)
    else:
        gain_outs, gain_y = judged or (outs, y_val)
        gain = cross_fitted_gain(gain_outs, gain_y, task.loss, point=point)
    se = standard_error(gain)
    if (
        with_moe
        and fit_on == "validation"
        and not forecasting
        and not gain.mean() > COMBINE_MARGIN_SE * se
    ):
        return None, None  # on a user's holdout (nothing chosen there) greedy alone decides
    members = [ready[i - 1] for i in used]
    fits = [fitted_of(m) for m in members]
    exported = [
        (f.classical.state(), {}) if f.classical is not None else export(f.estimator) for f in fits
    ]
    val_outs = None if ship_val is None else [ship_val[has], *[val_of(m)[has] for m in members]]
    test_outs = [ship_test, *[test_of(m) for m in members]]
    spread, spread_on, bins = 1.0, "", None
    both_parts = val_outs is not None and not random_val  # (validation random: holdout alone)
    if forecasting:  # the combined 80 % interval made to cover 80 % of every held-out step:
        # validation (a window of every series) and the holdout (the latest ones) pooled
        pooled, y_pooled = test_outs, np.asarray(task.test.y)
        if both_parts and val_outs is not None:
            pooled = [np.concatenate([v, t]) for v, t in zip(val_outs, test_outs, strict=True)]
            y_pooled = np.concatenate([task.val.y[has], y_pooled])
        kept, on = _on_all_scored(pooled)
        spread = conformal_spread(averaged_quantiles(kept, w, WQL_GRID), y_pooled[on])
    elif point:  # a regression's 80 % interval made to cover 80 % of the rows weighed on
        spread, spread_on, bins = _regression_spread(
            task, outs, y_val, judged, folded, ready, (0, *used), w
        )
    combination, state, arrays = Combination.build(
        w,
        [m.method for m in members],
        [f.scale for f in fits],
        task,
        exported,
        season=season_of(task.meta if isinstance(task.meta, dict) else None),
        interval_scale=spread,
        point="mean" if point else "median",
        width_bins=bins,
    )
    holdout = _scores_where_all_scored(combination, test_outs, np.asarray(task.test.y))
    validation = (
        {} if val_outs is None else _scores_where_all_scored(combination, val_outs, task.val.y[has])
    )
    row = {
        "model": "saved model (combination)",
        "kind": "sgem",
        "seconds": 0.0,
        "validation": {k.removeprefix("test_"): v for k, v in validation.items()},
        "holdout": {k.removeprefix("test_"): v for k, v in holdout.items()},
        "note": f"weights fit on {fit_on}{_subset_note(members, len(y_val))}"
        f"{_width_note(forecasting, both_parts, spread, spread_on, bins)}"
        f"{prior_note}; "
        f"paired gain there in {_gain_measure(forecasting, point)} "
        f"{gain.mean():.4f} (se {se:.4f}){_refit_note(members)}",
    }
    return (combination, state, arrays, holdout), row


def combine_within(
    task,
    ship_val,
    ship_test,
    refs: list[MethodResult],
    has,
    ship_oof=None,
    *,
    on: bool = True,
    allowance: float | None = None,
    with_moe: bool = True,
) -> tuple:
    """`combine` of the references whose refits fit in the forecast budget `allowance`
    (`sgem.leaderboard.forecast_cost`): (its combination or None, its leaderboard row or
    None, the leaderboard's "forecast" entry or None). `on=False` (the run's
    `combine: false`): no combination. `with_moe`: as `combine`'s."""
    if not on:
        return None, None, None
    kept, left_out = within_allowance(refs, allowance)
    combined_with, row = combine(task, ship_val, ship_test, kept, has, ship_oof, with_moe)
    saved = combined_with[1]["weights_by_name"] if combined_with is not None else {}
    return combined_with, row, forecast_report(refs, saved, left_out, allowance)


def untrained_experts(final: MethodResult, fallback: list[int] | None = None) -> list[int]:
    """The experts whose final training the budget's fence cut too short to ship
    (`MoEReport.untrained_experts`) that still own a cluster outside `fallback` (those
    routed to the global network); said once, whatever is saved instead."""
    if final.report is None or not final.report.final_training_cut:
        return []
    untrained, cut = final.report.untrained_experts(), final.report.final_training_cut
    if untrained and final.assignment is not None:
        owned = {int(k) for c, k in enumerate(final.assignment) if c not in (fallback or [])}
        untrained = [k for k in untrained if k in owned]
    if untrained:
        log.warning(
            "time budget: the fence cut the final training of expert(s) %s after %s steps; "
            "the saved model gives the MoE no weight where references can stand in (a "
            "longer --time-budget trains them)",
            ", ".join(map(str, untrained)),
            ", ".join(f"{cut[str(k)]['steps']} of {cut[str(k)]['of']}" for k in untrained),
        )
    return untrained


def _on_all_scored(outs: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """(the outputs on the samples every one of them has, those samples): a classical member
    cut short by the budget has NaN outputs on the series it did not reach."""
    on = np.logical_and.reduce([scored(o) for o in outs])
    return [o[on] for o in outs], on


def _where_all_scored(
    ready: list[MethodResult], outs: list[np.ndarray]
) -> tuple[list[MethodResult], list[np.ndarray], np.ndarray]:
    """(members, their outputs with the MoE's first, the samples kept) restricted to the
    windows every member has. A classical member that the budget let run on a random subset
    of the series still joins (refitted on every series at forecast time, it needs nothing
    saved; its weight is fit on the series it reached, a random sample). Where those are
    fewer than `MIN_SUBSET_WINDOWS`, the members cut short are left out. Why: at a 25-s
    budget on the 174 M3 "other" series AutoETS reached 44, AutoTheta 168, and the
    combination without them was 96 % seasonal naive: MASE 1.41 against AutoETS' 0.70."""
    kept, on = _on_all_scored(outs)
    if on.sum() < MIN_SUBSET_WINDOWS and not on.all():
        keep = [0, *[i + 1 for i, m in enumerate(ready) if not m.extra.get(SUBSET)]]
        ready = [ready[i - 1] for i in keep[1:]]
        kept, on = _on_all_scored([outs[i] for i in keep])
    return ready, kept, on


def _scores_where_all_scored(combination, outs: list[np.ndarray], y: np.ndarray) -> dict:
    kept, on = _on_all_scored(outs)
    return combination.scores_of(kept, y[on])


def _subset_note(members: list[MethodResult], windows: int) -> str:
    cut = [m.method for m in members if m.extra.get(SUBSET)]
    if not cut:
        return ""
    return f", on the {windows} windows of the series {' and '.join(cut)} reached"


def _refit_note(members: list[MethodResult]) -> str:
    refit = [m for m in members if m.extra.get(REFIT_ROWS)]
    if not refit:
        return ""
    names = " and ".join(m.method for m in refit)
    return (
        f"; {names} saved refitted on all {refit[0].extra[REFIT_ROWS]} rows (the scores "
        f"here are of their fits without the holdout)"
    )


def _width_note(
    forecasting: bool,
    pooled: bool,
    spread: float,
    on: str = "",
    bins: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
) -> str:
    if forecasting:
        on = "validation and holdout" if pooled else "the holdout"
    if not on:
        return ""
    if bins is not None:
        factors = bins[1]
        return (
            f" (interval width x{min(factors):.2f}-{max(factors):.2f} in {len(factors)} bins "
            f"of the prediction on {on}: there its 80 % interval covers 80 % in each)"
        )
    return f" (interval width x{spread:.2f} on {on}: there its 80 % interval covers 80 %)"


def _regression_spread(
    task: ClusteredTask,
    outs: list[np.ndarray],
    y: np.ndarray,
    judged: tuple[list[np.ndarray], np.ndarray] | None,
    folded: bool,
    ready: list[MethodResult],
    chosen: tuple[int, ...],
    weights: np.ndarray,
) -> tuple[float, str, tuple[tuple[float, ...], tuple[float, ...]] | None]:
    """(the factor on a regression combination's quantiles' distances from its median that
    makes its 80 % interval cover 80 % of the rows its weights were fit on, which rows, and
    the factors by bin of its prediction where those rows fill two, `binned_spreads`):
    split-conformal, as a forecaster's (`conformal_spread`), on every row where the members
    were weighed on their out-of-fold outputs and the MoE has none or no weight (`folded`),
    else on the rows the weights were fit on. Why: each scikit-learn member is a Normal
    whose scale is its out-of-fold RMSE; on a skewed target (statsmodels' doctor visits,
    4038 test rows: most at 0 or 1, a long tail) most rows sit well inside such an
    interval, and the saved model's 80 % interval covered 93 % of new rows."""
    if judged is not None:
        rows, y_rows, on = [judged[0][i] for i in chosen], judged[1], "every row"
    elif folded and weights[0] == 0:  # the members alone: their out-of-fold rows too
        y_rows, on = np.concatenate([task.train.y, task.val.y, task.test.y]), "every row"
        rows = [
            outs[0][:0],  # (the MoE's place: no weight, so no rows needed)
            *[np.concatenate([ready[i - 1].extra[OUT_OF_FOLD], outs[i]]) for i in chosen[1:]],
        ]
    else:
        rows, y_rows, on = [outs[i] for i in chosen], y, "the rows the weights were fit on"
    kept = [(o, w) for o, w in zip(rows, weights, strict=True) if w > 0]
    outs_kept, w_kept = [o for o, _ in kept], np.asarray([w for _, w in kept])
    found = mixture_quantiles(outs_kept, w_kept, (0.1, 0.5, 0.9))
    point = mixture_mean(stacked_locations(outs_kept), w_kept)  # (`Combination.point` "mean")
    bins = binned_spreads(found, y_rows, point, MIN_BIN_ROWS)
    return conformal_spread(found, y_rows), on, bins


def _gain_measure(forecasting: bool, point: bool) -> str:
    if forecasting:
        return "quantile loss"
    return f"{'squared error of the mean' if point else 'log density'}, cross-fitted"


def _wql_quantiles(out: np.ndarray) -> dict[float, np.ndarray]:
    """One member's quantiles on the wQL's levels, {level: values}."""
    return dict(zip(WQL_GRID, member_quantiles(out, WQL_GRID), strict=True))


def _prior(
    ready: list[MethodResult], outs: list[np.ndarray], y: np.ndarray, with_moe: bool = True
) -> tuple[np.ndarray | None, str]:
    """The weights a forecasting combination is shrunk toward (the MoE's first, 0) and a
    note where there are none though members were fitted: the equal combination of the
    statsforecast members whose quantile loss on `outs` (the MoE's first, then `ready`'s)
    is within `PRIOR_LOSS_RATIO` of the best of every member's, the MoE's included
    (`with_moe=False`: the members'); None
    where none is (or the budget left none of them: seasonal naive alone is no prior: on
    120 daily weather series its held-out CRPS was 0.69 against the MoE's 0.33, and half the
    weight on it made the saved model 0.46; greedy selection alone weighs the two), and
    None where the MoE alone beats that combination on these windows by `PRIOR_MARGIN_SE`
    standard errors of the paired per-window loss. Why the ratio: that combination is
    robust where its members are alike and near the best (on the M3 files and tourism they
    are within 10 %), not where one is clearly worse (20 000 short yearly series: AutoTheta's
    held-out CRPS 1.25 times AutoETS', and a quarter of the weight on it forecast the future
    at wQL 0.182 against 0.160 with AutoETS alone as the prior; six hourly electricity
    series: AutoETS' 0.126, AutoTheta's 0.030, and a quarter of the weight on AutoETS made
    the saved model worse than either of the others), nor where the network is far ahead of
    both (half the weight on members five times worse on the held-out windows made a saved
    model 2.5 times worse than its MoE there: one daily series whose classical members had
    no weekly season). Why the margin: on 400 hourly series (a 5-minute fit) AutoETS was
    1.18 times the MoE's held-out CRPS, within the ratio of 1.5 then, and the shrunk weights
    (MoE 0.36) forecast the future at MASE 0.724 / wQL 0.0605 against greedy selection's 0.678 /
    0.0575 (MoE 0.72); at 30 s on the M3 files, where the MoE is weaker, the shrunk weights
    were ahead on yearly (2.639 against 2.728) and "other" (1.874 against 1.936)."""
    fitted = [fitted_of(m).classical for m in ready]
    strong = np.array([c is not None and not c.cheap for c in fitted], dtype=np.float64)
    if not strong.any():
        return None, ""
    per_window = [quantile_loss(_wql_quantiles(o), y) for o in outs]
    losses = np.array([loss.mean() for loss in per_window])
    strong[losses[1:] > PRIOR_LOSS_RATIO * losses[0 if with_moe else 1 :].min()] = 0.0
    if not strong.any():
        return None, ""
    prior = np.r_[0.0, strong / strong.sum()]
    if not with_moe:  # (the MoE is no candidate: nothing to compare the prior with)
        return prior, ""
    gain = quantile_loss(averaged_quantiles(outs, prior, WQL_GRID), y) - per_window[0]
    se = standard_error(gain)
    if gain.mean() > PRIOR_MARGIN_SE * se:
        note = (
            f"; not shrunk toward the statsforecast members' equal combination: the MoE "
            f"beats it there by {gain.mean():.4f} in quantile loss (se {se:.4f})"
        )
        return None, note
    return prior, ""


__all__ = [
    "COMBINE_MARGIN_SE",
    "MIN_HOLDOUT_ROWS",
    "MIN_HOLDOUT_WINDOWS",
    "PRIOR_LOSS_RATIO",
    "PRIOR_MARGIN_SE",
    "SHRINK_TO_EQUAL",
    "combine",
    "combine_within",
    "cross_fitted_gain",
    "entry",
    "fitted_of",
    "test_of",
    "untrained_experts",
    "val_of",
]
