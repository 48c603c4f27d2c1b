"""A table file parsed once for `sgem fit`'s two reads (`sgem.data.table_reuse`)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from sgem.data.table_reuse import parse_once


def _counting(calls: list[Path]):
    def parse(path: Path) -> pd.DataFrame:
        calls.append(path)
        return pd.read_csv(path)

    return parse


def test_a_kept_parse_serves_the_next_read_of_the_same_file_once(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n3,4\n")
    calls: list[Path] = []
    parse = _counting(calls)
    first = parse_once(path, parse, keep=True)
    first.loc[0, "a"] = 99  # (the caller may change its frame: the kept one is a copy)
    second = parse_once(path, parse, keep=False)
    assert len(calls) == 1 and second.loc[0, "a"] == 1
    parse_once(path, parse, keep=False)
    assert len(calls) == 2, "nothing is kept past the read that takes it"


def test_a_changed_or_other_file_is_parsed_again(tmp_path: Path) -> None:
    path, other = tmp_path / "t.csv", tmp_path / "u.csv"
    path.write_text("a,b\n1,2\n")
    other.write_text("a,b\n5,6\n")
    calls: list[Path] = []
    parse = _counting(calls)
    parse_once(path, parse, keep=True)
    assert parse_once(other, parse, keep=False).loc[0, "a"] == 5
    assert parse_once(path, parse, keep=False).loc[0, "a"] == 1 and len(calls) == 3
    parse_once(path, parse, keep=True)
    path.write_text("a,b\n7,8\n")
    os.utime(path, ns=(1, 1))  # (a new version: another modification time and size)
    assert parse_once(path, parse, keep=False).loc[0, "a"] == 7 and len(calls) == 5


def test_a_refused_table_keeps_no_parse(tmp_path: Path) -> None:
    """`sgem fit`'s first read keeps its parse for the task's; where the table is refused
    after parsing (here a missing target column), no task read follows, and nothing stays."""
    import pytest

    import sgem.data.table_reuse as reuse
    from sgem.data.user_tasks import table_facts
    from sgem.errors import SgemUserError

    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n3,4\n")
    stat = path.stat()
    with pytest.raises(SgemUserError, match="target"):
        table_facts(str(path), (stat.st_mtime_ns, stat.st_size), "label", None, None, "impute")
    assert not reuse._kept
