"""The run directory: config.yaml, store.sqlite, trace.jsonl, result.json, plots.

Work is written the moment it exists (each training is committed to store.sqlite when it
finishes, each EM iteration is appended to trace.jsonl and checkpointed; the references
fitted before the search and the final MoE are kept as they end, `sgem.run.kept_references`
and `sgem.run.kept_final`), and result.json is written atomically, so a reader never sees
half a result.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..atomic import TMP_SUFFIX, append_line, write_atomic
from ..errors import SgemUserError
from .input_fingerprint import changed_input

CONFIG = "config.yaml"
TRACE = "trace.jsonl"
STORE = "store.sqlite"
RESULT = "result.json"
LOCK = "run.lock"
#: the searched MoE's per-row holdout NLL, what the K choice compares runs on row by row
#: (`sgem.run.experts_choice`); safetensors, never unpickled
HOLDOUT_NLL = "holdout_nll.safetensors"
#: data given to `sgem.fit` in memory, written before the run claims the directory
INPUT = "input"


#: the fix for a run directory whose files are damaged
_FIX = "restore it from a copy, or delete the run directory and run again"


class RunDirectoryError(SgemUserError):
    """The directory cannot hold this run (another run's files, corrupt files, ...)."""


def versions() -> dict[str, str]:
    """Versions of sgem and its numerical stack, without importing what is not loaded yet
    (scipy and scikit-learn then come from the installed distributions' metadata)."""
    import sys
    from importlib import metadata

    from .. import __version__

    def version(module: str, distribution: str) -> str:
        loaded = sys.modules.get(module)
        if loaded is not None and hasattr(loaded, "__version__"):
            return str(loaded.__version__)
        if module == "torch":  # the local build tag (+cpu, +cu121) is only in torch itself
            import torch

            return str(torch.__version__)
        return metadata.version(distribution)

    return {
        "sgem": __version__,
        "python": platform.python_version(),
        "torch": version("torch", "torch"),
        "numpy": version("numpy", "numpy"),
        "scipy": version("scipy", "scipy"),
        "scikit-learn": version("sklearn", "scikit-learn"),
    }


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, allow_nan=True)


class RunDirectory:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def file(self, name: str) -> Path:
        return self.path / name

    @property
    def is_complete(self) -> bool:
        return self.file(RESULT).exists()

    def _parsed(self, name: str, parse, what: str) -> dict:
        """File `name` parsed into a mapping, or a RunDirectoryError naming it (ValueError:
        not UTF-8 / not JSON; RecursionError: nested too deeply)."""
        try:
            data = parse(self.file(name).read_text())
        except (OSError, ValueError, RecursionError, yaml.YAMLError) as exc:
            raise RunDirectoryError(
                f"{self.file(name)} is unreadable or corrupt: {exc}; {_FIX}"
            ) from exc
        if not isinstance(data, dict):
            raise RunDirectoryError(f"{self.file(name)} does not hold {what}; {_FIX}")
        return data

    def read_config(self) -> dict:
        return self._parsed(CONFIG, yaml.safe_load, "a run configuration")

    def finished_result(self, run: dict) -> dict | None:
        """The result of this same run (`run`: its config), finished, marked "reused"; None
        where the directory holds no finished run of it. Refused where its data changed."""
        if not self.is_complete:
            return None
        config = self.read_config()
        if config.get("run") != run:
            return None
        self.check_input(config)
        result = self.read_result()
        result["reused"] = True
        return result

    def check_input(self, config: dict) -> None:
        """Refuse to reuse or resume a run whose data changed since it was read (config.yaml's
        "input" fingerprint, `sgem.run.input_fingerprint`)."""
        why = changed_input(config.get("input"), config.get("run") or {})
        if why is not None:
            raise RunDirectoryError(
                f"{self.path} holds a run fitted on other data: {why}. Give the new data its "
                "own --out, or delete the directory to fit again."
            )

    def prepare(self, config: dict) -> str:
        """Claim the directory for `config`. Returns "new" or "complete" (same config, done).

        Refuses a directory that holds a different run, or files that are not a run's.
        """
        if self.path.exists() and not self.path.is_dir():
            raise RunDirectoryError(f"{self.path} exists and is not a directory")
        if self.path.exists() and any(p.name != INPUT for p in self.path.iterdir()):
            if not self.file(CONFIG).exists():
                raise RunDirectoryError(
                    f"{self.path} is not empty and holds no sgem run ({CONFIG} missing). "
                    "Choose another --out or empty the directory."
                )
            existing = self.read_config()
            if existing.get("run") != config.get("run"):
                diff = _differences(existing.get("run", {}), config.get("run", {}))
                raise RunDirectoryError(
                    f"{self.path} already holds a different run (differs in: "
                    f"{', '.join(diff) or 'config'}). Choose another --out, or delete the "
                    "directory to start over."
                )
            self.check_input(existing)
            if self.is_complete:
                return "complete"
            if self.file(STORE).exists():
                raise RunDirectoryError(
                    f"{self.path} holds an unfinished run with this config; continue it with "
                    f"`sgem resume {self.path}` (finished trainings are reused), or delete the "
                    "directory to start over."
                )
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # config first: a kill between the two leaves a directory `prepare` reclaims
            write_atomic(self.file(CONFIG), yaml.safe_dump(config, sort_keys=False))
            write_atomic(self.file(TRACE), "")
        except OSError as exc:
            raise RunDirectoryError(
                f"cannot write the run directory {self.path}: {exc.strerror or exc}; choose a "
                "writable --out (and check the disk has space)"
            ) from exc
        return "new"

    def release_unstarted(self) -> bool:
        """Give back a directory `prepare` claimed for a run that was refused before any
        training finished (K > M, a budget too small for the smallest search): its files
        go, so the corrected command is not refused as "a different run". A directory with
        a finished training, a result or a model is kept. Returns whether it was released."""
        if self.is_complete or self.file(RESULT).exists() or self.file("model").exists():
            return False
        trace = self.file(TRACE)
        if trace.exists() and trace.stat().st_size > 0:
            return False
        if self.file(STORE).exists() and _stored_trainings(self.file(STORE)) != 0:
            return False
        for entry in self.path.iterdir():
            if entry.is_file() and entry.name != INPUT:
                entry.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.path.rmdir()  # only where nothing else is left
        return True

    def load_for_resume(self) -> dict:
        """The run config of an unfinished run, checked for what resume needs."""
        if not self.path.is_dir():
            raise RunDirectoryError(f"{self.path} does not exist or is not a directory")
        if not self.file(CONFIG).exists():
            loop = sorted(p.name for p in self.path.glob("experts-*") if p.is_dir())
            hint = (
                f"; it holds a choice of K ({', '.join(loop)}): continue it by running the "
                "same `sgem fit` command again (finished K runs are reused, an interrupted "
                "one continues)"
                if loop
                else ""
            )
            raise RunDirectoryError(f"{self.path} holds no sgem run ({CONFIG} missing){hint}")
        trace = self.file(TRACE)
        if not self.file(STORE).exists() and trace.exists() and trace.stat().st_size > 0:
            raise RunDirectoryError(
                f"{self.file(STORE)} is missing although {TRACE} records finished iterations: "
                "the trainings it held are gone. Restore the file from a backup, or start the "
                "run fresh in a new directory."
            )
        # no store and an empty trace: killed before its first training; resume starts it
        config = self.read_config()
        if "run" not in config:
            raise RunDirectoryError(f"{self.file(CONFIG)} has no 'run' section")
        self.check_input(config)
        return config

    def _remove_leftovers(self) -> None:
        """Delete the temporary files of atomic writes (`sgem.atomic`) that a killed process
        left here or a folder below (a kill between a write and its rename). Only under the
        lock: no live process of this run writes them then."""
        for pattern in (f".*{TMP_SUFFIX}", f"*/.*{TMP_SUFFIX}"):
            for leftover in self.path.glob(pattern):
                if leftover.is_file() and not leftover.is_symlink():
                    leftover.unlink(missing_ok=True)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the directory for one live process (`run.lock`: pid, host, start time).

        A second `sgem run` / `fit` / `resume` on a directory whose run is alive is refused,
        naming the holder; a lock left by a process that is gone (on this host) is taken
        over, so a crash or `kill -9` never blocks `sgem resume`.
        """
        file = self.file(LOCK)
        me = {"pid": os.getpid(), "host": platform.node(), "since": time.time()}
        for _ in range(2):
            try:
                fd = os.open(file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = _read_lock(file)
                if holder is not None and _alive(holder):
                    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["since"]))
                    raise RunDirectoryError(
                        f"{self.path} is in use by process {holder['pid']} on "
                        f"{holder['host']} (since {since}); wait for it to finish or stop it "
                        f"first. If that process is gone, delete {file}."
                    ) from None
                file.unlink(missing_ok=True)  # stale: its process is gone
                continue
            with os.fdopen(fd, "w") as fh:
                json.dump(me, fh)
            break
        else:  # pragma: no cover - another process took it between our two tries
            raise RunDirectoryError(f"{self.path} was just claimed by another process")
        self._remove_leftovers()
        try:
            yield
        finally:
            holder = _read_lock(file)
            if holder is not None and holder.get("pid") == me["pid"]:
                file.unlink(missing_ok=True)

    def rewrite_trace(self, rows: list[dict]) -> None:
        write_atomic(self.file(TRACE), "".join(dumps(r) + "\n" for r in rows))

    def append(self, name: str, record: dict) -> None:
        """One JSON line, fsynced; a kill may tear it (`read_trace` skips a torn last line,
        and a resume rewrites the trace from its checkpoint)."""
        append_line(self.file(name), dumps(record))

    def write_result(self, result: dict, holdout_nll: np.ndarray | None = None) -> None:
        """result.json, written last: its presence marks the run complete. Before it, the
        per-row holdout NLL (`HOLDOUT_NLL`) where one is given."""
        if holdout_nll is not None:
            from safetensors.numpy import save

            rows = {"nll": np.ascontiguousarray(holdout_nll, dtype=np.float64)}
            write_atomic(self.file(HOLDOUT_NLL), save(rows))
        write_atomic(self.file(RESULT), json.dumps(result, default=_json_default, indent=2))

    def holdout_nll(self) -> np.ndarray | None:
        """The per-row holdout NLL `write_result` kept, or None (none kept, or unreadable:
        a comparison then falls back to the means in result.json)."""
        from safetensors.numpy import load

        try:
            return load(self.file(HOLDOUT_NLL).read_bytes())["nll"]
        except Exception:  # (absent, torn or edited: the choice does without it)
            return None

    def read_result(self) -> dict:
        return self._parsed(RESULT, json.loads, "a run's result")

    def read_trace(self) -> list[dict]:
        """The trace's rows; a torn final line (a kill during its append) is skipped, a
        corrupt line before it is refused."""
        try:
            text = self.file(TRACE).read_text()
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8
            raise RunDirectoryError(f"{self.file(TRACE)} is unreadable: {exc}; {_FIX}") from exc
        lines = [line for line in text.splitlines() if line.strip()]
        rows = []
        for i, line in enumerate(lines):
            try:
                rows.append(json.loads(line))
                if not isinstance(rows[-1], dict):
                    raise RunDirectoryError(
                        f"{self.file(TRACE)} line {i + 1} is not a JSON object; {_FIX}"
                    )
            except (json.JSONDecodeError, RecursionError) as exc:
                if i == len(lines) - 1:
                    break  # torn by a kill mid-append
                raise RunDirectoryError(
                    f"{self.file(TRACE)} line {i + 1} is corrupt: {exc}"
                ) from exc
        return rows


def _read_lock(file: Path) -> dict | None:
    try:
        data = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # half-written or unreadable: treated as stale
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


def _alive(holder: dict) -> bool:
    """Whether the lock's process still runs (on another host we cannot tell: assume so)."""
    if holder.get("host") != platform.node():
        return True
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _differences(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _differences(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}")
    return out


def _stored_trainings(path: Path) -> int | None:
    """How many trainings a store file records (None: unreadable, so kept)."""
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return int(db.execute("SELECT COUNT(*) FROM observations").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return None
