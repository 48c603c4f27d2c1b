"""Observations and search checkpoints, persisted in SQLite (one file in the run directory).

An observation is an (architecture, training mask, per-cluster loss vector) triple. Each is
committed the moment its training finishes (status running -> complete / failed, with the
traceback). The search process is the only writer; WAL mode lets readers look in while it
runs.

Resume semantics. The store separates *visible* observations (those the current process
has requested so far, in request order: what the surrogate is fitted on) from *cached*
ones (completed in an earlier, interrupted process). A resumed search starts from its last
checkpoint with exactly the checkpoint's visible observations; when it asks for a training
that is already cached, the cached result is made visible instead of training again. So no
finished training is ever repeated, and the resumed run sees the same data in the same
order as an uninterrupted one.

Nothing in the file executes code when read. A checkpoint is plain data: a JSON document
plus one safetensors blob with its tensors (`sgem.search.checkpoint` encodes the search
state). Schema version 1 stored pickles; such stores are refused, never unpickled.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from ..space.arch import Arch
from .store_errors import StoreError, _classify, _corrupt, check_store_present

SCHEMA_VERSION = 2  # 2: checkpoints as JSON + safetensors (1 pickled them)

T = TypeVar("T")


def mask_to_str(mask: np.ndarray) -> str:
    return "".join("1" if b else "0" for b in np.asarray(mask, dtype=bool))


def mask_from_str(text: str) -> np.ndarray:
    return np.array([c == "1" for c in text], dtype=bool)


@dataclass(frozen=True)
class Observation:
    arch: Arch
    mask: np.ndarray  # (M,) bool: the clusters it was trained on
    losses: np.ndarray  # (M,) mean validation NLL per cluster
    seconds: float
    seed: int
    phase: str  # "init", "s-step", "incumbent", "explore", "jump", "final", "refit"
    iteration: int
    device: str = "cpu"

    @property
    def key(self) -> tuple[Arch, str]:
        return self.arch, mask_to_str(self.mask)

    def to_json(self) -> dict:
        return {
            "arch": self.arch.to_json(),
            "mask": mask_to_str(self.mask),
            "losses": [float(v) for v in self.losses],
            "seconds": round(self.seconds, 4),
            "seed": self.seed,
            "phase": self.phase,
            "iteration": self.iteration,
            "device": self.device,
        }


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS observations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    arch TEXT NOT NULL,
    mask TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed')),
    losses TEXT,
    traceback TEXT,
    seconds REAL,
    seed INTEGER NOT NULL,
    device TEXT,
    phase TEXT NOT NULL,
    iteration INTEGER NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    iteration INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    tensors BLOB NOT NULL,
    created REAL NOT NULL
);
"""


_COMPLETED = (
    "SELECT arch, mask, losses, seconds, seed, phase, iteration, device "
    "FROM observations WHERE status = 'complete' ORDER BY id"
)


def _first_per_key(rows: list, path: Path | None, m: int) -> dict[tuple[Arch, str], Observation]:
    """Rows of `_COMPLETED` as observations, the first completion of each (arch, mask); a
    row a buggy writer or a damaged file left malformed is refused as a corrupt store."""
    out: dict[tuple[Arch, str], Observation] = {}
    for row in rows:
        try:
            obs = _observation(row, m)
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            where = path or Path(":memory:")
            raise _corrupt(where, f"a completed training is malformed: {exc}") from exc
        out.setdefault(obs.key, obs)
    return out


def _observation(row: tuple, m: int) -> Observation:
    arch = Arch.from_json(json.loads(row[0]) if isinstance(row[0], str) else row[0])
    if not all(isinstance(op, str) for op in arch.ops) or not all(
        type(i) is int for i in arch.inputs
    ):
        raise ValueError(f"architecture {row[0]!r} is not names and input indices")
    if not isinstance(row[1], str) or len(row[1]) != m or set(row[1]) - {"0", "1"}:
        raise ValueError(f"mask {row[1]!r} is not {m} characters 0/1")
    losses = json.loads(row[2]) if isinstance(row[2], str) else None
    if not isinstance(losses, list) or len(losses) != m:
        raise ValueError(f"losses {row[2]!r} are not a list of {m} numbers")
    if not all(type(v) in (int, float) for v in losses):
        raise ValueError(f"losses {row[2]!r} are not all numbers")
    if type(row[3]) not in (int, float, type(None)) or type(row[6]) is not int:
        raise ValueError("seconds or iteration is not a number")
    return Observation(
        arch,
        mask_from_str(row[1]),
        np.array(losses, dtype=np.float64),
        row[3],
        row[4],
        row[5],
        row[6],
        row[7] or "cpu",
    )


def _check_meta(
    db: sqlite3.Connection, path: Path, n_clusters: int | None, fingerprint: str
) -> dict[str, str]:
    """An existing file: is it an sgem store of this schema version, for this run
    (`n_clusters` None: any)? Checked before anything is written to it or read from it."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    if not {"meta", "observations", "checkpoints"} <= tables:
        raise _corrupt(path, "it is not an sgem observation store")
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    try:
        version = int(meta.get("schema_version", -1))
    except ValueError:
        version = -1
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"{path} has store schema version {version}; this sgem reads version "
            f"{SCHEMA_VERSION} only. Start the run fresh in a new directory, or resume it "
            "with the sgem version that wrote it."
            + (
                " (Version 1 stored pickled checkpoints, which are never read.)"
                if version == 1
                else ""
            )
        )
    stored = str(meta.get("n_clusters", ""))
    if not stored.isdigit():
        raise _corrupt(path, f"its cluster count {meta.get('n_clusters')!r} is not a number")
    if n_clusters is not None and int(stored) != n_clusters:
        raise StoreError(
            f"{path} was written for {meta.get('n_clusters')} clusters, this run has {n_clusters}"
        )
    if fingerprint and meta.get("fingerprint") != fingerprint:
        raise StoreError(
            f"{path} belongs to a run with a different configuration; resume it "
            "with its own config, or start the new run in another directory."
        )
    return meta


def read_completed(path: str | Path, n_clusters: int | None = None) -> list[Observation]:
    """The completed trainings of a store file, each (architecture, mask) once (first
    completion, in row order), for analysis: nothing is written, locked or created.

    Opened with SQLite's `mode=ro`. A store whose writer closed cleanly (a finished run)
    holds everything in the main file, with no `-wal` beside it; it is then also opened
    `immutable=1`: without it SQLite would create `-shm`/`-wal` files for a WAL-mode file,
    and fail in a read-only directory. A non-empty `-wal` (a writer running or crashed) is
    read through, so its committed rows count (SQLite may then create `-shm`). Checks the
    schema version, and the cluster count when given, like `ObservationStore`; reads only
    the plain-data tables (meta, observations), never a checkpoint.
    """
    path = Path(path)
    try:
        if not path.is_file():
            raise StoreError(f"the observation store {path} does not exist")
        wal = path.with_name(path.name + "-wal")
        quiet = not wal.exists() or wal.stat().st_size == 0
        uri = path.resolve().as_uri() + "?mode=ro" + ("&immutable=1" if quiet else "")
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
    except StoreError:
        raise
    except (OSError, sqlite3.Error) as exc:
        raise _classify(path, exc, "readable") from exc
    try:
        meta = _check_meta(db, path, n_clusters, "")
        rows = db.execute(_COMPLETED).fetchall()
    except StoreError:
        raise
    except (OSError, sqlite3.Error) as exc:
        raise _classify(path, exc, "readable") from exc
    finally:
        db.close()
    return list(_first_per_key(rows, path, int(meta["n_clusters"])).values())


class ObservationStore:
    """Visible observations (in request order) plus a cache of completed trainings.

    `path=None` keeps everything in memory (tests, the Python API without a run dir).
    `must_exist=True` refuses a missing or 0-byte file instead of creating a fresh store
    (`check_store_present`): for a resume whose run directory says work was recorded.
    """

    def __init__(
        self,
        n_clusters: int,
        path: str | Path | None = None,
        fingerprint: str = "",
        must_exist: bool = False,
    ) -> None:
        self.n_clusters = n_clusters
        self.path = None if path is None else Path(path)
        self.observations: list[Observation] = []
        self._visible_keys: set[tuple[Arch, str]] = set()
        self._cache: dict[tuple[Arch, str], Observation] = {}
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            if must_exist:
                check_store_present(self.path)
            self._open(fingerprint)

    # -- persistence -----------------------------------------------------------------------
    def _open(self, fingerprint: str) -> None:
        try:
            existed = self.path.exists() and self.path.stat().st_size > 0
            db = sqlite3.connect(self.path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise _classify(self.path, exc) from exc
        try:
            meta = _check_meta(db, self.path, self.n_clusters, fingerprint) if existed else {}
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.execute("BEGIN IMMEDIATE")
            try:  # a read-only file fails here, not at the first commit mid-search
                db.execute("DELETE FROM meta WHERE key = ''")
            finally:
                db.execute("ROLLBACK")
            if not meta:
                db.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [
                        ("schema_version", str(SCHEMA_VERSION)),
                        ("n_clusters", str(self.n_clusters)),
                        ("fingerprint", fingerprint),
                    ],
                )
            rows = db.execute(_COMPLETED).fetchall()
        except StoreError:
            db.close()
            raise
        except (OSError, sqlite3.Error) as exc:
            db.close()
            raise _classify(self.path, exc) from exc
        self._db = db
        self._cache = _first_per_key(rows, self.path, self.n_clusters)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def begin(
        self, arch: Arch, mask: np.ndarray, seed: int, phase: str, iteration: int, attempt: int = 1
    ) -> int | None:
        """Record a training as running; returns its row id (None in memory)."""
        if self._db is None:
            return None
        cur = self._db.execute(
            "INSERT INTO observations (arch, mask, status, seed, phase, iteration, attempt, "
            "created) VALUES (?, ?, 'running', ?, ?, ?, ?, ?)",
            (arch.dumps(), mask_to_str(mask), seed, phase, iteration, attempt, time.time()),
        )
        return cur.lastrowid

    def fail(self, row_id: int | None, traceback: str) -> None:
        if self._db is not None and row_id is not None:
            self._db.execute(
                "UPDATE observations SET status = 'failed', traceback = ? WHERE id = ?",
                (traceback, row_id),
            )

    def complete(self, row_id: int | None, obs: Observation, visible: bool = True) -> None:
        """Commit a finished training (and make it visible unless told otherwise: a batch
        makes its results visible in request order, whatever order they finished in)."""
        if obs.losses.shape != (self.n_clusters,) or obs.mask.shape != (self.n_clusters,):
            raise ValueError("observation mask and losses must have one entry per cluster")
        if self._db is not None and row_id is not None:
            self._db.execute(
                "UPDATE observations SET status = 'complete', losses = ?, seconds = ?, "
                "device = ? WHERE id = ?",
                (json.dumps([float(v) for v in obs.losses]), obs.seconds, obs.device, row_id),
            )
        self._cache.setdefault(obs.key, obs)
        if visible:
            self._make_visible(obs)

    def add(self, obs: Observation) -> None:
        """Record an already finished observation (begin + complete)."""
        self.complete(self.begin(obs.arch, obs.mask, obs.seed, obs.phase, obs.iteration), obs)

    def _make_visible(self, obs: Observation) -> None:
        if obs.key not in self._visible_keys:
            self._visible_keys.add(obs.key)
            self.observations.append(obs)

    def reuse(self, arch: Arch, mask: np.ndarray) -> Observation | None:
        """A finished training of (arch, mask), visible or cached; cached ones become visible."""
        key = (arch, mask_to_str(mask))
        obs = self._cache.get(key)
        if obs is not None:
            self._make_visible(obs)
        return obs

    def visible_keys(self) -> list[tuple[str, str]]:
        """The visible observations as (arch JSON, mask) in order, for a checkpoint."""
        return [(o.arch.dumps(), mask_to_str(o.mask)) for o in self.observations]

    def restore_visible(self, keys: list[tuple[str, str]]) -> None:
        """Resume: make exactly these cached observations visible, in this order."""
        self.observations, self._visible_keys = [], set()
        for arch_json, mask in keys:
            obs = self._cache.get((Arch.from_json(arch_json), mask))
            if obs is None:
                raise StoreError(
                    f"{self.path}: the checkpoint names an observation the store does not hold "
                    "(the store file is inconsistent with its checkpoints)"
                )
            self._make_visible(obs)

    def mark_interrupted(self) -> int:
        """Trainings left 'running' by a killed process: mark them failed (they are trained
        again when the resumed search asks for them). Returns how many."""
        if self._db is None:
            return 0
        cur = self._db.execute(
            "UPDATE observations SET status = 'failed', traceback = "
            "'interrupted before completion (process stopped); retrained on resume' "
            "WHERE status = 'running'"
        )
        return cur.rowcount

    # -- checkpoints -----------------------------------------------------------------------
    def save_checkpoint(self, iteration: int, document: str, tensors: bytes) -> None:
        """Persist a checkpoint as plain data: a JSON document and safetensors bytes."""
        if self._db is None:
            return
        self._db.execute(
            "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?)",
            (iteration, document, tensors, time.time()),
        )

    def latest_checkpoint(self, decode: Callable[[str, bytes], T]) -> T | None:
        """The latest checkpoint, as `decode(document, tensors)` makes it (None if none);
        anything unreadable in it is reported as a corrupt store."""
        if self._db is None:
            return None
        try:  # a damaged page or text fails in sqlite itself: corrupt too
            row = self._db.execute(
                "SELECT state, tensors FROM checkpoints ORDER BY iteration DESC LIMIT 1"
            ).fetchone()
        except sqlite3.Error as exc:
            raise _corrupt(self.path, f"its latest checkpoint cannot be read: {exc}") from exc
        if row is None:
            return None
        try:
            if not isinstance(row[0], str) or not isinstance(row[1], bytes):
                raise TypeError("unexpected column types")
            return decode(row[0], row[1])
        except Exception as exc:
            raise _corrupt(self.path, f"its latest checkpoint cannot be read: {exc}") from exc

    def status_counts(self) -> dict[str, int]:
        if self._db is None:
            return {"complete": len(self.observations)}
        return dict(
            self._db.execute("SELECT status, COUNT(*) FROM observations GROUP BY status").fetchall()
        )

    # -- views -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.observations)

    @property
    def archs(self) -> list[Arch]:
        return [o.arch for o in self.observations]

    @property
    def masks(self) -> np.ndarray:
        return np.stack([o.mask for o in self.observations]).astype(np.float64)

    @property
    def losses(self) -> np.ndarray:
        return np.stack([o.losses for o in self.observations])

    def lookup(self, arch: Arch, mask: np.ndarray) -> Observation | None:
        """A visible observation of (arch, mask), if any."""
        key = (arch, mask_to_str(mask))
        return self._cache.get(key) if key in self._visible_keys else None

    def on_mask(self, mask: np.ndarray) -> list[Observation]:
        text = mask_to_str(mask)
        return [o for o in self.observations if mask_to_str(o.mask) == text]
