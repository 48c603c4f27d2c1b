"""A run directory is never reused or resumed for data that changed since it was read: the
same `sgem fit train.csv --out runs/x` after the file changed returned the old model."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from helpers import TINY_SEARCH

import sgem
from sgem.run.input_fingerprint import changed_input, input_fingerprint
from sgem.run.rundir import RunDirectory, RunDirectoryError


def _table(path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(120, 3))
    frame = pd.DataFrame(x, columns=list("abc")).assign(y=(x[:, 0] > 0).astype(int))
    frame.to_csv(path, index=False)


def test_a_finished_run_is_reused_for_the_same_file_and_refused_for_a_changed_one(
    tmp_path,
) -> None:
    data, out = tmp_path / "train.csv", tmp_path / "run"
    _table(data, 0)
    config = {"search": dict(TINY_SEARCH)}
    sgem.fit(data, target="y", out=out, progress=False, config=config)
    os.utime(data)  # saved again, same bytes: still the same data
    assert sgem.fit(data, target="y", out=out, progress=False, config=config).result["reused"]
    _table(data, 1)
    changed = r"fitted on other data: .*train\.csv changed since the run read it .*its own --out"
    with pytest.raises(RunDirectoryError, match=changed):
        sgem.fit(data, target="y", out=out, progress=False, config=config)


def test_resume_refuses_an_unfinished_run_whose_data_changed(tmp_path) -> None:
    data = tmp_path / "train.csv"
    _table(data, 0)
    run = {"task": {"name": "table", "path": str(data)}}
    rundir = RunDirectory(tmp_path / "run")
    rundir.prepare({"run": run, "input": input_fingerprint(run)})
    assert rundir.load_for_resume()["run"] == run
    _table(data, 2)
    with pytest.raises(RunDirectoryError, match="holds a run fitted on other data"):
        rundir.load_for_resume()
    with pytest.raises(RunDirectoryError, match="holds a run fitted on other data"):
        rundir.prepare({"run": run, "input": input_fingerprint(run)})


def test_a_folders_fingerprint_sees_added_and_resized_files(tmp_path) -> None:
    folder = tmp_path / "images" / "cat"
    folder.mkdir(parents=True)
    (folder / "a.png").write_bytes(b"12345")
    run = {"task": {"path": str(tmp_path / "images")}}
    recorded = input_fingerprint(run)
    assert changed_input(recorded, run) is None
    (folder / "b.png").write_bytes(b"1")
    assert "changed (it held 1 files" in changed_input(recorded, run)
    (folder / "b.png").unlink()
    (folder / "a.png").write_bytes(b"123456")
    assert changed_input(recorded, run) is not None
    (folder.parent.parent / "images" / "cat" / "a.png").unlink()
    folder.rmdir()
    (tmp_path / "images").rmdir()
    assert changed_input(recorded, run).endswith("no longer exists")
    assert changed_input(None, run) is None  # (a run written before fingerprints: no check)


def test_the_cli_says_when_it_shows_a_finished_fit_instead_of_fitting(tmp_path, capsys) -> None:
    import yaml

    from sgem.cli import main

    data, out, config = tmp_path / "train.csv", tmp_path / "run", tmp_path / "tiny.yaml"
    _table(data, 0)
    config.write_text(yaml.safe_dump({"search": dict(TINY_SEARCH)}))
    command = ["fit", str(data), "--target", "y", "--out", str(out), "--config", str(config)]
    assert main([*command, "--quiet"]) == 0
    assert "already in" not in capsys.readouterr().out
    assert main([*command, "--quiet"]) == 0
    assert f"(the finished fit already in {out} is shown" in capsys.readouterr().out
