"""Why the observation store cannot be used, in words that say what to do about it.

Unreadable (permissions, disk) and corrupt files need opposite advice: keep the first,
move the second aside. A missing or empty store where the run directory says work was
recorded is refused, since opening it would silently start the search over.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import SgemUserError


class StoreError(SgemUserError):
    """The store file cannot be opened, is corrupt, is from another schema version or run,
    or is missing where a run directory says it should hold work."""


# sqlite messages that mean "the file is there but cannot be opened or written": the fix is
# on the user's side (permissions, disk), and the file itself may be perfectly fine.
_UNREADABLE = (
    "unable to open database file",
    "readonly database",
    "disk i/o error",
    "database or disk is full",
    "locking protocol",
    "authorization denied",
)


def _unreadable(
    path: Path, exc: BaseException, access: str = "readable and writable"
) -> StoreError:
    return StoreError(
        f"cannot open the observation store {path} ({exc}). Check that it and its directory "
        f"exist and are {access} by you, and that the disk has free space; the "
        "file itself may be fine, so keep it."
    )


def _corrupt(path: Path, why: str) -> StoreError:
    return StoreError(
        f"{path} is corrupt or not an SQLite file ({why}); finished trainings in it cannot be "
        f"read. To start the run over, move it aside (e.g. `mv {path} {path}.corrupt`) and run "
        "again."
    )


def _classify(path: Path, exc: BaseException, access: str = "readable and writable") -> StoreError:
    """Unreadable (permissions, disk) versus corrupt: the two need opposite advice."""
    if isinstance(exc, OSError):
        return _unreadable(path, exc, access)
    text = str(exc).lower()
    if isinstance(exc, sqlite3.OperationalError) and any(m in text for m in _UNREADABLE):
        return _unreadable(path, exc, access)
    return _corrupt(path, str(exc))


def check_store_present(path: str | Path) -> None:
    """Refuse a missing or 0-byte store where the caller knows work was recorded (e.g. the
    run directory's trace.jsonl has iterations): opening it would silently start over."""
    path = Path(path)
    try:
        size = path.stat().st_size if path.exists() else None
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    if size:
        return
    state = "missing" if size is None else "empty (0 bytes)"
    raise StoreError(
        f"the observation store {path} is {state}, but this run directory already recorded "
        "search iterations; continuing would silently restart the search and lose them. "
        "Restore the store file (e.g. from a backup), or start the run fresh in a new "
        "directory."
    )


__all__ = ["StoreError", "check_store_present"]
