"""What an interrupted `sgem fit` tells its user to run next: `sgem resume DIR`, or the same
`sgem fit` again where the fit chooses K (one run per K, each reused or resumed)."""

from __future__ import annotations

import argparse

import pytest
import yaml

from sgem.cli.commands import _continue


def _budgeted(task: str) -> dict:
    return {"experts_at_most_clusters": True, "time_budget": 60, "task": {"name": task}}


def _args(experts=None) -> argparse.Namespace:
    return argparse.Namespace(experts=experts)


@pytest.mark.parametrize(
    ("experts", "run", "sub", "again"),
    [
        ("auto", None, None, True),
        (None, None, "experts-3", True),  # a choice of K under way
        (None, _budgeted("table"), None, True),  # a budgeted table fit grows K
        (None, _budgeted("series"), None, False),
        (None, None, None, False),  # nothing written yet
    ],
)
def test_the_advice_fits_the_fit(tmp_path, experts, run, sub, again) -> None:
    out = tmp_path / "out"
    out.mkdir()
    if run is not None:
        (out / "config.yaml").write_text(yaml.safe_dump({"run": run}))
    if sub is not None:
        (out / sub).mkdir()
    advice = _continue(_args(experts), str(out))
    assert ("the same `sgem fit`" in advice) is again
    assert advice.startswith("sgem resume") is not again
