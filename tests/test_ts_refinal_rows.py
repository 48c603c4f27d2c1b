"""The final-stage replay of a saved table (`sgem.bench.replay`, benchmarks/ts_refinal.py)
starts SGEM from the search's own cells: a row whose final check may have changed its cells,
without them, is refused (no training here)."""

from __future__ import annotations

import pytest

from sgem.bench.replay import differs_for_one_expert, replay_sgem
from sgem.errors import SgemUserError


def test_a_checked_row_without_the_searched_cells_is_refused() -> None:
    row = {
        "method": "sgem",
        "test_nll": 0.2,
        "assignment": [0, 1],
        "architectures": ["gru<0|gru<0"] * 2,
        "n_trained": 40,
        "final_check": {"changed_architectures": True},
    }
    cfg = {"search": {"n_experts": 2}}
    with pytest.raises(SgemUserError, match="search_architectures"):
        replay_sgem(row, None, cfg, None)


def test_one_expert_rows_are_replayed_when_more_than_warm_starts_change():
    """A K = 1 MoE is its global network: a warm start leaves it unchanged (copy the row),
    dropping the refit does not (retrain it)."""
    assert not differs_for_one_expert("validation", "validation-warm")
    assert not differs_for_one_expert("validation-warm-norefit", "validation-norefit")
    assert differs_for_one_expert("validation-warm", "validation-warm-norefit")
    assert differs_for_one_expert("fixed", "validation")
    assert not differs_for_one_expert("fixed", "fixed")
