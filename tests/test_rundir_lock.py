"""One live process per run directory: a second run/resume is refused naming the holder; a
stale lock (its process gone) is taken over."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

import pytest

from sgem.run.rundir import LOCK, RunDirectory, RunDirectoryError


def test_second_holder_refused_while_the_first_lives(tmp_path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from sgem.run.rundir import RunDirectory\n"
            f"with RunDirectory({str(tmp_path)!r}).lock():\n"
            "    print('held', flush=True); time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        refused = pytest.raises(RunDirectoryError, match=f"in use by process {holder.pid}")
        with refused, RunDirectory(tmp_path).lock():
            pass
    finally:
        holder.kill()
        holder.wait()
    # the holder died without releasing: its lock is stale and is taken over
    assert (tmp_path / LOCK).exists()
    with RunDirectory(tmp_path).lock():
        assert json.loads((tmp_path / LOCK).read_text())["pid"] == os.getpid()
    assert not (tmp_path / LOCK).exists()


def test_stale_or_garbled_lock_is_taken_over(tmp_path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    lock = tmp_path / LOCK
    lock.write_text(json.dumps({"pid": pid, "host": platform.node(), "since": time.time()}))
    with RunDirectory(tmp_path).lock():
        pass
    lock.write_text("{half")
    with RunDirectory(tmp_path).lock():
        pass
    assert not lock.exists()


def test_taking_the_lock_removes_a_killed_writers_temporary_files(tmp_path) -> None:
    """A kill between an atomic write and its rename leaves `.name.XXXX.tmp` behind (the run
    clock is rewritten every second): the next holder removes them, and nothing else."""
    (tmp_path / "model").mkdir()
    left = [tmp_path / ".budget_clock.json.8s26khwg.tmp", tmp_path / "model" / ".model.json.a.tmp"]
    kept = [tmp_path / "budget_clock.json", tmp_path / "model" / "model.json", tmp_path / "x.tmp"]
    for f in left + kept:
        f.write_text("{}")
    with RunDirectory(tmp_path).lock():
        assert not any(f.exists() for f in left) and all(f.exists() for f in kept)


def test_lock_released_on_error(tmp_path) -> None:
    with pytest.raises(KeyError), RunDirectory(tmp_path).lock():
        raise KeyError("boom")
    assert not (tmp_path / LOCK).exists()


def test_resume_refuses_a_lost_store(toy_smoke_run, tmp_path) -> None:
    """A run whose trace has iterations but whose store is missing or empty is refused,
    never silently restarted from scratch."""
    from helpers import copy_run

    from sgem.errors import SgemUserError
    from sgem.run.pipeline import resume_experiment

    run = copy_run(toy_smoke_run[0], tmp_path / "run")
    (run / "result.json").unlink()  # pretend it was interrupted
    store = run / "store.sqlite"
    store.write_bytes(b"")
    with pytest.raises(SgemUserError, match="empty"):
        resume_experiment(run, progress=False)
    store.unlink()
    with pytest.raises(SgemUserError, match="missing"):
        resume_experiment(run, progress=False)
