"""How a final model's test outputs are scored: one function for the run, a reloaded model
and the reference networks, so each scores exactly as the others."""

from __future__ import annotations

import numpy as np
import torch

from ..data.task import ClusteredTask
from ..forecast import forecast_scores
from ..train.losses import per_sample_nll


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


__all__ = [
    "DENSITY_METRICS",
    "evaluate_forecasts",
    "forecast_metrics",
    "in_target_units",
    "score_outputs",
    "without_moe_densities",
]
