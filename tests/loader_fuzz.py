"""Mutation fuzzing of what sgem reads back: saved model directories and run directories.

Imported by tests/test_fuzz_loaders.py and benchmarks/fuzz_loaders.py (a plain module, like
helpers.py). A `Case` mutates a fresh copy of a base directory; `run_case` then reads the copy
the way a user does (`sgem.load` + predict; or every reader of a run directory) and says how it
ended: "identical" (the same output as the untouched copy), "tolerated" (a difference the case
allows, e.g. a torn last trace record dropped), "refused" (an `SgemUserError` naming a file of
the directory), or a failure: "different" (a silently different output), "crash" (any other
exception, i.e. a traceback), "unnamed" (a refusal that names no file), "hang" (over the
per-case timeout) or "executed" (a planted payload ran). The mutations: loader_fuzz_cases.py.
"""

from __future__ import annotations

import contextlib
import json
import pickle
import shutil
import signal
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

import sgem
from sgem.errors import SgemUserError

MODEL_FILES = ("model.json", "experts.safetensors", "preprocessing.safetensors")
RUN_FILES = ("config.yaml", "result.json", "trace.jsonl", "store.sqlite", "budget_clock.json")
FAILURES = ("different", "crash", "unnamed", "hang", "executed")
TIMEOUT_S = 10.0
#: rows predicted by every case: training-like rows and rows near the class boundary
ROWS = pd.DataFrame(
    {
        "a": [-4.2, 3.9, 0.3, -0.2, 1.0],
        "b": [-380.0, 410.0, -20.0, 15.0, -90.0],
        "kind": ["u", "v", "v", "u", "u"],
    }
)


@dataclass
class Case:
    """One mutation of a copy of `base` ("table", "combo" or "run")."""

    cls: str  # the class of mutation (the summary's rows)
    name: str  # unique within the class
    base: str
    file: str  # the file it mutates (relative to the copy's root)
    apply: Callable[[Path], None]
    expect: str = "either"  # "either" | "refuse" | "load"
    #: a difference this case allows: accept(snapshot, base snapshot) -> bool
    accept: Callable[[dict, dict], bool] | None = None


@dataclass
class Outcome:
    case: Case
    kind: str
    detail: str = ""
    step: str = ""  # the reader that refused

    @property
    def failed(self) -> bool:
        ok = {
            "either": ("identical", "tolerated", "refused", "refused-input"),
            "refuse": ("refused", "refused-input"),
        }
        allowed = ok.get(self.case.expect, ("identical", "tolerated"))
        return self.kind in FAILURES or self.kind not in allowed


class _Hang(BaseException):
    """Raised by the per-case alarm (a BaseException, so no loader's `except` swallows it)."""


@contextlib.contextmanager
def _deadline(seconds: float):
    def ring(signum, frame):
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _no_unpickling():
    """Any pickle / torch.load call while reading is a failure (never code execution)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a loader called pickle / torch.load")

    saved = (pickle.load, pickle.loads, torch.load)
    pickle.load = pickle.loads = torch.load = refuse
    try:
        yield
    finally:
        pickle.load, pickle.loads, torch.load = saved


# -- what is read back ---------------------------------------------------------------------------
def read_model(root: Path) -> dict:
    """What a user gets from a model directory: routing, raw outputs, probabilities, labels."""
    model = sgem.load(root)
    try:
        x_model, cluster, _ = model._prepare(ROWS)
        return {
            "cluster": cluster,
            "expert": model.route(ROWS).expert,
            "outputs": model.outputs(x_model, cluster).numpy(),
            "proba": model.predict_proba(ROWS),
            "labels": model.predict(ROWS),
        }
    except SgemUserError as exc:  # loaded, but refuses these rows: say so apart
        raise InputRefused(str(exc)) from exc


class InputRefused(Exception):
    """The model loaded as a valid model and predicting refused the rows with a clear user
    error (e.g. a model.json without its table encoding reads columns by their encoded names)."""


def read_run(root: Path, n_clusters: int) -> dict:
    """Every reader of a run directory, in the order `sgem resume` / `sgem show` use them."""
    from sgem.run.runconfig import config_fingerprint
    from sgem.run.rundir import RunDirectory
    from sgem.search.checkpoint import decode_checkpoint
    from sgem.search.store import ObservationStore, read_completed

    rundir = RunDirectory(root)
    snap: dict[str, Any] = {"config": rundir.read_config(), "result": rundir.read_result()}
    snap["trace"] = rundir.read_trace()
    completed = read_completed(root / "store.sqlite")
    snap["completed"] = [(o.arch.key, o.mask.tolist(), o.losses.tolist()) for o in completed]
    run = rundir.load_for_resume()["run"]
    store = ObservationStore(
        n_clusters, root / "store.sqlite", config_fingerprint(run), must_exist=True
    )
    try:
        state = store.latest_checkpoint(decode_checkpoint)
        snap["checkpoint"] = None if state is None else _plain(state)
    finally:
        store.close()
    snap["model"] = read_model(root)
    return snap


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, torch.Tensor | np.ndarray):
        return np.asarray(obj).tolist()
    return obj


def same(a: Any, b: Any) -> bool:
    """Exact equality of nested snapshots (arrays elementwise, NaN equal to NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return False
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return type(a) is type(b) and a == b


# -- running cases --------------------------------------------------------------------------------
@dataclass
class Fuzzer:
    """Base directories (name -> path), their untouched snapshots, and a scratch folder."""

    bases: dict[str, Path]
    scratch: Path
    originals: dict[str, dict] = field(default_factory=dict)
    n_clusters: int = 0

    def __post_init__(self) -> None:
        if "run" in self.bases:
            result = json.loads((self.bases["run"] / "result.json").read_text())
            self.n_clusters = len(result["routing"])
        for name, path in self.bases.items():
            self.originals[name] = self.read(name, path)

    def read(self, base: str, root: Path) -> dict:
        return read_run(root, self.n_clusters) if base == "run" else read_model(root)

    def run_case(self, case: Case) -> Outcome:
        copy = self.scratch / "case"
        if copy.exists() or copy.is_symlink():
            shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.bases[case.base], copy, symlinks=True)
        marker = self.scratch / "executed"
        marker.unlink(missing_ok=True)
        try:
            case.apply(copy)
        except Exception as exc:  # the mutation itself, not the loader: a broken case
            return Outcome(case, "crash", f"mutation failed: {exc!r}")
        outcome = self._judge(case, copy)
        if marker.exists():
            return Outcome(case, "executed", "a planted payload ran")
        return outcome

    def _judge(self, case: Case, copy: Path) -> Outcome:
        try:
            with _deadline(TIMEOUT_S), _no_unpickling():
                snap = self.read(case.base, copy)
        except _Hang:
            return Outcome(case, "hang", f"no answer within {TIMEOUT_S} s")
        except InputRefused as exc:
            return Outcome(case, "refused-input", str(exc).splitlines()[0][:300], "predict")
        except SgemUserError as exc:
            text = str(exc)
            names = (*MODEL_FILES, "members.safetensors", *RUN_FILES, str(copy))
            kind = "refused" if any(n in text for n in names) else "unnamed"
            return Outcome(case, kind, text.splitlines()[0][:300], type(exc).__name__)
        except BaseException as exc:
            tail = "".join(traceback.format_exception(exc)[-3:])
            return Outcome(case, "crash", f"{type(exc).__name__}: {exc}"[:300] + "\n" + tail)
        base = self.originals[case.base]
        if same(snap, base):
            return Outcome(case, "identical")
        if case.accept is not None and case.accept(snap, base):
            return Outcome(case, "tolerated")
        diff = [k for k in base if not same(snap.get(k), base[k])]
        return Outcome(case, "different", f"differs in {diff}")


def build_bases(root: Path) -> dict[str, Path]:
    """A tiny fitted table (`sgem fit` on a CSV with a categorical column, a seconds-long
    search): its run directory ("run"), its model ("table"), and that model saved as a
    combination with a logistic-regression member ("combo")."""
    import yaml
    from helpers import TINY_SEARCH
    from sklearn.linear_model import LogisticRegression

    from sgem.cli import main
    from sgem.moe.artifact import load_parts, save_model
    from sgem.moe.combination import Combination
    from sgem.moe.portable import export

    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-4, 1, (150, 2)), rng.normal(4, 1, (150, 2))]
    frame = pd.DataFrame({"a": x[:, 0], "b": 100 * x[:, 1], "kind": rng.choice(["u", "v"], 300)})
    frame["label"] = np.where(x[:, 0] + x[:, 1] > 0, "yes", "no")
    frame.to_csv(root / "train.csv", index=False)
    (root / "tiny.yaml").write_text(yaml.safe_dump({"search": dict(TINY_SEARCH)}))
    run = root / "run"
    args = ["fit", str(root / "train.csv"), "--target", "label", "--out", str(run)]
    if main([*args, "--config", str(root / "tiny.yaml"), "--quiet"]) != 0:
        raise RuntimeError("the fixture fit failed")
    spec, moe, pre = load_parts(run / "model")
    z, _ = pre.transform(ROWS, spec.info.get("encoding"))
    member = LogisticRegression().fit(np.r_[z, -z], [0, 1, 0, 0, 1, 1, 0, 1, 1, 0])
    task = type("Task", (), {"loss": spec.loss, "n_classes": spec.n_classes})
    _, state, arrays = Combination.build(
        np.array([0.7, 0.3]), ["logistic regression"], [], task, [export(member)]
    )
    spec.info = {**spec.info, "combination": state}
    experts = [e if used else None for e, used in zip(moe.experts, moe.used, strict=True)]
    save_model(root / "combo", spec, experts, pre, members=arrays)
    return {"run": run, "table": run / "model", "combo": root / "combo"}


def summary(outcomes: list[Outcome]) -> dict[str, dict]:
    """class -> {cases, outcome counts, refusing error types, failures (first 5)}."""
    table: dict[str, dict] = {}
    for o in outcomes:
        row = table.setdefault(
            o.case.cls, {"cases": 0, "outcomes": Counter(), "refused_by": Counter(), "failures": []}
        )
        row["cases"] += 1
        row["outcomes"][o.kind] += 1
        if o.kind == "refused":
            row["refused_by"][o.step] += 1
        if o.failed and len(row["failures"]) < 5:
            row["failures"].append(f"{o.case.name}: {o.kind} {o.detail}")
    return {
        k: {**v, "outcomes": dict(v["outcomes"]), "refused_by": dict(v["refused_by"])}
        for k, v in sorted(table.items())
    }


def format_table(table: dict[str, dict]) -> str:
    lines = [f"{'class':34} {'cases':>5}  outcomes (how refused)"]
    for cls, row in table.items():
        outcomes = ", ".join(f"{k} {n}" for k, n in sorted(row["outcomes"].items()))
        by = ", ".join(f"{k} {n}" for k, n in sorted(row["refused_by"].items()))
        lines.append(f"{cls:34} {row['cases']:5d}  {outcomes}" + (f" ({by})" if by else ""))
    total = sum(r["cases"] for r in table.values())
    lines.append(f"{'total':34} {total:5d}")
    return "\n".join(lines)
