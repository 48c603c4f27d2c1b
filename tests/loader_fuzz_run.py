"""The run-directory mutations of tests/loader_fuzz.py: store.sqlite, trace.jsonl,
result.json, config.yaml and the directory's files (the model inside is fuzzed as "table")."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
from loader_fuzz import Case
from loader_fuzz_cases import SEED, _flip, _offsets, _truncate, sql

BASE = "run"


def _trace_torn(at_from_end: int) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        data = (root / "trace.jsonl").read_bytes()
        (root / "trace.jsonl").write_bytes(data[: len(data) - at_from_end])

    return apply


def _torn_ok(snap: dict, base: dict) -> bool:
    """A torn last trace record is dropped; everything else reads as before."""
    rest = all(_eq(snap[k], base[k]) for k in base if k != "trace")
    return rest and _eq(snap["trace"], base["trace"][:-1])


def _only(*keys: str) -> Callable[[dict, dict], bool]:
    """A difference confined to `keys`: SQLite keeps no checksum of a row's values and
    result.json none of its own, so a flipped byte inside a stored number or name reads as
    another value there; the model and everything else must read as before."""
    return lambda snap, base: all(_eq(snap[k], base[k]) for k in base if k not in keys)


def _eq(a, b) -> bool:
    from loader_fuzz import same

    return same(a, b)


def _write(name: str, text: str) -> Callable[[Path], None]:
    return lambda root: (root / name).write_text(text)


def run_cases(root: Path) -> list[Case]:
    rng = np.random.default_rng([SEED, 7])
    cases: list[Case] = []

    def add(cls, name, file, apply, expect="either", accept=None) -> None:
        cases.append(Case(cls, f"run:{name}", BASE, file, apply, expect, accept))

    # store.sqlite: truncated at page boundaries and inside pages, flipped bytes
    store = "store.sqlite"
    size = (root / store).stat().st_size
    for at in sorted({*_offsets(size, rng, 6), 100, 4096, 8192, 4096 * 3 + 17}):
        add("store-truncate", f"@{at}", store, _truncate(store, at, False))
    for at in [*range(0, 100, 9), *rng.integers(100, size, 30).tolist()]:
        mask = int(rng.integers(1, 256))
        add(
            "store-flip",
            f"@{at}^{mask}",
            store,
            _flip(store, at, mask, False),
            accept=_only("completed", "checkpoint"),
        )
    # store.sqlite: values a buggy writer could leave
    statements = {
        "schema-1": "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
        "schema-3": "UPDATE meta SET value = '3' WHERE key = 'schema_version'",
        "schema-text": "UPDATE meta SET value = 'two' WHERE key = 'schema_version'",
        "schema-missing": "DELETE FROM meta WHERE key = 'schema_version'",
        "n_clusters-other": "UPDATE meta SET value = '7' WHERE key = 'n_clusters'",
        "n_clusters-text": "UPDATE meta SET value = 'six' WHERE key = 'n_clusters'",
        "fingerprint-other": "UPDATE meta SET value = 'abc' WHERE key = 'fingerprint'",
        "meta-dropped": "DROP TABLE meta",
        "observations-dropped": "DROP TABLE observations",
        "checkpoints-dropped": "DROP TABLE checkpoints",
        "losses-garbage": "UPDATE observations SET losses = '[1,' WHERE id = 1",
        "losses-short": "UPDATE observations SET losses = '[1.0, 2.0]' WHERE id = 1",
        "losses-text": "UPDATE observations SET losses = '\"x\"' WHERE id = 1",
        "losses-null": "UPDATE observations SET losses = NULL WHERE id = 1",
        "losses-nested": "UPDATE observations SET losses = '[[1],[2],[3],[4],[5],[6]]'",
        "losses-strings": "UPDATE observations SET losses = '[\"a\",1,1,1,1,1]' WHERE id = 1",
        "losses-blob": "UPDATE observations SET losses = x'00ff' WHERE id = 1",
        "arch-garbage": "UPDATE observations SET arch = '{' WHERE id = 1",
        "arch-list": "UPDATE observations SET arch = '[1,2]' WHERE id = 1",
        "arch-unknown-key": 'UPDATE observations SET arch = \'{"ops":["x"]}\' WHERE id = 1',
        "arch-ops-int": 'UPDATE observations SET arch = \'{"ops":1,"inputs":2}\' WHERE id = 1',
        "mask-short": "UPDATE observations SET mask = '10' WHERE id = 1",
        "mask-letters": "UPDATE observations SET mask = 'abcdef' WHERE id = 1",
        "seconds-text": "UPDATE observations SET seconds = 'slow' WHERE id = 1",
        "iteration-text": "UPDATE observations SET iteration = 'one' WHERE id = 1",
        "checkpoint-state-garbage": "UPDATE checkpoints SET state = '{'",
        "checkpoint-state-list": "UPDATE checkpoints SET state = '[]'",
        "checkpoint-state-blob": "UPDATE checkpoints SET state = x'00'",
        "checkpoint-tensors-garbage": "UPDATE checkpoints SET tensors = x'0011223344'",
        "checkpoint-tensors-empty": "UPDATE checkpoints SET tensors = x''",
        "checkpoint-tensors-text": "UPDATE checkpoints SET tensors = 'abc'",
        "checkpoint-missing-tensor": (
            'UPDATE checkpoints SET state = \'{"iteration": 1, "x": {"__tensor__": "t99"}}\''
        ),
        "extra-table": "CREATE TABLE notes (x TEXT)",
        "extra-meta": "INSERT INTO meta VALUES ('comment', 'hello')",
    }
    harmless = {"extra-table", "extra-meta"}
    for name, statement in statements.items():
        expect = "load" if name in harmless else "either"
        add("store-sql", name, store, sql([statement]), expect)
    # trace.jsonl: a torn last record (a kill mid-append), garbage inside
    trace = "trace.jsonl"
    last = len((root / trace).read_bytes().splitlines()[-1]) + 1
    for cut in sorted({1, 2, 3, last // 2, last - 2, last - 1}):
        add("trace-torn", f"-{cut}", trace, _trace_torn(cut), "either", _torn_ok)
    lines = (root / trace).read_text().splitlines()
    bad_lines = {
        "garbage-middle": [lines[0], "{not json", *lines[1:]],
        "list-row": [lines[0], "[1, 2]", *lines[1:]],
        "number-row": ["42", *lines],
        "nul-bytes": [lines[0] + "\x00\x00", *lines[1:]],
    }
    for name, rows in bad_lines.items():
        add("trace-edit", name, trace, _write(trace, "\n".join(rows) + "\n"), "refuse")
    add("trace-edit", "empty", trace, _write(trace, ""), accept=lambda s, b: s["trace"] == [])
    add("trace-edit", "blank-lines", trace, _write(trace, "\n\n".join(lines) + "\n"), "load")
    add("trace-edit", "invalid-utf8", trace, lambda r: (r / trace).write_bytes(b"\xff\xfe{\n"))
    # result.json and config.yaml
    for name in ("result.json", "config.yaml"):
        size = (root / name).stat().st_size
        for at in _offsets(size, rng, 4):
            add(f"{name.split('.')[0]}-truncate", f"@{at}", name, _truncate(name, at, False))
        for at in rng.integers(0, size, 6).tolist():
            mask = int(rng.integers(1, 256))
            apply = _flip(name, at, mask, False)
            add(
                f"{name.split('.')[0]}-flip",
                f"@{at}^{mask}",
                name,
                apply,
                accept=_only(name.split(".")[0]),
            )
    for name, text in {
        "list": "[1, 2]",
        "string": '"done"',
        "nan": "NaN",
        "empty": "",
        "binary": "\x00\x01",
    }.items():
        add("result-edit", name, "result.json", _write("result.json", text), "refuse")
    for name, text in {
        "python-object": "run: !!python/object/apply:os.system ['touch ../executed']\n",
        "python-name": "run: !!python/name:os.system\n",
        "list": "- 1\n- 2\n",
        "no-run": "versions: {}\n",
        "run-not-mapping": "run: 5\n",
        "tabs": "run:\n\t- x\n",
        "anchors-bomb": "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nrun: [*c, *c]\n",
    }.items():
        add("config-edit", name, "config.yaml", _write("config.yaml", text), "refuse")
    # the directory's files
    for name in ("config.yaml", "result.json", "trace.jsonl", "store.sqlite", "model"):

        def remove(r: Path, name=name) -> None:
            p = r / name
            shutil.rmtree(p) if p.is_dir() else p.unlink()

        add("run-files", f"missing:{name}", name, remove, "refuse")
    add(
        "run-files",
        "store-dir",
        store,
        lambda r: ((r / store).unlink(), (r / store).mkdir()),
        "refuse",
    )
    add(
        "run-files",
        "store-fifo",
        store,
        lambda r: ((r / store).unlink(), os.mkfifo(r / store)),
        "refuse",
    )
    add("run-files", "store-empty", store, _write(store, ""), "refuse")
    add("run-files", "store-text", store, _write(store, "not a database"), "refuse")
    add(
        "run-files", "wal-garbage", store, lambda r: (r / (store + "-wal")).write_bytes(b"x" * 5000)
    )
    add("run-files", "lock-garbage", "run.lock", _write("run.lock", "{half"), "load")
    add("run-files", "extra-file", "notes.txt", _write("notes.txt", "hello"), "load")
    add("run-files", "extra-pickle", "state.pkl", _write("state.pkl", "cos\nsystem\n"), "load")
    return cases


__all__ = ["run_cases"]
