"""One parse of a table file for the two reads of a `sgem fit`: its kind and size first
(`sgem.run.fit_setup`'s config), then its task (`sgem.data.user_tasks.table_task`). Why: on a
600 000-row CSV each parse took 6 s of a 3-minute budget.

At most one parsed file is kept, only when its reader asks (`keep`), and the next read of
any file takes it back, so no frame outlives the pair of reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

_kept: dict[tuple[str, int, int], pd.DataFrame] = {}


def _version(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


def parse_once(path: Path, parse: Callable[[Path], pd.DataFrame], keep: bool) -> pd.DataFrame:
    """`parse(path)`, or the frame the previous read of this file version kept; with `keep`,
    a copy stays for the next read (the caller may change the frame it gets)."""
    version = _version(path)
    frame = _kept.pop(version, None)
    _kept.clear()
    if frame is None:
        frame = parse(path)
    if keep:
        _kept[version] = frame.copy()
    return frame


def drop_kept() -> None:
    """Forget the kept parse (a read that kept it failed after parsing: no next read)."""
    _kept.clear()


__all__ = ["drop_kept", "parse_once"]
