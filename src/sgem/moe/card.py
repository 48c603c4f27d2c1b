"""A saved model's card (`SgemModel.summary`, `sgem info`): its experts, their cells and
clusters, the holdout's scores, the calibration and the leaderboard, in plain lines."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..space.arch import Arch
from .averaged import n_networks
from .calibration import card_lines

#: what the test split is, where a model saved without its label does not say
HOLDOUT = "holdout: the run's test split (never used to fit or choose)"


def model_card(model: Any) -> str:
    """The card of `model` (an `SgemModel`)."""
    s = model.spec
    sizes = np.asarray(s.cluster_sizes) if s.cluster_sizes else None
    kind = "classifier" if model.is_classifier else "forecaster" if model.is_forecaster else ""
    lines = [
        f"sgem {kind or 'model'} '{s.task_name}': {s.n_experts} experts over "
        f"{s.n_clusters} clusters ({s.gate}-gated), input {tuple(s.input_shape)}"
        + (f", {s.n_classes} classes" if s.n_classes else ""),
    ]
    for k, arch in enumerate(s.architectures):
        clusters = np.flatnonzero(model.assignment == k).tolist()
        n = int(sizes[clusters].sum()) if sizes is not None and clusters else 0
        nets = n_networks(model.moe.experts[k])
        averaged = f", {nets} networks averaged" if nets > 1 else ""
        lines.append(
            f"  expert {k}: cell {Arch.from_json(arch).key}{averaged}\n"
            f"            clusters {clusters} ({n} training samples)"
        )
    metric_names = ("test_accuracy", "test_nll", "test_crps")
    shown = [f"{m} {s.metrics[m]:.4f}" for m in metric_names if s.metrics.get(m) is not None]
    if shown:  # the run's test split, named for what it is
        label = model.calibration.get("holdout") or HOLDOUT
        lines.append(f"  {label}: " + ", ".join(shown))
    lines += card_lines(model.calibration)
    for key, ref in (s.info.get("reference_networks_test") or {}).items():
        scores = [f"{m} {ref[m]:.4f}" for m in metric_names if ref.get(m) is not None]
        shown_ref = ", ".join(scores)
        lines.append(f"  reference, one network of cell {key} on all clusters: {shown_ref}")
    from ..data.table_missing import imputation_summary

    imputation = imputation_summary(s.info.get("encoding"))
    if imputation:
        lines.append(imputation)
    board = model.spec.info.get("leaderboard")
    if board and "rows" in board:  # what was saved, and what else was measured
        from ..leaderboard.frame import leaderboard_lines

        lines.extend("  " + line for line in leaderboard_lines(board))
    return "\n".join(lines)
