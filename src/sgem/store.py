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
"""

from __future__ import annotations

import io
import json
import pickle
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .space.arch import Arch

SCHEMA_VERSION = 1


class StoreError(ValueError):
    """The store file is corrupt, from another schema version, or from another run."""


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
    state BLOB NOT NULL,
    created REAL NOT NULL
);
"""


class ObservationStore:
    """Visible observations (in request order) plus a cache of completed trainings.

    `path=None` keeps everything in memory (tests, the Python API without a run dir).
    """

    def __init__(
        self, n_clusters: int, path: str | Path | None = None, fingerprint: str = ""
    ) -> None:
        self.n_clusters = n_clusters
        self.path = None if path is None else Path(path)
        self.observations: list[Observation] = []
        self._visible_keys: set[tuple[Arch, str]] = set()
        self._cache: dict[tuple[Arch, str], Observation] = {}
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self._open(fingerprint)

    # -- persistence -----------------------------------------------------------------------
    def _open(self, fingerprint: str) -> None:
        existed = self.path.exists() and self.path.stat().st_size > 0
        try:
            db = sqlite3.connect(self.path, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if existed:
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
                if not {"meta", "observations", "checkpoints"} <= tables:
                    raise StoreError(f"{self.path} is not an sgem observation store")
            db.executescript(_SCHEMA)
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path} is corrupt or not an SQLite file ({exc}). Move it away to start "
                "the run over; finished trainings in it cannot be read."
            ) from exc
        if not meta:
            db.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [
                    ("schema_version", str(SCHEMA_VERSION)),
                    ("n_clusters", str(self.n_clusters)),
                    ("fingerprint", fingerprint),
                ],
            )
        else:
            version = int(meta.get("schema_version", -1))
            if version != SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has store schema version {version}, this sgem reads version "
                    f"{SCHEMA_VERSION}. Resume it with the sgem version that wrote it."
                )
            if int(meta.get("n_clusters", -1)) != self.n_clusters:
                raise StoreError(
                    f"{self.path} was written for {meta.get('n_clusters')} clusters, "
                    f"this run has {self.n_clusters}"
                )
            if fingerprint and meta.get("fingerprint") != fingerprint:
                raise StoreError(
                    f"{self.path} belongs to a run with a different configuration; resume it "
                    "with its own config, or start the new run in another directory."
                )
        self._db = db
        for row in db.execute(
            "SELECT arch, mask, losses, seconds, seed, phase, iteration, device "
            "FROM observations WHERE status = 'complete' ORDER BY id"
        ):
            obs = Observation(
                Arch.from_json(row[0]),
                mask_from_str(row[1]),
                np.array(json.loads(row[2])),
                row[3],
                row[4],
                row[5],
                row[6],
                row[7] or "cpu",
            )
            self._cache.setdefault(obs.key, obs)

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
    def save_checkpoint(self, iteration: int, state: dict) -> None:
        if self._db is None:
            return
        buf = io.BytesIO()
        pickle.dump(state, buf, protocol=pickle.HIGHEST_PROTOCOL)
        self._db.execute(
            "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?)",
            (iteration, buf.getvalue(), time.time()),
        )

    def latest_checkpoint(self) -> dict | None:
        if self._db is None:
            return None
        row = self._db.execute(
            "SELECT state FROM checkpoints ORDER BY iteration DESC LIMIT 1"
        ).fetchone()
        if row is None:
            return None
        try:
            return pickle.loads(row[0])
        except Exception as exc:
            raise StoreError(f"the latest checkpoint in {self.path} is corrupt: {exc}") from exc

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
