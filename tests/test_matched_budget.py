"""benchmarks/matched_budget.py's pairing: SGEM's rows of one ts_main output against a
baseline's rows of another, on the seeds both have (no training here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def matched_budget():
    spec = importlib.util.spec_from_file_location(
        "matched_budget", BENCHMARKS / "matched_budget.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(method: str, seed: int, per_window: list[float], trained: int) -> dict:
    nll = sum(per_window) / len(per_window)
    return {
        "method": method,
        "seed": seed,
        "test_nll": nll,
        "test_wql": 0.1,
        "n_trained": trained,
        "test_nll_per_window": per_window,
    }


def test_pairs_only_shared_seeds_and_counts_wins(matched_budget) -> None:
    base = [_row("geometry", 0, [1.0, 1.0], 141), _row("geometry", 1, [0.5, 0.5], 141)]
    base += [_row("geometry", 2, [0.2, 0.2], 141)]  # no SGEM row on seed 2
    sgem = [_row("sgem", 0, [0.8, 0.9], 140), _row("sgem", 1, [0.6, 0.7], 150)]
    sgem += [_row("geometry", 0, [0.0, 0.0], 16)]  # not SGEM: never paired
    entry = matched_budget.paired(base, sgem, "geometry")
    assert entry["seeds"] == 2 and entry["sgem_ahead_on"] == 1
    assert set(entry["per_seed"]) == {"0", "1"}
    assert entry["per_seed"]["1"]["sgem_trainings"] == 150
    # the window differences: -0.2, -0.1, +0.1, +0.2 -> mean 0, an interval around it
    mean, (lo, hi) = entry["window_nll_diff"]["mean"], entry["window_nll_diff"]["ci95"]
    assert mean == pytest.approx(0.0, abs=1e-9) and lo < 0 < hi


def test_no_shared_seed_is_none(matched_budget) -> None:
    base = [_row("random_moe", 3, [1.0], 141)]
    assert matched_budget.paired(base, [_row("sgem", 0, [1.0], 140)], "random_moe") is None
