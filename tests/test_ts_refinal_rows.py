"""benchmarks/ts_refinal.py replays SGEM's final stage from the search's own cells: a row
whose final check may have changed its cells, without them, is refused (no training here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def ts_refinal():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports ts_main and scaling beside it
    try:
        spec = importlib.util.spec_from_file_location("ts_refinal", BENCHMARKS / "ts_refinal.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def test_a_checked_row_without_the_searched_cells_is_refused(ts_refinal) -> None:
    row = {
        "method": "sgem",
        "test_nll": 0.2,
        "assignment": [0, 1],
        "architectures": ["gru<0|gru<0"] * 2,
        "n_trained": 40,
        "final_check": {"changed_architectures": True},
    }
    cfg = {"search": {"n_experts": 2}}
    with pytest.raises(SystemExit, match="search_architectures"):
        ts_refinal.replay_sgem(row, None, cfg, None, seed=3)


def test_one_expert_rows_are_replayed_when_more_than_warm_starts_change(ts_refinal):
    """A K = 1 MoE is its global network: a warm start leaves it unchanged (copy the row),
    dropping the refit does not (retrain it)."""
    differs = ts_refinal.differs_for_one_expert
    assert not differs("validation", "validation-warm")
    assert not differs("validation-warm-norefit", "validation-norefit")
    assert differs("validation-warm", "validation-warm-norefit")
    assert differs("fixed", "validation") and not differs("fixed", "fixed")
