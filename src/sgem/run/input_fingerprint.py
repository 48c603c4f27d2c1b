"""What a run was fitted on, so that a run directory is never reused for changed data.

Why: a run is identified by its config, and a user's config names its data by path. Fitting
`train.csv` into `runs/x` again after the file changed found "the same run, finished" and
returned the old model without a word; resuming an unfinished run would have mixed
trainings on the old rows with new ones. The run directory's config.yaml therefore records
the input's fingerprint (`input_fingerprint`), and a reuse or resume whose input no longer
matches is refused, naming what changed (`changed_input`).

A file is fingerprinted by its size and the SHA-256 of its bytes (about 0.5 GB/s; skipped
where size and modification time are those recorded). A folder (images) by its files'
relative paths and sizes: adding, removing or resizing an image changes it; an edit that
keeps a file's size does not.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

#: bytes read at a time while hashing a file
_CHUNK = 1 << 20


def input_fingerprint(run: dict[str, Any], recorded: dict | None = None) -> dict | None:
    """The fingerprint of the data `run["task"]["path"]` names (None: a run without a data
    path, e.g. a benchmark's task, or a path that does not exist). With `recorded` (an
    earlier fingerprint of the same file), a file whose size and modification time are
    unchanged is not hashed again."""
    path = (run.get("task") or {}).get("path")
    if not path or not Path(path).exists():
        return None
    path = Path(path)
    if path.is_dir():
        return _folder(path)
    stat = path.stat()
    same_stat = (
        recorded is not None
        and recorded.get("bytes") == stat.st_size
        and recorded.get("mtime_ns") == stat.st_mtime_ns
        and "sha256" in recorded
    )
    digest = recorded["sha256"] if same_stat and recorded else _sha256(path)
    return {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}


def changed_input(recorded: dict | None, run: dict[str, Any]) -> str | None:
    """What changed in the run's data since `recorded` was taken (None: nothing, or nothing
    was recorded: a run directory written before fingerprints were)."""
    if not recorded:
        return None
    path = (run.get("task") or {}).get("path")
    now = input_fingerprint(run, recorded)
    if now is None:
        return f"{path} no longer exists"
    if _identity(recorded) == _identity(now):
        return None
    if "files" in now:
        return (
            f"the folder {path} changed (it held {recorded.get('files')} files, "
            f"{recorded.get('bytes')} bytes; now {now['files']}, {now['bytes']})"
        )
    return (
        f"{path} changed since the run read it ({recorded.get('bytes')} bytes then, "
        f"{now['bytes']} now; its content differs)"
    )


def _identity(fingerprint: dict) -> tuple:
    """What says two fingerprints are of the same data: a folder's listing, a file's hash
    (sizes and modification times alone say nothing of the content)."""
    return tuple(fingerprint.get(k) for k in ("files", "listing_sha256", "sha256"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _folder(path: Path) -> dict:
    """A folder's file count, total size and the SHA-256 of its sorted (path, size) list."""
    listing = hashlib.sha256()
    files = size = 0
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = Path(root) / name
            n = full.stat().st_size
            listing.update(f"{full.relative_to(path).as_posix()}\0{n}\n".encode())
            files, size = files + 1, size + n
    return {"files": files, "bytes": size, "listing_sha256": listing.hexdigest()}


__all__ = ["changed_input", "input_fingerprint"]
