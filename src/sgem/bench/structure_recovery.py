"""Whether a searched partition gives each known structure (a mixture's source) its own
experts, scored on test points (`benchmarks/mixed_csv.py`)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

#: the share of a structure's (an expert's) test points that counts as its own
OWN = 0.9


def recovery(structure: np.ndarray, expert: np.ndarray) -> dict:
    """`recovery`: experts matched one-to-one to structures maximising matched points
    (Hungarian), matched / all points; `recovered`: every structure has >= `OWN` of its
    points on its matched expert. `separated` (what a K above the structures' count can
    meet): no expert mixes structures - every used expert's points are >= `OWN` one
    structure, and every structure has >= `OWN` of its points on experts it dominates."""
    structure, expert = np.asarray(structure), np.asarray(expert)
    n_s = int(structure.max()) + 1
    counts = np.zeros((n_s, int(expert.max()) + 1))
    np.add.at(counts, (structure, expert), 1)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    per = np.zeros(n_s)
    per[rows] = counts[rows, cols] / counts[rows].sum(1)
    used = counts.sum(0) > 0
    major = counts[:, used].argmax(0)  # each used expert's majority structure
    purity = counts[:, used].max(0) / counts[:, used].sum(0)
    owned = np.array([counts[s, used][major == s].sum() for s in range(n_s)]) / counts.sum(1)
    return {
        "recovery": round(float(counts[rows, cols].sum() / len(structure)), 4),
        "per_structure": [round(float(v), 4) for v in per],
        "recovered": bool((per >= OWN).all()),
        "separated": bool((purity >= OWN).all() and (owned >= OWN).all()),
    }


__all__ = ["OWN", "recovery"]
