"""How a final model's test outputs are scored: one function for the run, a reloaded model
and the reference networks, so each scores exactly as the others."""

from __future__ import annotations

import numpy as np
import torch

from ..data.task import ClusteredTask, Split
from ..errors import SgemUserError
from ..forecast import forecast_scores, task_test_scores
from ..train.losses import per_sample_nll
from .calibration import coverage, t_quantiles, with_floor


def evaluate_forecasts(
    output: torch.Tensor, task: ClusteredTask, n_samples: int = 100, seed: int = 0
) -> dict:
    """NLL, sample CRPS, closed-form CRPS and per-domain NLL of test forecasts (B, H, 3)."""
    return forecast_metrics(output, task.test.y, task.test.source, n_samples, seed)


def forecast_metrics(
    output: torch.Tensor,
    y: np.ndarray,
    source: np.ndarray | None,
    n_samples: int = 100,
    seed: int = 0,
) -> dict:
    """NLL, sample CRPS, closed-form CRPS and per-domain NLL of forecasts (B, H, 3) of `y`."""
    scores = forecast_scores(output, y, n_samples=n_samples, rng=seed)
    per_domain: dict[int, float] = {}
    if source is not None:
        y_t = torch.as_tensor(y, device=output.device)
        nll = per_sample_nll(output, y_t, "student_t").double().cpu().numpy()
        for d in np.unique(source):
            per_domain[int(d)] = float(nll[source == d].mean())
    return {**scores, "per_domain_nll": per_domain}


#: the K choice scores a classifier's class probabilities mixed with this share of the
#: uniform distribution (`choice_nll`)
CHOICE_FLOOR = 0.01


def choice_nll(out: torch.Tensor, y: np.ndarray, loss: str) -> np.ndarray:
    """Per holdout sample, the NLL Ks are compared on (`sgem.run.experts_choice`, paired
    row by row). A classifier's probabilities are first mixed with `CHOICE_FLOOR` of the
    uniform distribution, so one row costs at most about -log(CHOICE_FLOOR / classes).
    Why: an expert owns whole clusters, and on a row of a class its clusters never had it
    can be certain and wrong - on four mixed structures (`benchmarks/mixed_csv.py --kinds
    linear ring parabola xor`, seed 1) one of 800 holdout rows had NLL 249 under K = 4,
    whose MoE was the most accurate (test accuracy 0.979 against K = 2's 0.935), and that
    row alone made its holdout NLL 0.36 against K = 2's 0.19. A table's saved combination
    keeps a share of its members beside the MoE, which bounds such a row the same way
    (`sgem.leaderboard.table_weights.MIN_MEMBERS_SHARE`)."""
    target = torch.as_tensor(y, device=out.device)
    if loss == "cross_entropy":
        p = with_floor(torch.softmax(out.double(), dim=1), CHOICE_FLOOR)
        nll = -torch.log(p.gather(1, target.long().view(-1, 1))[:, 0])
    else:
        nll = per_sample_nll(out, target, loss).double()
    return nll.cpu().numpy()


def score_outputs(
    out: torch.Tensor,
    y: np.ndarray,
    loss: str,
    expert_of: np.ndarray,
    n_experts: int,
    source: np.ndarray | None = None,
    crps_samples: int = 100,
    seed: int = 0,
) -> dict:
    """The test metrics of result.json from a model's outputs: one function, so a saved and
    reloaded model scores exactly as the run did."""
    y_t = torch.as_tensor(y, device=out.device)
    nll = float(per_sample_nll(out, y_t, loss).mean())
    acc, per_expert = None, []
    forecast: dict = {}
    rmse = None
    if loss == "student_t":
        forecast = forecast_metrics(out, y, source, n_samples=crps_samples, seed=seed)
        err = out[..., 0].double().cpu().numpy() - np.asarray(y, dtype=np.float64)
        rmse = float(np.sqrt(np.mean(err**2)))
    if loss == "cross_entropy":
        correct = (out.argmax(1) == y_t).cpu().numpy()
        acc = float(correct.mean())
        for k in range(n_experts):
            sel = expert_of == k
            per_expert.append(float(correct[sel].mean()) if sel.any() else None)
    return {
        "test_accuracy": acc,
        "test_nll": nll,
        "per_expert_test_accuracy": per_expert,
        "test_crps": forecast.get("crps"),
        "test_crps_closed_form": forecast.get("crps_closed_form"),
        "per_domain_test_nll": forecast.get("per_domain_nll", {}),
        "test_rmse": rmse,
    }


def method_scores(
    task: ClusteredTask,
    out: torch.Tensor | np.ndarray,
    split: Split | None = None,
    *,
    expert_of: np.ndarray | None = None,
    n_experts: int = 1,
    crps_samples: int = 100,
    seed: int = 0,
) -> dict:
    """Every metric of a method's raw outputs (model units) on `split` (default: the test
    split), one function for the final MoE, the baselines and the leaderboard's members:
    `score_outputs`' NLL, accuracy, sample and closed-form CRPS, RMSE and per-domain NLL;
    for Student-t outputs the raw 80 % interval's coverage (`test_coverage_80`); on the test
    split of a windowed forecasting task MASE with the data's seasons and wQL in original
    units (`forecast`, `sgem.forecast.task_test_scores`)."""
    split = task.test if split is None else split
    out_t = out if isinstance(out, torch.Tensor) else torch.as_tensor(out)
    y = np.asarray(split.y)
    expert_of = np.zeros(len(y), dtype=np.int64) if expert_of is None else expert_of
    scores = score_outputs(
        out_t,
        y,
        task.loss,
        expert_of,
        n_experts,
        source=split.source,
        crps_samples=crps_samples,
        seed=seed,
    )
    scores["test_coverage_80"] = None
    scores["forecast"] = None
    if task.loss == "student_t":
        params = out_t.detach().double().cpu().numpy()
        q = t_quantiles(params[..., 0], params[..., 1], params[..., 2], (0.1, 0.9))
        scores["test_coverage_80"] = coverage(y, q[0.1], q[0.9])["overall"]
        if split is task.test:
            scores["forecast"] = task_test_scores(out_t, task)
    return scores


def in_target_units(scores: dict, out, y: np.ndarray, std: float) -> dict:
    """Regression on a standardised target (a table): `score_outputs`' RMSE and CRPS of
    the Student-t, and the MAE of its median, in the target's own units (times `std`).
    The NLL stays per sample of the standardised target; `test_nll_units` says so (the
    target's units add ln(std))."""
    loc = np.asarray(out[..., 0] if not isinstance(out, torch.Tensor) else out[..., 0].cpu())
    err = loc.astype(np.float64) - np.asarray(y, dtype=np.float64).reshape(loc.shape)
    scaled = {
        k: (None if scores.get(k) is None else float(scores[k]) * std)
        for k in ("test_rmse", "test_crps", "test_crps_closed_form")
    }
    return scaled | {
        "test_mae": float(np.mean(np.abs(err))) * std,
        "test_nll_units": (
            f"nats per sample of the standardised target (in the target's units: add "
            f"ln(std) = {np.log(std):.4f})"
        ),
    }


#: metrics of the MoE's density that a quantile-averaging combination does not have
DENSITY_METRICS = ("test_nll", "test_crps_closed_form", "per_domain_test_nll")


def without_moe_densities(metrics: dict, combined: dict) -> dict:
    """A forecasting combination averages quantiles and has no density: the MoE member's
    NLLs would read as the saved model's, so they are dropped."""
    if "test_nll" in combined:
        return metrics
    return {k: v for k, v in metrics.items() if k not in DENSITY_METRICS}


def labelled_rows(x_model: np.ndarray, cluster: np.ndarray, y: np.ndarray) -> tuple:
    """A regression's rows whose target is known (`evaluate`): a missing target is left out
    with a note, as `fit` leaves it out, not scored as an error of NaN."""
    from ..data.number_formats import read_formatted, unreadable
    from ..data.table_contract import first_rows, note

    if np.asarray(y).dtype.kind in "OUS":  # "$250,000", as a fit reads a formatted target
        import pandas as pd

        column = pd.Series(np.asarray(y).reshape(-1))
        numbers = read_formatted(column)
        if bad := unreadable(column, numbers):
            raise SgemUserError(f"evaluate: the targets hold text ({bad[:3]}); give numbers")
        y = numbers.to_numpy()
    values = np.asarray(y, dtype=np.float64)
    known: np.ndarray = np.asarray(np.isfinite(values).reshape(len(values), -1).all(axis=1))
    if known.all():
        return x_model, cluster, y
    if not known.any():
        raise SgemUserError("evaluate: every target is missing (NaN); give the true targets")
    note(
        f"evaluate: left out {int((~known).sum())} of {len(known)} rows with a missing target "
        f"(rows {first_rows(~known)})"
    )
    return x_model[known], cluster[known], values[known]


__all__ = [
    "DENSITY_METRICS",
    "evaluate_forecasts",
    "forecast_metrics",
    "in_target_units",
    "labelled_rows",
    "method_scores",
    "score_outputs",
    "without_moe_densities",
]
