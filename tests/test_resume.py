"""Crash safety: a SIGKILLed run resumes without retraining finished work and reproduces
the uninterrupted result; bad stores and foreign configs are refused without data loss."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import TOY_SMOKE, TOY_SMOKE_SEED, copy_run, toy_smoke_args

from sgem.run.pipeline import resume_experiment, run_experiment
from sgem.search.store import StoreError

COMPARED = (
    "routing",
    "architectures",
    "oracle_match",
    "test_accuracy",
    "test_nll",
    "n_trained",
    "region_val_losses",
)


def _latest_checkpoint(store: Path) -> int:
    if not store.exists():
        return -1
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
            row = db.execute("SELECT MAX(iteration) FROM checkpoints").fetchone()
    except sqlite3.Error:
        return -1
    return -1 if row[0] is None else int(row[0])


def _complete_keys(store: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(store) as db:
        return db.execute(
            "SELECT arch, mask FROM observations WHERE status = 'complete'"
        ).fetchall()


@pytest.fixture
def interrupted(toy_smoke_run, tmp_path) -> Path:
    """A copy of the finished toy run, as if it were interrupted after its search."""
    out = copy_run(toy_smoke_run[0], tmp_path / "run")
    (out / "result.json").unlink()
    return out


def test_sigkill_then_resume_reproduces_the_uninterrupted_run(toy_smoke_run, tmp_path) -> None:
    uninterrupted = toy_smoke_run[1]
    out = tmp_path / "killed"
    store = out / "store.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sgem.cli", *toy_smoke_args(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while _latest_checkpoint(store) < 1:  # at least one full S-step is committed
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.time() < deadline, "no checkpoint after 120 s"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (out / "result.json").exists()
    before = _complete_keys(store)
    assert before, "nothing was committed before the kill"

    resumed = resume_experiment(out, progress=False)

    after = _complete_keys(store)
    assert len(after) == len(set(after)), "a completed observation was trained twice"
    assert set(before) <= set(after)
    assert resumed["resumed"] is True
    for key in COMPARED:
        assert resumed[key] == uninterrupted[key], key
    trace = (out / "trace.jsonl").read_text().splitlines()
    assert len(trace) == 4


def test_resume_refuses_an_edited_config_and_keeps_the_data(interrupted) -> None:
    out = interrupted
    n_rows = len(_complete_keys(out / "store.sqlite"))
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    cfg["run"]["search"]["n_iterations"] = 7
    (out / "config.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(StoreError, match="different configuration"):
        resume_experiment(out, progress=False)
    assert len(_complete_keys(out / "store.sqlite")) == n_rows


def test_corrupt_store_is_refused_with_a_clear_message(interrupted) -> None:
    out = interrupted
    (out / "store.sqlite").write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(out / "store.sqlite") + suffix).unlink(missing_ok=True)
    with pytest.raises(StoreError, match="corrupt or not an SQLite file"):
        resume_experiment(out, progress=False)


def test_store_from_another_schema_version_is_refused(interrupted) -> None:
    out = interrupted
    with sqlite3.connect(out / "store.sqlite") as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99"):
        resume_experiment(out, progress=False)


def test_run_on_an_unfinished_directory_points_to_resume(interrupted) -> None:
    with pytest.raises(ValueError, match="sgem resume"):
        run_experiment(
            "toy", seed=TOY_SMOKE_SEED, out=interrupted, progress=False, config_file=TOY_SMOKE
        )
