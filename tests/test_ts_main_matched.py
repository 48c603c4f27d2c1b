"""benchmarks/ts_main.py --matched: the searching baselines also at SGEM's own number of
candidate trainings on each seed, in the same table (smoke scale, one seed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sgem.bench.config import scale_defaults

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "ts_main.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--scale", "smoke", "--seeds", "0", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.requires_shared_data("timeseries")
def test_matched_rows_spend_sgems_trainings_and_are_paired(tmp_path):
    done = _run("--methods", "sgem", "global_single", "--matched", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads((tmp_path / "ts_main_smoke.json").read_text())
    rows = {r["method"]: r for r in data["rows"]}
    assert set(rows) == {"sgem", "global_single", "global_single@sgem"}
    matched = rows["global_single@sgem"]
    assert matched["budget"] == rows["sgem"]["n_trained"]
    assert rows["global_single"]["n_trained"] < matched["n_trained"] <= matched["budget"]
    assert "global_single@sgem" in data["comparisons"]
    table = (tmp_path / "ts_main_smoke.md").read_text()
    assert "Global single (K=1) @ SGEM's trainings" in table


def test_matched_needs_sgem_in_the_methods(tmp_path):
    done = _run("--methods", "geometry", "--matched", "--out", str(tmp_path))
    assert done.returncode == 2 and "add sgem to --methods" in done.stderr


def test_context_and_horizon_flags_reach_the_task():
    """Short series (quarterly, yearly) need a shorter window than the preset's 96 + 24."""
    task = scale_defaults("smoke", "--context", "32", "--horizon", "8")["task"]
    assert (task["context"], task["horizon"]) == (32, 8)
    default = scale_defaults("smoke")["task"]
    assert (default["context"], default["horizon"]) == (96, 24)


@pytest.mark.requires_shared_data("timeseries")
def test_saved_champion_search_gives_the_rows_a_fresh_search_gives(tmp_path):
    """--champions-from: BestArch x K reusing a saved table's best-single-cell search trains
    the same final MoE as a run that searched (deterministic in task, seed and budget)."""
    fresh = tmp_path / "fresh"
    done = _run("--methods", "global_single", "bestarch_x_k", "--out", str(fresh))
    assert done.returncode == 0, done.stderr[-2000:]
    saved = fresh / "ts_main_smoke.json"
    reused = tmp_path / "reused"
    done = _run("--methods", "bestarch_x_k", "--champions-from", str(saved), "--out", str(reused))
    assert done.returncode == 0, done.stderr[-2000:]
    (a,) = [r for r in json.loads(saved.read_text())["rows"] if r["method"] == "bestarch_x_k"]
    (b,) = json.loads((reused / "ts_main_smoke.json").read_text())["rows"]
    for key in ("architectures", "assignment", "n_trained", "test_nll", "test_wql"):
        assert a[key] == b[key], key
    wrong = _run(
        "--methods",
        "bestarch_x_k",
        "--budget",
        "3",
        "--champions-from",
        str(saved),
        "--out",
        str(tmp_path / "wrong"),
    )
    assert wrong.returncode != 0 and "pass a table run at --budget 3" in wrong.stderr
