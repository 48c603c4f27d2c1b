"""Atomic writes: a file (or a model directory) is either the old one or the new one, whole.

Why one helper: a run may be SIGKILLed at any moment and resumed (`sgem resume`), and its
files are read back (result.json, budget_plan.json, budget_clock.json, the fit input, the
model directory). A plain `write_text` killed half-way leaves a torn file that a resume
reads as corrupt. Every write that a resume or a load depends on therefore goes to a
temporary file in the same directory, is flushed and fsynced, and is renamed over the
target (`os.replace` is atomic on one filesystem); the directory is then fsynced so the
rename itself survives a power loss, not only a killed process.

Temporary names start with "." and end with ".tmp": a kill between write and rename leaves
one behind, which the run directory's lock removes when the run is taken up again
(`sgem.run.rundir.RunDirectory.lock`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(folder: str | os.PathLike) -> None:
    """fsync a directory so a rename or a new entry in it is durable (a no-op where the
    platform cannot open directories, e.g. Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike) -> None:
    """fsync a file written by a library that does not (safetensors, pandas)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: bytes | str, durable: bool = True) -> Path:
    """Write `data` (text as UTF-8) to `path` whole or not at all: a temporary file in the
    same directory, flush + fsync, `os.replace`, then fsync of the directory.

    `durable=False` skips both fsyncs: still atomic against a killed process (the page cache
    survives it), for files rewritten every few seconds (the run clock) whose last version
    may be lost to a power cut at no harm. Returns the path."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shared run's files from others
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)
    return path


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line (a JSON record) with a single write, flushed and fsynced. A kill can
    still tear the last line; readers of such logs skip a torn final line
    (`sgem.run.rundir.RunDirectory.read_trace`)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line if line.endswith("\n") else line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def replace_dir(tmp: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Move the finished directory `tmp` to `path`, replacing an existing one.

    Every file in `tmp` is fsynced first. A directory cannot be swapped in one system call,
    so the old one is first renamed to `.<name>-old`; a kill between the two renames leaves
    no `path` but the old directory intact beside it, and the next call (or
    `recover_dir`) puts it back or replaces it."""
    tmp, path = Path(tmp), Path(path)
    for child in tmp.iterdir():
        if child.is_file():
            fsync_file(child)
    fsync_dir(tmp)
    old = path.with_name(f".{path.name}-old")
    if old.exists():
        shutil.rmtree(old)
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    fsync_dir(path.parent)
    if old.exists():
        shutil.rmtree(old)
    return path


def recover_dir(path: str | os.PathLike) -> None:
    """Undo what a kill inside `replace_dir` left: the old directory is put back where the
    new one never arrived, and unfinished temporary siblings (`.<name>-*`) are removed."""
    path = Path(path)
    old = path.with_name(f".{path.name}-old")
    if old.is_dir() and not path.exists():
        old.rename(path)
    if not path.parent.is_dir():
        return
    for child in path.parent.glob(f".{path.name}-*"):
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)


__all__ = ["append_line", "fsync_dir", "fsync_file", "recover_dir", "replace_dir", "write_atomic"]
