"""A saved classifier's own probabilities (the MoE, without a combination's members: what
`sgem fit --no-combination` and `sgem export` give) on a user's test rows, raw, with the
temperature only and calibrated (temperature and floor), from one fit
(`benchmarks/probability_floor.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..moe.calibration import expected_calibration_error, softmax, with_floor


def own_probabilities(rundir: Path, test: Path, target: str) -> dict:
    """Accuracy, and per kind (raw, temperature_only, calibrated) the mean and largest
    per-row NLL and the ECE of the saved model's own network outputs on `test`; the saved
    model's (a combination's included) NLL beside them."""
    import sgem

    model = sgem.load(rundir / "model")
    calibration = json.loads((rundir / "result.json").read_text())["calibration"]
    frame = pd.read_csv(test)
    x = frame.drop(columns=[c for c in (target, "structure") if c in frame])
    y = model._encode_labels(frame[target].to_numpy())
    x_model, cluster, _ = model._prepare(x)
    logits = model.outputs(x_model, cluster).double().numpy()
    kinds = {
        "raw": softmax(logits),
        "temperature_only": softmax(logits, calibration["temperature_only"]),
        "calibrated": with_floor(softmax(logits, calibration["temperature"]), calibration["floor"]),
    }
    row: dict = {"n": len(y), "accuracy": round(float(np.mean(logits.argmax(1) == y)), 4)}
    for kind, probs in kinds.items():
        per_row = -np.log(np.maximum(probs[np.arange(len(y)), y], 1e-300))
        row[kind] = {
            "nll": round(float(per_row.mean()), 4),
            "worst_row_nll": round(float(per_row.max()), 2),
            "ece_15": round(expected_calibration_error(probs, y), 4),
        }
    saved = model.predict_proba(x)[np.arange(len(y)), y]
    row["saved_model_nll"] = round(float(-np.log(np.maximum(saved, 1e-300)).mean()), 4)
    row["temperature"], row["floor"] = calibration["temperature"], calibration["floor"]
    row["temperature_only_t"] = calibration["temperature_only"]
    return row


__all__ = ["own_probabilities"]
