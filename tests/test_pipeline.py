"""End-to-end runs of the pipeline on a seconds-long config, and the run directory rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TOY_SMOKE, TOY_SMOKE_SEED, toy_smoke_args

from sgem.cli import main
from sgem.run.pipeline import run_experiment
from sgem.run.rundir import RunDirectoryError

SMOKE = TOY_SMOKE
REQUIRED = {
    "routing",
    "architectures",
    "oracle_match",
    "test_accuracy",
    "n_trained",
    "wall_seconds",
    "seed",
    "versions",
}


@pytest.fixture(scope="module")
def smoke_run(toy_smoke_run) -> tuple[Path, dict]:
    return toy_smoke_run  # (read only: the session's finished toy run)


def test_run_writes_everything(smoke_run) -> None:
    out, result = smoke_run
    assert set(result) >= REQUIRED
    on_disk = json.loads((out / "result.json").read_text())
    assert on_disk["routing"] == result["routing"]
    assert len(result["routing"]) == 20
    assert len(result["architectures"]) == 2
    assert 0.0 <= result["oracle_match"] <= 1.0
    assert 0.0 <= result["test_accuracy"] <= 1.0
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in trace] == [1, 2, 3, 4]
    for row in trace:
        assert {"objective", "routing", "oracle_match", "n_trained", "seconds"} <= set(row)
    import sqlite3

    with sqlite3.connect(out / "store.sqlite") as db:
        n_complete = db.execute(
            "SELECT COUNT(*) FROM observations WHERE status = 'complete'"
        ).fetchone()[0]
    assert n_complete == result["n_trained"]
    assert (out / "routing.png").stat().st_size > 10_000
    assert (out / "config.yaml").exists()
    # a reference: one network of each used expert's cell on all clusters, same test samples
    used = {result["architecture_keys"][k] for k in result["routing"]}
    assert set(result["global_networks_test"]) == used
    for scores in result["global_networks_test"].values():
        assert 0.0 <= scores["test_accuracy"] <= 1.0 and scores["test_nll"] > 0
    import sgem

    card = str(sgem.load(out))  # the model card carries them too
    assert all(f"reference, one network of cell {key}" in card for key in used)


def test_same_seed_same_result(smoke_run, tmp_path) -> None:
    _, first = smoke_run
    second = run_experiment(
        "toy", seed=TOY_SMOKE_SEED, out=tmp_path / "again", progress=False, config_file=SMOKE
    )
    for key in (
        "routing",
        "architectures",
        "test_accuracy",
        "test_nll",
        "n_trained",
        "region_val_losses",
        "global_networks_test",
    ):
        assert first[key] == second[key], key


def test_finished_run_is_reused_not_recomputed(smoke_run) -> None:
    out, first = smoke_run
    again = run_experiment("toy", seed=TOY_SMOKE_SEED, out=out, progress=False, config_file=SMOKE)
    assert again["reused"] is True
    assert again["routing"] == first["routing"]


def test_typed_run_config_is_the_same_run(smoke_run) -> None:
    """A `RunConfig` (typed, validated) names the same run as the mapping `sgem run` wrote:
    its config.yaml text and store fingerprint are unchanged, so the finished run is reused."""
    import yaml

    from sgem.run.pipeline import run_config
    from sgem.run.runconfig import config_fingerprint, load_run_config
    from sgem.run.rundir import RunDirectory

    out, first = smoke_run
    cfg = load_run_config("toy", SMOKE, seed=TOY_SMOKE_SEED)
    stored = RunDirectory(out).read_config()["run"]
    assert cfg.to_dict() == stored
    assert yaml.safe_dump(cfg.to_dict(), sort_keys=False) == yaml.safe_dump(stored, sort_keys=False)
    assert cfg.fingerprint == config_fingerprint(stored)
    again = run_config(cfg, out, progress=False)
    assert again["reused"] is True and again["routing"] == first["routing"]


def test_directory_with_a_different_run_is_refused(smoke_run) -> None:
    out, _ = smoke_run
    with pytest.raises(RunDirectoryError, match=r"different run.*seed"):
        run_experiment("toy", seed=4, out=out, progress=False, config_file=SMOKE)


def test_non_run_directory_is_refused(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RunDirectoryError, match="holds no sgem run"):
        run_experiment("toy", seed=0, out=tmp_path, progress=False, config_file=SMOKE)


def test_unknown_config_key_is_refused(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("search:\n  n_iterationz: 3\n")
    with pytest.raises(ValueError, match="n_iterationz"):
        run_experiment("toy", seed=0, out=tmp_path / "x", progress=False, config_file=bad)


def test_cli_reports_errors_cleanly(smoke_run, capsys) -> None:
    out, _ = smoke_run
    code = main(["run", "toy", "--seed", "9", "--out", str(out), "--config", str(SMOKE), "--quiet"])
    assert code == 2
    assert "different run" in capsys.readouterr().err


def test_cli_prints_summary_of_finished_run(smoke_run, capsys) -> None:
    out, _ = smoke_run
    assert main(toy_smoke_args(out)) == 0
    text = capsys.readouterr().out
    assert "oracle match" in text and "MoE test accuracy" in text
