"""Resume after a kill anywhere: `sgem fit` SIGKILLed in the search, the final training, the
leaderboard and while saving, resumed with `sgem resume` each time, ends with the result and
predictions of an uninterrupted run; the writes a resume reads are atomic or tolerate a torn
last record. (tests/test_resume.py kills the toy preset once; tests/test_time_budget.py a
budgeted fit; benchmarks/kill_resume.py is the stress version on tables, series, images.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from helpers import two_cloud_table

import sgem
from sgem.atomic import recover_dir, replace_dir, write_atomic
from sgem.run.crash_drill import attempt, next_command
from sgem.run.rundir import RunDirectory, RunDirectoryError

SGEM = shutil.which("sgem") or "sgem"
#: kill i: a seeded random moment, or just after clock stage X (inside the next stage)
KILLS = [(None, 1.0, 6.0), ("search", 0.0, 0.05), ("references", 0.0, 0.05),
         ("calibration", 0.0, 0.2)]  # fmt: skip
COMPARED = ("routing", "architectures", "region_val_losses", "test_nll", "test_accuracy",
            "n_trained")  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("kill")
    two_cloud_table(root)
    return root


def _fit(root, out) -> list[str]:
    return [SGEM, "fit", str(root / "train.csv"), "--target", "label", "--clusters", "4",
            "--out", str(out), "--config", str(root / "cfg.yaml"), "--executor", "inline",
            "--quiet"]  # fmt: skip


def _leaderboard(result: dict) -> list:
    rows = result["leaderboard"]["rows"]
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def test_a_fit_killed_in_every_stage_resumes_to_the_uninterrupted_result(files) -> None:
    ref_out, out = files / "ref", files / "killed"
    subprocess.run(_fit(files, ref_out), check=True, capture_output=True)
    rng = np.random.default_rng(34)
    resume = [SGEM, "resume", str(out), "--executor", "inline", "--quiet"]
    stages = []
    for after, low, high in KILLS:
        cmd = next_command(_fit(files, out), resume, out)
        a = attempt(cmd, out, float(rng.uniform(low, high)), after_stage=after, timeout=120)
        assert a.killed or a.returncode == 0, a.stderr
        stages.append(a.stage)
        if not a.killed:
            break
    last = attempt(next_command(_fit(files, out), resume, out), out, np.inf, timeout=120)
    assert not last.killed and last.returncode == 0, last.stderr
    print("stages killed:", stages)  # e.g. search, final_stage, leaderboard, saving
    assert sum(s != "end" for s in stages) >= 3, stages
    ref = json.loads((ref_out / "result.json").read_text())
    got = json.loads((out / "result.json").read_text())
    for key in COMPARED:
        assert got[key] == ref[key], key
    assert _leaderboard(got) == _leaderboard(ref)
    new = pd.read_csv(files / "train.csv").drop(columns="label").head(50)
    assert np.array_equal(sgem.load(out).predict_proba(new), sgem.load(ref_out).predict_proba(new))
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no leftovers


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch) -> None:
    import sgem.atomic

    target = tmp_path / "result.json"
    write_atomic(target, '{"a": 1}')

    def full(fd: int) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(sgem.atomic.os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, '{"a": 2}')
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary left


def test_a_torn_last_trace_line_is_skipped_a_torn_middle_one_refused(tmp_path) -> None:
    run = RunDirectory(tmp_path)
    run.append("trace.jsonl", {"iteration": 0})
    run.append("trace.jsonl", {"iteration": 1})
    with open(tmp_path / "trace.jsonl", "a") as fh:
        fh.write('{"iteration": 2, "obj')  # killed mid-append
    assert [r["iteration"] for r in run.read_trace()] == [0, 1]
    with open(tmp_path / "trace.jsonl", "a") as fh:
        fh.write('\n{"iteration": 3}\n')
    with pytest.raises(RunDirectoryError, match="line 3 is corrupt"):
        run.read_trace()


def test_a_kill_between_the_model_renames_is_undone(tmp_path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.json").write_text("old")
    staged = tmp_path / ".model-abc"
    staged.mkdir()
    (staged / "model.json").write_text("new")
    model.rename(tmp_path / ".model-old")  # the first rename happened, then SIGKILL
    recover_dir(model)
    assert (model / "model.json").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["model"]  # the unfinished copy is gone
    staged.mkdir()
    (staged / "model.json").write_text("new")
    replace_dir(staged, model)
    assert (model / "model.json").read_text() == "new" and sorted(os.listdir(tmp_path)) == ["model"]
