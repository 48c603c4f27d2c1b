"""Nothing in a run directory executes code when read, and store failures are told apart.

A planted pickle (as a checkpoint row, as an old-schema store, as a CIFAR batch) is refused
and its payload never runs; a checkpoint round-trips exactly; unreadable, corrupt,
foreign-version and missing stores each get their own message and fix.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import SMALL_SURROGATE

from sgem.data.images import read_cifar_pickle
from sgem.errors import SgemUserError
from sgem.search.checkpoint import decode_checkpoint, encode_checkpoint
from sgem.search.store import (
    SCHEMA_VERSION,
    Observation,
    ObservationStore,
    read_completed,
)
from sgem.search.store_errors import StoreError, _classify, check_store_present
from sgem.space import TabularSpace
from sgem.surrogate import Surrogate

M = 4


class _Payload:
    """Unpickling this creates `marker` (a stand-in for arbitrary code)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _OpenPayload(_Payload):
    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _evil(marker: Path, kind: type[_Payload] = _Payload) -> bytes:
    return pickle.dumps({"iteration": 3, "state": kind(marker)}, protocol=2)


def _store(path: Path) -> ObservationStore:
    return ObservationStore(M, path, fingerprint="abc")


# -- plain-data checkpoints ------------------------------------------------------------------
@pytest.mark.parametrize("kind", [_Payload, _OpenPayload])
def test_a_pickled_checkpoint_row_is_refused_and_never_runs(tmp_path, kind) -> None:
    path, marker = tmp_path / "store.sqlite", tmp_path / "pwned"
    _store(path).close()
    with sqlite3.connect(path) as db:
        blob = _evil(marker, kind)
        db.execute("INSERT INTO checkpoints VALUES (1, ?, ?, 0.0)", (blob, blob))
    store = _store(path)
    with pytest.raises(StoreError, match="corrupt"):
        store.latest_checkpoint(decode_checkpoint)
    store.close()
    assert not marker.exists()


def test_a_pickled_text_document_is_refused_and_never_runs(tmp_path) -> None:
    path, marker = tmp_path / "store.sqlite", tmp_path / "pwned"
    _store(path).close()
    with sqlite3.connect(path) as db:
        text = _evil(marker).decode("latin1")
        db.execute("INSERT INTO checkpoints VALUES (1, ?, ?, 0.0)", (text, _evil(marker)))
    with pytest.raises(StoreError, match="corrupt"):
        _store(path).latest_checkpoint(decode_checkpoint)
    assert not marker.exists()


def test_a_checkpoint_sqlite_cannot_decode_is_reported_as_corrupt(tmp_path) -> None:
    """Text that is not UTF-8 fails inside sqlite's fetch, before any decoding of ours."""
    path = tmp_path / "store.sqlite"
    _store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO checkpoints VALUES (1, CAST(X'7BFF7D' AS TEXT), X'00', 0.0)")
    with pytest.raises(StoreError, match=r"corrupt.*checkpoint"):
        _store(path).latest_checkpoint(decode_checkpoint)


def test_an_old_pickling_store_is_refused_by_its_schema_version(tmp_path) -> None:
    """Schema 1 kept pickles in `checkpoints.state`: refused before anything is read."""
    path, marker = tmp_path / "store.sqlite", tmp_path / "pwned"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE observations (id INTEGER PRIMARY KEY, arch TEXT, mask TEXT, "
            "status TEXT, losses TEXT, traceback TEXT, seconds REAL, seed INTEGER, device TEXT, "
            "phase TEXT, iteration INTEGER, attempt INTEGER, created REAL);"
            "CREATE TABLE checkpoints (iteration INTEGER PRIMARY KEY, state BLOB, created REAL);"
        )
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("schema_version", "1"), ("n_clusters", str(M)), ("fingerprint", "abc")],
        )
        db.execute("INSERT INTO checkpoints VALUES (1, ?, 0.0)", (_evil(marker),))
    with pytest.raises(StoreError, match="schema version 1") as info:
        _store(path)
    assert "fresh" in str(info.value) and "pickled" in str(info.value)
    with pytest.raises(StoreError, match="schema version 1"):
        read_completed(path)  # the read-only reader checks the version the same way
    assert not marker.exists()


def _search_state(space: TabularSpace) -> dict:
    """A state shaped like the one SGEM checkpoints, after some real draws and a fit."""
    rng = np.random.default_rng(7)
    archs = space.sample_many(6, rng)
    masks = (rng.random((6, M)) < 0.5).astype(np.float64)
    masks[:, 0] = 1.0
    surrogate = Surrogate(space, M, SMALL_SURROGATE, seed=0)
    surrogate.fit(archs, masks, rng.random((6, M)), seed=0)
    torch.manual_seed(11)
    torch.rand(5)
    return {
        "iteration": 3,
        "logits": rng.normal(size=(M, 2)) * np.pi,
        "archs": [a.dumps() for a in archs[:2]],
        "rng": rng.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "surrogate": surrogate.state_dict(),
        "trace": [
            {"iteration": 1, "kendall_tau": float("nan"), "jump": None, "routing": [0, 1, 1, 0]},
            {"iteration": 2, "measured": float("-inf"), "jump": {"accepted": False}, "x": 1e-310},
        ],
        "visible": [(archs[0].dumps(), "1010"), (archs[1].dumps(), "0111")],
        "failures": 2,
    }


def test_a_checkpoint_round_trips_exactly(tmp_path) -> None:
    space = TabularSpace(n_nodes=2)
    state = _search_state(space)
    store = _store(tmp_path / "store.sqlite")
    store.save_checkpoint(3, *encode_checkpoint(state))
    store.close()
    back = _store(tmp_path / "store.sqlite").latest_checkpoint(decode_checkpoint)

    assert back["iteration"] == 3 and back["failures"] == 2 and back["archs"] == state["archs"]
    assert back["logits"].dtype == np.float64
    assert back["logits"].tobytes() == state["logits"].tobytes()
    assert back["rng"] == state["rng"]
    mine, theirs = np.random.default_rng(), np.random.default_rng()
    mine.bit_generator.state, theirs.bit_generator.state = state["rng"], back["rng"]
    assert mine.random(4).tobytes() == theirs.random(4).tobytes()
    assert torch.equal(back["torch_rng"], state["torch_rng"])
    assert back["torch_rng"].dtype == state["torch_rng"].dtype
    for name, weights in state["surrogate"]["net"].items():
        assert back["surrogate"]["net"][name].dtype == weights.dtype
        assert torch.equal(back["surrogate"]["net"][name], weights), name
    for key in ("n_fits", "clip_value", "y_mean", "y_std"):
        assert back["surrogate"][key] == state["surrogate"][key], key
    assert back["visible"] == state["visible"]
    first, second = back["trace"]
    assert np.isnan(first["kendall_tau"]) and first["routing"] == [0, 1, 1, 0]
    assert second == state["trace"][1]
    # and it loads into a fresh surrogate, predicting bit for bit the same
    restored = Surrogate(space, M, SMALL_SURROGATE, seed=1)
    restored.load_state_dict(back["surrogate"])
    original = Surrogate(space, M, SMALL_SURROGATE, seed=1)
    original.load_state_dict(state["surrogate"])
    archs, masks = space.sample_many(3, np.random.default_rng(0)), np.ones((3, M))
    assert restored.predict(archs, masks).tobytes() == original.predict(archs, masks).tobytes()


def test_checkpoints_refuse_what_json_cannot_hold_exactly() -> None:
    for state in ({"thing": object()}, {1: "non-string key"}, {"__tensor__": "t0"}):
        with pytest.raises(TypeError):
            encode_checkpoint(state)


# -- CIFAR batches ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [_Payload, _OpenPayload])
def test_a_malicious_cifar_batch_is_refused_and_never_runs(tmp_path, kind) -> None:
    marker, path = tmp_path / "pwned", tmp_path / "data_batch_1"
    payload = {b"data": np.zeros((1, 3072), np.uint8), b"labels": [kind(marker)]}
    path.write_bytes(pickle.dumps(payload, protocol=2))
    name = "system" if kind is _Payload else "open"
    with pytest.raises(ValueError, match=f"refusing .*{name}"):
        read_cifar_pickle(path)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_an_honest_cifar_batch_still_reads(tmp_path, protocol) -> None:
    data = np.random.default_rng(0).integers(0, 256, (3, 3072), dtype=np.uint8)
    path = tmp_path / "test_batch"
    path.write_bytes(pickle.dumps({b"data": data, b"labels": [1, 2, 3]}, protocol=protocol))
    x, y = read_cifar_pickle(path)
    assert x.shape == (3, 32, 32, 3) and y.tolist() == [1, 2, 3]
    assert x.transpose(0, 3, 1, 2).reshape(3, -1).tobytes() == data.tobytes()


# -- store errors told apart -----------------------------------------------------------------
def _unreadable_advice(message: str) -> None:
    assert "cannot open" in message
    assert "readable and writable" in message and "free space" in message
    assert "move it aside" not in message and "mv " not in message


def test_store_error_is_a_user_error() -> None:
    assert issubclass(StoreError, SgemUserError)


def test_an_unopenable_store_is_not_called_corrupt(tmp_path) -> None:
    for path in (tmp_path / "no" / "such" / "dir" / "store.sqlite", tmp_path):
        with pytest.raises(StoreError, match="cannot open") as info:
            _store(path)
        _unreadable_advice(str(info.value))
        assert "corrupt" not in str(info.value)


@pytest.mark.parametrize(
    "exc",
    [
        PermissionError(13, "Permission denied"),
        sqlite3.OperationalError("unable to open database file"),
        sqlite3.OperationalError("attempt to write a readonly database"),
        sqlite3.OperationalError("database or disk is full"),
        sqlite3.OperationalError("disk I/O error"),
    ],
)
def test_permission_and_disk_errors_point_to_permissions_not_to_moving(tmp_path, exc) -> None:
    error = _classify(tmp_path / "store.sqlite", exc)
    assert "cannot open" in str(error)
    _unreadable_advice(str(error))


def test_a_read_only_store_is_unreadable_not_corrupt(tmp_path, monkeypatch) -> None:
    path = tmp_path / "store.sqlite"
    _store(path).close()

    def read_only(database, *args, **kwargs):
        return sqlite3.Connection(f"file:{database}?mode=ro", *args, uri=True, **kwargs)

    monkeypatch.setattr("sgem.search.store.sqlite3.connect", read_only)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(StoreError, match="cannot open") as info:
        _store(path)
    _unreadable_advice(str(info.value))


def test_a_corrupt_store_says_corrupt_and_how_to_start_over(tmp_path) -> None:
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="corrupt") as info:
        _store(path)
    assert "move it aside" in str(info.value) and "mv " in str(info.value)


def test_an_sqlite_file_that_is_not_a_store_is_corrupt(tmp_path) -> None:
    path = tmp_path / "store.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE other (x INTEGER)")
    with pytest.raises(StoreError, match="not an sgem observation store"):
        _store(path)


def test_another_schema_version_names_it_and_the_way_out(tmp_path) -> None:
    path = tmp_path / "store.sqlite"
    _store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99") as info:
        _store(path)
    message = str(info.value)
    assert f"reads version {SCHEMA_VERSION}" in message
    assert "fresh" in message and "sgem version" in message


def test_a_missing_or_empty_store_is_refused_where_work_was_recorded(tmp_path) -> None:
    path = tmp_path / "store.sqlite"
    with pytest.raises(StoreError, match="missing"):
        ObservationStore(M, path, must_exist=True)
    assert not path.exists()  # refused without creating a fresh store
    path.touch()
    with pytest.raises(StoreError, match="empty"):
        check_store_present(path)
    with pytest.raises(StoreError, match="empty"):
        ObservationStore(M, path, must_exist=True)
    assert path.stat().st_size == 0
    path.unlink()
    _store(path).close()  # a real store passes
    check_store_present(path)
    ObservationStore(M, path, fingerprint="abc", must_exist=True).close()


# -- the read-only reader (analysis of finished runs) -----------------------------------------
def _observation(space: TabularSpace, rng: np.random.Generator, seed: int) -> Observation:
    mask = np.array([True, seed % 2 == 0, True, False])
    return Observation(space.sample(rng), mask, rng.random(M), 0.1, seed, "init", 0)


def test_read_completed_reads_a_closed_store_without_writing(tmp_path) -> None:
    space, rng = TabularSpace(), np.random.default_rng(0)
    store = _store(tmp_path / "store.sqlite")
    written = [_observation(space, rng, i) for i in range(5)]
    for obs in written:
        store.add(obs)
    store.add(written[2])  # a reused training counts once
    store.close()
    before = sorted(os.listdir(tmp_path)), (tmp_path / "store.sqlite").read_bytes()
    got = read_completed(tmp_path / "store.sqlite", M)
    assert [o.key for o in got] == [o.key for o in written]
    np.testing.assert_array_equal(got[3].losses, written[3].losses)
    assert (sorted(os.listdir(tmp_path)), (tmp_path / "store.sqlite").read_bytes()) == before
    with pytest.raises(StoreError, match="written for 4 clusters, this run has 5"):
        read_completed(tmp_path / "store.sqlite", 5)
    with pytest.raises(StoreError, match="does not exist"):
        read_completed(tmp_path / "nothing.sqlite")
    assert not (tmp_path / "nothing.sqlite").exists()


def test_read_completed_sees_what_a_live_writer_committed(tmp_path) -> None:
    """Rows still in the writer's WAL (a running or killed search) are read too."""
    space, rng = TabularSpace(), np.random.default_rng(1)
    store = _store(tmp_path / "store.sqlite")
    try:
        for i in range(3):
            store.add(_observation(space, rng, i))
        assert (tmp_path / "store.sqlite-wal").stat().st_size > 0
        assert len(read_completed(tmp_path / "store.sqlite", M)) == 3
    finally:
        store.close()


def test_read_completed_refuses_other_versions_and_non_stores(tmp_path) -> None:
    path = tmp_path / "store.sqlite"
    _store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99"):
        read_completed(path)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE other (x INTEGER)")
    with pytest.raises(StoreError, match="not an sgem observation store"):
        read_completed(other)
