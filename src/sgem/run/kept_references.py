"""References fitted before the search, kept in the run directory: a resumed run reads them
instead of fitting them again out of the same budget. A forecaster's classical references
(AutoETS / AutoTheta took 68 s of a 3-minute tourism fit, and a resume paid them twice) and a
user's table's scikit-learn ones (on a large table about a quarter of the budget: its
gradient boosting is sized to it, `sgem.leaderboard.table_members`), the table's written after
each member, so a kill between them keeps the first.

One safetensors file: outputs, array extras and a scikit-learn member's fitted internals
(`sgem.moe.portable`) as arrays, the rest as JSON in its metadata. Nothing in it is executed;
a file that is damaged, fitted on other rows (`key`) or shaped for other windows is not
trusted: its references are fitted again."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from ..atomic import write_atomic
from ..methods.result import Fitted, MethodResult
from ..moe.portable import PortableModel, export

log = logging.getLogger(__name__)

#: a forecaster's classical references as fitted, in the run directory
CLASSICAL_FILE = "classical_references.safetensors"
#: a user's table's scikit-learn references as fitted, in the run directory
TABLE_FILE = "table_references.safetensors"


def write_references(path: Path, refs: list[MethodResult], key: str = "") -> None:
    """`refs` as safetensors (a member the budget skipped: its note alone), with `key` (what
    they were fitted on) in the metadata; one atomic write."""
    from safetensors.numpy import save

    arrays: dict[str, np.ndarray] = {}
    entries = []
    for i, r in enumerate(refs):
        skipped = r.val_output is None or r.test_output is None  # (no outputs: a note only)
        if not skipped:
            arrays[f"{i}.val"] = np.ascontiguousarray(r.val_output, dtype=np.float64)
            arrays[f"{i}.test"] = np.ascontiguousarray(r.test_output, dtype=np.float64)
        fit = r.fitted
        classical = None if fit is None or fit.classical is None else fit.classical.state()
        estimator = None
        if fit is not None and fit.estimator is not None:
            estimator, parts = export(fit.estimator)
            arrays |= {f"{i}.estimator.{k}": np.ascontiguousarray(a) for k, a in parts.items()}
        extra, array_extras = {}, []
        for k, v in r.extra.items():
            if isinstance(v, np.ndarray):
                arrays[f"{i}.extra.{k}"] = np.ascontiguousarray(v)
                array_extras.append(k)
            else:
                extra[k] = v
        entries.append(
            {
                "skipped": skipped,
                "method": r.method,
                "seed": r.seed,
                "seconds": r.seconds,
                "note": r.note,
                "kind": r.kind,
                "crps_samples": r.crps_samples,
                "classical": classical,
                "estimator": estimator,
                "scale": None if fit is None else fit.scale,
                "extra": extra,
                "array_extras": array_extras,
            }
        )
    metadata = {"references": json.dumps(entries), "key": key}
    write_atomic(path, save(arrays, metadata=metadata))


def read_references(path: Path, task, key: str = "") -> list[MethodResult] | None:
    """The references `write_references` kept, or None (and they are fitted again) where the
    file is unreadable, was written for another `key`, or does not fit this task's splits."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="np") as f:
            metadata = f.metadata() or {}
            arrays = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
        if metadata.get("key", "") != key:
            raise ValueError("fitted on other rows or with other settings")
        entries = json.loads(metadata["references"])
        refs = [_entry(i, e, arrays, task) for i, e in enumerate(entries)]
    except Exception as err:  # any damage: fit them again rather than trust or crash
        log.warning("kept references unreadable (%s): fitting them again", err)
        return None
    return refs or None


def _entry(i: int, e: dict, arrays: dict[str, np.ndarray], task) -> MethodResult:
    """The `i`-th kept reference, its arrays checked against the task's splits."""
    note, kind, crps_samples = str(e["note"]), str(e["kind"]), int(e["crps_samples"])
    if e.get("skipped") is True:  # a member the budget skipped: its row says so
        return MethodResult(
            str(e["method"]), int(e["seed"]), note=note, kind=kind, crps_samples=crps_samples
        )
    val, test = arrays[f"{i}.val"], arrays[f"{i}.test"]
    _fits(val, np.shape(task.val.y), "validation outputs")
    _fits(test, np.shape(task.test.y), "holdout outputs")
    if e["classical"] is not None and (val.shape[-1] != 3 or test.shape[-1] != 3):
        raise ValueError(f"outputs of shapes {val.shape}, {test.shape} for a forecaster")
    classical = None
    if e["classical"] is not None:
        from ..moe.classical import ClassicalMember

        classical = ClassicalMember.from_state(e["classical"])
    estimator = None
    if e.get("estimator") is not None:
        prefix = f"{i}.estimator."
        parts = {k[len(prefix) :]: a for k, a in arrays.items() if k.startswith(prefix)}
        estimator = PortableModel.from_state(e["estimator"], parts)  # (checks every field)
    extra = dict(e["extra"])
    for k in e.get("array_extras", []):
        extra[k] = arrays[f"{i}.extra.{k}"]
        _fits(extra[k], (len(task.train) + len(task.val),), f"extra {k!r}")
    scale = 1.0 if e.get("scale") is None else float(e["scale"])
    return MethodResult(
        str(e["method"]),
        int(e["seed"]),
        seconds=float(e["seconds"]),
        val_output=val,
        test_output=test,
        fitted=Fitted(estimator=estimator, scale=scale, classical=classical),
        extra=extra,
        note=note,
        kind=kind,
        crps_samples=crps_samples,
    )


def _fits(a: np.ndarray, lead: tuple, what: str) -> None:
    """ValueError unless `a`'s leading dimensions are `lead` (a split's rows and steps)."""
    if a.shape[: len(lead)] != tuple(lead):
        raise ValueError(f"{what} of shape {a.shape} for rows of shape {tuple(lead)}")


__all__ = ["CLASSICAL_FILE", "TABLE_FILE", "read_references", "write_references"]
