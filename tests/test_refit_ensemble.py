"""benchmarks/refit_ensemble.py at smoke scale: it retrains a saved row's final MoE exactly
(the refit member re-scores the row), and the mixture's NLL is never above the mean of its
two members' (-log of a mean density is at most the mean of -logs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.requires_shared_data("timeseries")
def test_refit_ensemble_replays_the_row_and_mixes_soundly(tmp_path):
    run = [sys.executable, str(BENCH / "ts_main.py"), "--scale", "smoke", "--seeds", "0"]
    # the refit member replays a row saved with the refit alone (the preset ships twins)
    run += ["--final-length", "validation-warm"]
    done = subprocess.run(
        [*run, "--methods", "geometry", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "ens.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "refit_ensemble.py"),
            str(tmp_path / "ts_main_smoke.json"),
            "--method",
            "geometry",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert abs(row["refit"] - row["saved_row_test_nll"]) < 1e-6
    assert abs(row["refit"] - row["reported"]["validation-warm"]) < 1e-6
    assert row["mixture"] <= 0.5 * (row["refit"] + row["tracked"]) + 1e-9
