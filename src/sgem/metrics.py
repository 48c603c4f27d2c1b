"""Metrics: accuracy, NLL, and recovery of a known partition (Hungarian matching)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment


def accuracy(pred: np.ndarray, target: np.ndarray) -> float:
    return float(np.mean(np.asarray(pred) == np.asarray(target)))


def partition_match(assignment: np.ndarray, oracle: np.ndarray) -> float:
    """Fraction of clusters whose expert agrees with the oracle group under the best
    one-to-one relabelling of experts (Hungarian, scipy). 1.0 = the same partition."""
    assignment, oracle = np.asarray(assignment), np.asarray(oracle)
    if assignment.shape != oracle.shape:
        raise ValueError(f"assignment {assignment.shape} and oracle {oracle.shape} differ")
    a_vals, a_idx = np.unique(assignment, return_inverse=True)
    o_vals, o_idx = np.unique(oracle, return_inverse=True)
    counts = np.zeros((len(a_vals), len(o_vals)))
    np.add.at(counts, (a_idx, o_idx), 1)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return float(counts[rows, cols].sum() / len(assignment))
