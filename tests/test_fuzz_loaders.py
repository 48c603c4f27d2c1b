"""Fuzzed loaders: saved model directories and run directories mutated in >= 500 seeded ways
(tests/loader_fuzz_cases.py, loader_fuzz_run.py) are either read exactly as before or refused
with a clear user error naming the file: never a traceback, a hang, a silently different
prediction or executed code. Two `sgem predict` on one model at once agree; a second live
writer on a run directory is refused.

The full set (about 2,000 cases) runs in benchmarks/fuzz_loaders.py; here every class is
capped at PER_CLASS cases, spread evenly over it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from loader_fuzz import ROWS, Fuzzer, build_bases, format_table, summary
from loader_fuzz_cases import all_cases, subset

PER_CLASS = 50
CLI = [sys.executable, "-m", "sgem.cli"]


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict[str, Path]:
    return build_bases(tmp_path_factory.mktemp("fuzz-bases"))


def test_mutated_directories_are_read_as_before_or_refused(bases, tmp_path) -> None:
    fuzzer = Fuzzer(bases, tmp_path)
    cases = subset(all_cases(bases), PER_CLASS)
    outcomes = [fuzzer.run_case(case) for case in cases]
    table = summary(outcomes)
    print("\n" + format_table(table))
    assert len(outcomes) >= 500 and len(table) >= 20
    failures = [f for row in table.values() for f in row["failures"]]
    assert not failures, "\n".join(failures)
    # the kinds of damage a checksum cannot see are refused by the deeper checks
    for cls in ("tensor-nonfinite", "tensor-shape", "tensor-dtype", "symlink", "store-sql"):
        assert table[cls]["outcomes"].get("refused", 0) >= 5, cls
    assert table["trace-torn"]["outcomes"].get("tolerated", 0) >= 3


@pytest.fixture(scope="module")
def held_run(bases, tmp_path_factory):
    """A copy of the run, unfinished (`sgem resume` would continue it), whose run lock a
    live process holds, as a running `sgem run` / `sgem resume` does: (run, holder pid)."""
    run = tmp_path_factory.mktemp("held") / "run"
    shutil.copytree(bases["run"], run)
    (run / "result.json").unlink()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from sgem.run.rundir import RunDirectory\n"
            f"with RunDirectory({str(run)!r}).lock():\n"
            "    print('held', flush=True); time.sleep(300)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield run, holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_two_predicts_on_one_model_at_once_agree(held_run, tmp_path) -> None:
    """Two `sgem predict` on one model at the same time (while a writer holds the run:
    readers take no lock) both succeed with identical output."""
    run, _ = held_run
    ROWS.to_csv(tmp_path / "new.csv", index=False)
    outs = [tmp_path / f"preds{i}.csv" for i in range(2)]
    procs = [
        subprocess.Popen(
            [*CLI, "predict", str(run), str(tmp_path / "new.csv"), "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
    assert outs[0].read_bytes() == outs[1].read_bytes()
    assert len(outs[0].read_text().splitlines()) == len(ROWS) + 1


def test_a_second_live_writer_is_refused(held_run) -> None:
    run, pid = held_run
    second = subprocess.run(
        [*CLI, "resume", str(run), "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 2, second.stderr
    assert f"in use by process {pid}" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1  # one line, no traceback
    assert not (run / "result.json").exists()  # nothing was written
