"""benchmarks/ts_main.py --matched: the searching baselines also at SGEM's own number of
candidate trainings on each seed, in the same table (smoke scale, one seed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "ts_main.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--scale", "smoke", "--seeds", "0", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


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
    sys.path.insert(0, str(SCRIPT.parent))  # ts_main imports `scaling` beside it
    try:
        import ts_main
    finally:
        sys.path.remove(str(SCRIPT.parent))
    args = ts_main.build_parser().parse_args(["--context", "32", "--horizon", "8"])
    task = ts_main.scale_config(args)["task"]
    assert (task["context"], task["horizon"]) == (32, 8)
    default = ts_main.scale_config(ts_main.build_parser().parse_args([]))["task"]
    assert (default["context"], default["horizon"]) == (96, 24)
