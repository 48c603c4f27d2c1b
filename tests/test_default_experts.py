"""K against the clusters the data gives: `sgem fit` without --experts shrinks the preset's
K to M (six long hourly series give M = 3, and the series preset's K is 4); a K the user
asked for is refused before any training when it exceeds M."""

from __future__ import annotations

import time

import pytest
from test_series_combination import fit_trends, trend_frame
from test_series_gaps import TINY

from sgem.errors import SgemUserError

SEARCH = {k: v for k, v in TINY["search"].items() if k != "n_experts"}  # the preset's K (4)
CONFIG = {**TINY, "search": SEARCH, "task": {"n_windows": 300, "n_clusters": 3}}


def test_the_presets_k_shrinks_to_the_clusters_the_data_gives(tmp_path, caplog) -> None:
    model = fit_trends(tmp_path / "run", CONFIG)
    assert len(model.result["routing"]) == 3 and max(model.result["routing"]) <= 2
    assert "K = 3 experts instead of 4" in caplog.text
    assert model.forecast([trend_frame()["y"].to_numpy()[:20]]).loc.shape == (1, 4)


def test_a_k_the_user_asked_for_is_refused_before_any_training(tmp_path) -> None:
    start = time.perf_counter()
    with pytest.raises(SgemUserError, match=r"K=4 exceeds the number of clusters M=3.*--experts 3"):
        fit_trends(tmp_path / "run", CONFIG, n_experts=4, time_budget=60)
    assert time.perf_counter() - start < 20  # no pilot, no classical references, no search
    # the refusal leaves the directory free: the corrected command is not "a different run"
    assert not (tmp_path / "run").exists()


def test_a_directory_with_finished_work_is_never_released(tmp_path) -> None:
    from sgem.run.rundir import RunDirectory

    run = RunDirectory(tmp_path / "run")
    run.prepare({"run": {"seed": 0}, "versions": {}})
    run.file("trace.jsonl").write_text('{"iteration": 0}\n')
    assert not run.release_unstarted() and run.file("config.yaml").exists()
    run.file("trace.jsonl").write_text("")
    (tmp_path / "run" / "input").write_text("the user's own file")
    assert run.release_unstarted() and not run.file("config.yaml").exists()
    assert (tmp_path / "run" / "input").exists()  # what the user put there stays
