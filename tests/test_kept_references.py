"""A forecaster's classical references are kept in the run directory once fitted, so a
resumed run reads them instead of fitting AutoETS / AutoTheta again out of the same budget;
a damaged or foreign file is never trusted (they are fitted again)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from sgem.methods.result import Fitted, MethodResult
from sgem.moe.classical import ClassicalMember
from sgem.run.early_references import read_references, write_references


def _task(n_val: int = 5, n_test: int = 3, h: int = 4):
    return SimpleNamespace(
        val=SimpleNamespace(y=np.zeros((n_val, h))), test=SimpleNamespace(y=np.zeros((n_test, h)))
    )


def _refs(task) -> list[MethodResult]:
    rng = np.random.default_rng(0)
    shapes = ((*task.val.y.shape, 3), (*task.test.y.shape, 3))
    partial = rng.normal(size=shapes[1])
    partial[0] = np.nan  # a member the budget ended on some series
    return [
        MethodResult(
            "AutoETS",
            0,
            seconds=12.5,
            val_output=rng.normal(size=shapes[0]),
            test_output=rng.normal(size=shapes[1]),
            note="interval width x1.30",
            kind="classical",
            crps_samples=50,
            fitted=Fitted(classical=ClassicalMember("AutoETS", 1.3, 4.0)),
        ),
        MethodResult(
            "AutoTheta",
            0,
            val_output=rng.normal(size=shapes[0]),
            test_output=partial,
            kind="classical",
            fitted=Fitted(classical=ClassicalMember("AutoTheta")),
            extra={"subset": "2 of 3 series"},
        ),
        MethodResult("SeasonalNaive", 0, note="skipped: budget ended", kind="classical"),
    ]


def test_kept_references_read_back_as_fitted(tmp_path) -> None:
    task, path = _task(), tmp_path / "refs.safetensors"
    refs = _refs(task)
    write_references(path, refs)
    back = read_references(path, task)
    assert back is not None and len(back) == len(refs)
    for a, b in zip(refs, back, strict=True):
        assert (a.method, a.seed, a.seconds, a.note, a.kind, a.extra) == (
            b.method,
            b.seed,
            b.seconds,
            b.note,
            b.kind,
            b.extra,
        )
        assert a.crps_samples == b.crps_samples
        np.testing.assert_array_equal(a.val_output, b.val_output)
        np.testing.assert_array_equal(a.test_output, b.test_output)  # NaNs kept
        if a.fitted is None:  # skipped by the budget: a note, no outputs, nothing fitted
            assert b.val_output is None and (b.fitted is None or b.fitted.classical is None)
            continue
        assert b.fitted is not None and b.fitted.classical is not None
        assert b.fitted.classical.state() == a.fitted.classical.state()


@pytest.mark.parametrize(
    "damage",
    ["truncate", "flip", "other_task", "bad_state"],
)
def test_damaged_or_foreign_kept_references_are_fitted_again(tmp_path, caplog, damage) -> None:
    task, path = _task(), tmp_path / "refs.safetensors"
    refs = _refs(task)
    if damage == "bad_state":  # a member name the library does not know
        refs[0].fitted = Fitted(classical=SimpleNamespace(state=lambda: {"format": "x"}))
    write_references(path, refs)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        path.write_bytes(data[:8] + bytes([data[8] ^ 0xFF]) + data[9:])
    with caplog.at_level(logging.WARNING):
        other = _task(n_val=6) if damage == "other_task" else task
        assert read_references(path, other) is None
    assert "fitting them again" in caplog.text
