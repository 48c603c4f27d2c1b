"""The final MoE and the leaderboard kept in the run directory (`sgem.run.kept_final`,
`sgem.run.kept_leaderboard`): a run interrupted after them resumes without training them
again and ends with the uninterrupted result; a damaged file, or one kept for another search,
is never trusted, and a final MoE trained again voids the kept leaderboard."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from helpers import copy_run, two_cloud_table

import sgem.run.finish
from sgem.methods.sgem import SgemMethod
from sgem.run.kept_final import FINAL_FILE, KEPT_STAGES
from sgem.run.kept_leaderboard import LEADERBOARD_FILE
from sgem.run.pipeline import resume_experiment

#: result.json's fields that time the run or say it was resumed (and any "*_seconds")
_TIMED = ("timing", "wall_seconds", "clock", "resumed", "seconds", "stage_seconds")


def _untimed(obj):
    if isinstance(obj, dict):
        kept = {k: v for k, v in obj.items() if k not in _TIMED and not k.endswith("_seconds")}
        return {k: _untimed(v) for k, v in kept.items()}
    if isinstance(obj, list):
        return [_untimed(v) for v in obj]
    return obj


@pytest.fixture
def after_final(toy_smoke_run, tmp_path) -> Path:
    """A copy of the finished toy run, as if it were killed after its final stages."""
    out = copy_run(toy_smoke_run[0], tmp_path / "run")
    (out / "result.json").unlink()
    return out


@pytest.fixture(scope="module")
def table_run(tmp_path_factory) -> tuple[Path, Path, dict]:
    """A finished `sgem fit` of a small table saved as a combination (seconds): (its run,
    its CSV, its result)."""
    from sgem.cli import main

    root = tmp_path_factory.mktemp("kept")
    csv, cfg = two_cloud_table(root)
    args = ["fit", str(csv), "--target", "label", "--clusters", "4", "--executor", "inline"]
    run = root / "run"
    assert main([*args, "--out", str(run), "--config", str(cfg), "--quiet"]) == 0
    return run, csv, json.loads((run / "result.json").read_text())


def _interrupted(run: Path, to: Path) -> Path:
    """A copy of finished `run` as if it were killed after its leaderboard."""
    out = copy_run(run, to)
    (out / "result.json").unlink()
    return out


def _no_final_stage(*args, **kwargs):
    raise AssertionError("the final stage trained again although its MoE was kept")


def _no_leaderboard(*args, **kwargs):
    raise AssertionError("the leaderboard was fitted again although it was kept")


def test_the_kept_final_moe_is_written_with_every_stage_done(toy_smoke_run) -> None:
    from safetensors import safe_open

    with safe_open(str(toy_smoke_run[0] / FINAL_FILE), framework="pt") as f:
        doc = json.loads(f.metadata()["kept"])
    # the toy has no time budget: its seed rounds never run, the references stage always
    assert tuple(doc["done"]) == KEPT_STAGES[:2]


def test_a_run_killed_after_its_leaderboard_resumes_without_training_either(
    toy_smoke_run, after_final, monkeypatch
) -> None:
    monkeypatch.setattr(SgemMethod, "final", _no_final_stage)
    monkeypatch.setattr(sgem.run.finish, "compete", _no_leaderboard)
    resumed = resume_experiment(after_final, progress=False)
    assert resumed["resumed"] is True
    assert _untimed(resumed) == _untimed(toy_smoke_run[1])
    model, ref = after_final / "model", toy_smoke_run[0] / "model"
    for name in ("experts.safetensors", "preprocessing.safetensors"):
        assert (model / name).read_bytes() == (ref / name).read_bytes(), name


@pytest.mark.parametrize("damage", ["truncated", "other search"])
def test_a_damaged_or_foreign_kept_final_moe_is_trained_again(
    table_run, tmp_path, damage, caplog
) -> None:
    after_final = _interrupted(table_run[0], tmp_path / "run")
    file = after_final / FINAL_FILE
    if damage == "truncated":
        file.write_bytes(file.read_bytes()[:-100])
    else:  # a file kept for another search (another run's, copied in)
        from safetensors.torch import load, save

        raw = file.read_bytes()
        from safetensors import safe_open

        with safe_open(str(file), framework="pt") as f:
            metadata = f.metadata()
        file.write_bytes(save(load(raw), metadata={**metadata, "key": "0" * 64}))
    (after_final / LEADERBOARD_FILE).write_bytes(b"kept for the final MoE before")
    with caplog.at_level(logging.WARNING, logger="sgem.run"):
        resumed = resume_experiment(after_final, progress=False)
    assert "training it again" in caplog.text
    assert "leaderboard is unusable" not in caplog.text  # removed, not read: never trusted
    assert _untimed(resumed) == _untimed(table_run[2])


def test_the_kept_moe_predicts_as_the_trained_one(toy_smoke_run, after_final) -> None:
    import sgem

    resume_experiment(after_final, progress=False)
    x = np.random.default_rng(0).normal(size=(20, 2)).astype(np.float32)
    got = sgem.load(after_final).predict_proba(x)
    assert np.array_equal(got, sgem.load(toy_smoke_run[0]).predict_proba(x))


def test_a_damaged_kept_leaderboard_is_fitted_again(table_run, tmp_path, caplog) -> None:
    after_final = _interrupted(table_run[0], tmp_path / "run")
    file = after_final / LEADERBOARD_FILE
    file.write_bytes(file.read_bytes()[:-50])
    with caplog.at_level(logging.WARNING, logger="sgem.run.kept_leaderboard"):
        resumed = resume_experiment(after_final, progress=False)
    assert "fitting it again" in caplog.text
    assert _untimed(resumed) == _untimed(table_run[2])


def test_a_table_fit_resumes_to_the_same_combination_without_refitting(
    table_run, tmp_path, monkeypatch
) -> None:
    import pandas as pd

    import sgem

    run, csv, finished = table_run
    assert finished["leaderboard"]["shipped"]["model"].startswith("a combination")
    copy = _interrupted(run, tmp_path / "copy")
    monkeypatch.setattr(SgemMethod, "final", _no_final_stage)
    monkeypatch.setattr(sgem.run.finish, "compete", _no_leaderboard)
    assert _untimed(resume_experiment(copy, progress=False)) == _untimed(finished)
    rows = pd.read_csv(csv).drop(columns="label").head(40)
    assert np.array_equal(sgem.load(copy).predict_proba(rows), sgem.load(run).predict_proba(rows))


def test_a_forecaster_of_averaged_experts_resumes_to_the_same_forecasts(
    tmp_path, monkeypatch
) -> None:
    """Series fits ship twins (each expert two averaged networks) and a combination with
    classical members: both read back whole."""
    import pandas as pd
    import yaml
    from helpers import TINY_SEARCH

    import sgem
    from sgem.cli import main

    rng = np.random.default_rng(0)
    dates = pd.date_range("2010-01-01", periods=80, freq="MS").astype(str)
    frame = pd.concat(
        pd.DataFrame(
            {
                "unique_id": f"s{i}",
                "ds": dates,
                "y": 10 + i + 3 * np.sin(np.arange(80) * np.pi / 6 + i) + rng.normal(0, 0.5, 80),
            }
        )
        for i in range(12)
    )
    frame.to_csv(tmp_path / "s.csv", index=False)
    search = {**TINY_SEARCH, "n_experts": 2, "train": {"steps": 20, "batch_size": 32},
              "final_steps": 60, "champion_cells": 0, "final_check_archs": 1,
              "finalist_champions": False}  # fmt: skip
    cfg = {"search": search, "task": {"n_windows": 200, "n_clusters": 4}, "crps_samples": 10,
           "space": {"channels": 4, "n_nodes": 2}}  # fmt: skip
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    run = tmp_path / "run"
    args = ["fit", str(tmp_path / "s.csv"), "--horizon", "6", "--executor", "inline"]
    assert main([*args, "--config", str(tmp_path / "cfg.yaml"), "--out", str(run), "--quiet"]) == 0
    finished = json.loads((run / "result.json").read_text())
    assert all("twin" in expert for expert in finished["final_length"])
    copy = copy_run(run, tmp_path / "copy")
    (copy / "result.json").unlink()
    monkeypatch.setattr(SgemMethod, "final", _no_final_stage)
    monkeypatch.setattr(sgem.run.finish, "compete", _no_leaderboard)
    assert _untimed(resume_experiment(copy, progress=False)) == _untimed(finished)
    assert sgem.load(copy).predict(frame).equals(sgem.load(run).predict(frame))
