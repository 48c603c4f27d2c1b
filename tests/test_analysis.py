"""The operation-effect analysis on observations with a known, planted op effect."""

from __future__ import annotations

import json
import os
import sqlite3
import stat

import numpy as np
import pytest

from sgem.cli import main
from sgem.report.analysis import RunObservations, format_op_table, load_run, op_effects
from sgem.search.store import Observation, ObservationStore
from sgem.space.timeseries import TimeSeriesSpace

OPS = ("moving_average", "dilated_conv", "gru", "skip")
M = 6  # clusters 0-2: domain "a"; clusters 3-5: domain "b"
DOMAIN = np.array([0, 0, 0, 1, 1, 1])


def planted(n: int = 300, seed: int = 0) -> RunObservations:
    """gru helps domain a (-0.5) and hurts domain b (+0.5); skip hurts both (+0.3);
    every observation has an architecture-wide strength that standardisation removes."""
    rng = np.random.default_rng(seed)
    space = TimeSeriesSpace(op_names=OPS, n_nodes=2, channels=4)
    archs = space.sample_many(n, rng)
    masks = rng.random((n, M)) < 0.5
    masks[~masks.any(1), 0] = True
    losses = np.empty((n, M))
    for i, a in enumerate(archs):
        gru, skip = float(a.uses("gru")), float(a.uses("skip"))
        base = np.where(DOMAIN == 0, 1.0 - 0.5 * gru, 3.0 + 0.5 * gru) + 0.3 * skip
        losses[i] = base + 0.2 * rng.normal() + 0.1 * rng.normal(size=M)
    losses[0, :] = 1e6  # one diverged training: winsorised, it must not set the scale
    return RunObservations(archs, masks, losses, DOMAIN.copy(), ["a", "b"])


def test_planted_effects_are_recovered_with_intervals():
    r = op_effects(planted(), ops=OPS, n_bootstrap=400)
    gru, skip = r["effects"]["gru"], r["effects"]["skip"]
    assert gru["a"]["effect"] < -0.5 and gru["a"]["significant"] and gru["a"]["hi"] < 0
    assert gru["b"]["effect"] > 0.5 and gru["b"]["significant"] and gru["b"]["lo"] > 0
    assert skip["a"]["effect"] > 0.2 and skip["b"]["effect"] > 0.2
    # ops co-occur in a cell, so unplanted ops get confounded effects; the planted one
    # stays the extreme in both directions
    for d, pick in (("a", min), ("b", max)):
        effects = {op: r["effects"][op][d]["effect"] for op in OPS}
        assert pick(effects, key=effects.get) == "gru"
        for op in OPS:
            e = r["effects"][op][d]
            assert e["lo"] <= e["effect"] <= e["hi"]
    # only in-mask pairs count
    run = planted()
    assert r["n_pairs"] == int(run.masks.sum()) and r["n_observations"] == 300
    assert set(r["spearman"]) == {"a vs b"} and -1.0 <= r["spearman"]["a vs b"] <= 1.0
    assert r["spread"]["a"] > 0 and r["spread"]["b"] > 0


def test_domains_that_agree_correlate_and_pooling_runs_works():
    run = planted()
    archs, masks, losses = run.archs[1:], run.masks[1:], run.losses[1:]  # no diverged row
    same = RunObservations(archs, masks, losses, np.zeros(M, int), ["a"])
    flipped = RunObservations(archs, masks, -losses, np.zeros(M, int), ["b"])
    r = op_effects([same, flipped], ops=OPS, n_bootstrap=50)
    assert r["domains"] == ["a", "b"] and r["spearman"]["a vs b"] == pytest.approx(-1.0)
    pooled = op_effects([planted(seed=0), planted(seed=1)], ops=OPS, n_bootstrap=50)
    assert pooled["n_observations"] == 600 and pooled["effects"]["gru"]["a"]["effect"] < -0.5
    text = format_op_table(pooled)
    assert "| gru |" in text and "**" in text and "architecture spread" in text


def test_bad_input_is_refused():
    run = planted(20)
    with pytest.raises(ValueError, match="expected masks and losses"):
        RunObservations(run.archs, run.masks[:, :3], run.losses, DOMAIN, ["a", "b"])
    with pytest.raises(ValueError, match="at least one run"):
        op_effects([])


def _write_run(path, run: RunObservations) -> None:
    """A finished run directory's files for `ops`: the store (one training repeated) and
    result.json."""
    store = ObservationStore(M, path / "store.sqlite")
    for i, (a, m, loss) in enumerate(zip(run.archs, run.masks, run.losses, strict=True)):
        store.add(Observation(a, m, loss, 0.1, i, "init", 0))
    store.add(Observation(run.archs[1], run.masks[1], run.losses[1], 0.1, 1, "init", 0))
    store.close()
    (path / "result.json").write_text(
        json.dumps({"oracle_partition": DOMAIN.tolist(), "domain_names": ["a", "b"]})
    )


def test_load_run_reads_a_run_directory_and_the_cli_prints_the_table(tmp_path, capsys):
    run = planted(80)
    _write_run(tmp_path, run)
    loaded = load_run(tmp_path)
    distinct = {(a.dumps(), m.tobytes()) for a, m in zip(run.archs, run.masks, strict=True)}
    assert len(loaded.archs) == len(distinct)
    np.testing.assert_allclose(loaded.losses[1], run.losses[1])
    assert main(["ops", str(tmp_path), "--bootstrap", "50"]) == 0
    assert "| gru |" in capsys.readouterr().out
    (tmp_path / "result.json").write_text(json.dumps({"oracle_partition": None}))
    assert main(["ops", str(tmp_path)]) == 2
    assert "no oracle partition" in capsys.readouterr().err


def test_ops_reads_a_read_only_run_directory_without_touching_it(tmp_path, capsys, monkeypatch):
    """Files 0444, folder 0555. Root ignores permissions, so the test also checks that the
    store is opened read-only: every SQLite connection is a `mode=ro` URI, no
    -wal/-shm/-journal appears, and the file's bytes and mtime are unchanged."""
    opened = []
    real_connect = sqlite3.connect

    def spy(database, *args, **kwargs):
        opened.append((str(database), kwargs.get("uri", False)))
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", spy)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _write_run(run_dir, planted(40))
    files = sorted(os.listdir(run_dir))
    assert files == ["result.json", "store.sqlite"]
    store = run_dir / "store.sqlite"
    before = store.read_bytes(), store.stat().st_mtime_ns
    for name in files:
        (run_dir / name).chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    run_dir.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH)
    try:
        opened.clear()
        assert main(["ops", str(run_dir), "--bootstrap", "20"]) == 0
        assert "| gru |" in capsys.readouterr().out
        assert opened and all(uri and "mode=ro" in db for db, uri in opened), opened
        assert sorted(os.listdir(run_dir)) == files
        assert (store.read_bytes(), store.stat().st_mtime_ns) == before
    finally:
        run_dir.chmod(stat.S_IRWXU)
        for name in os.listdir(run_dir):
            (run_dir / name).chmod(stat.S_IRUSR | stat.S_IWUSR)
