"""The references fitted before the search are kept in the run directory once fitted (a
forecaster's classical ones, a user's table's scikit-learn ones after each), so a resumed run
reads them instead of fitting them again out of the same budget; a damaged or foreign file is
never trusted (they are fitted again)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from sgem.methods.result import Fitted, MethodResult
from sgem.moe.classical import ClassicalMember
from sgem.run.kept_references import read_references, write_references


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


@pytest.fixture
def quick_boosting(monkeypatch) -> None:
    """Gradient boosting's settings chosen from two quick ones (the test's speed)."""
    from sgem.leaderboard import boosting_settings

    grid = ({"max_iter": 20}, {"max_iter": 20, "max_depth": 3})
    monkeypatch.setattr(boosting_settings, "BOOSTING_GRID", grid)


def _table(n: int = 150, classes: bool = True):
    """A user's table task: classes (or a target) from two features, three clusters."""
    from sgem.data.task import ClusteredTask, Split

    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) if classes else x[:, :1] * 2.0
    parts = np.array_split(np.arange(n), [int(0.6 * n), int(0.8 * n)])
    train, val, test = (Split(x[p], y[p], p % 3) for p in parts)
    loss = "cross_entropy" if classes else "student_t"
    return ClusteredTask(
        "table", train, val, test, loss=loss, n_clusters=3, n_classes=2 if classes else None
    )


@pytest.mark.parametrize("classes", [True, False])
def test_a_tables_references_are_kept_as_fitted_and_read_without_fitting(
    tmp_path, monkeypatch, classes, quick_boosting
) -> None:
    """A user's table's scikit-learn references are kept once fitted (their outputs, out-of-
    fold outputs and fitted internals as arrays); a resumed run reads them instead of
    fitting them again, and their saved form is what the fitted estimators' would be."""
    import sgem.run.early_references as early
    from sgem.moe.portable import export
    from sgem.run.budget_clock import BudgetClock
    from sgem.space.tabular import TabularSpace

    task, space, kept = _table(classes=classes), TabularSpace(), tmp_path / "kept.safetensors"
    clock = BudgetClock(None, None)
    fitted = early.table_references(task, space, 0, 100, clock, kept)
    assert fitted is not None and kept.exists()

    def refit(*a, **k):
        raise AssertionError("a kept reference was fitted again")

    for method in early.reference_methods(space):
        monkeypatch.setattr(type(method), "fit_evaluate", refit)
    back = early.table_references(task, space, 0, 100, clock, kept)
    assert back is not None and [r.method for r in back] == [r.method for r in fitted]
    for a, b in zip(fitted, back, strict=True):
        np.testing.assert_array_equal(a.val_output, b.val_output)
        np.testing.assert_array_equal(a.test_output, b.test_output)
        assert a.extra.keys() == b.extra.keys() and a.note == b.note
        for k, v in a.extra.items():
            np.testing.assert_array_equal(v, b.extra[k])
        assert a.fitted is not None and b.fitted is not None and a.fitted.scale == b.fitted.scale
        state, arrays = export(a.fitted.estimator)
        state_back, arrays_back = export(b.fitted.estimator)
        assert state == state_back and arrays.keys() == arrays_back.keys()
        for k, v in arrays.items():
            np.testing.assert_array_equal(v, arrays_back[k])


def _key(early, task, space, seed: int = 0) -> str:
    """The key `table_references` keeps a table's references under (no time budget)."""
    names = ",".join(m.name for m in early.reference_methods(space))
    return f"{early._rows_key(task, seed, 100, None)}|{names}"


def test_a_tables_kept_references_are_refitted_where_they_do_not_fit(
    tmp_path, monkeypatch, quick_boosting
) -> None:
    """Kept for another seed, for other rows, with a tampered tree, or only the first of two
    (a kill between them): what is not trusted is fitted again, the first kept one is not."""
    import sgem.run.early_references as early
    from sgem.run.budget_clock import BudgetClock
    from sgem.run.kept_references import read_references, write_references
    from sgem.space.tabular import TabularSpace

    task, space, kept = _table(), TabularSpace(), tmp_path / "kept.safetensors"
    clock = BudgetClock(None, None)
    fitted = early.table_references(task, space, 0, 100, clock, kept)
    assert fitted is not None
    good = kept.read_bytes()
    assert early.table_references(task, space, 1, 100, clock, kept) is not None  # another seed
    assert read_references(kept, task, _key(early, task, space)) is None  # (rewritten for it)
    kept.write_bytes(good)
    other = _table(n=160)
    assert early.table_references(other, space, 0, 100, clock, kept) is not None  # other rows
    kept.write_bytes(good)
    assert read_references(kept, task, _key(early, task, space)) is not None
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(kept), framework="np") as f:
        metadata, arrays = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    arrays["1.estimator.left"] = arrays["1.estimator.left"] + 10_000  # past its tree
    save_file(arrays, str(kept), metadata=metadata)
    assert read_references(kept, task, _key(early, task, space)) is None

    first_only = tmp_path / "first.safetensors"
    refs = early.table_references(task, space, 0, 100, clock, first_only)
    assert refs is not None
    write_references(first_only, refs[:1], _key(early, task, space))
    calls: list[str] = []
    again = early.reference_methods(space)[1]
    original = type(again).fit_evaluate

    def counted(self, *a, **k):
        calls.append(self.name)
        return original(self, *a, **k)

    monkeypatch.setattr(type(again), "fit_evaluate", counted)
    back = early.table_references(task, space, 0, 100, clock, first_only)
    assert calls == [again.name] and back is not None and len(back) == 2
    np.testing.assert_array_equal(back[1].val_output, refs[1].val_output)


def test_a_forecasters_references_are_kept_each_as_fitted(tmp_path, monkeypatch) -> None:
    """Each classical reference is kept as soon as it is fitted: a run killed while fitting
    the third resumes with the first two read back and fits the third alone."""
    import sgem.run.early_references as early
    from sgem.methods.budget import MethodBudget
    from sgem.run.budget_clock import BudgetClock
    from sgem.space.timeseries import TimeSeriesSpace

    task, kept = _task(), tmp_path / "classical.safetensors"
    calls: list[str] = []

    class Member:
        def __init__(self, name: str, dies: bool = False) -> None:
            self.member = self.name = name
            self.dies = dies

        def fit_evaluate(self, task, budget) -> MethodResult:
            calls.append(self.name)
            if self.dies:
                raise RuntimeError("killed")
            shapes = ((*task.val.y.shape, 3), (*task.test.y.shape, 3))
            return MethodResult(
                self.name,
                0,
                val_output=np.ones(shapes[0]),
                test_output=np.ones(shapes[1]),
                kind="classical",
                fitted=Fitted(classical=ClassicalMember(self.name)),
            )

    def members(dies: bool):
        return lambda space: [Member("SeasonalNaive"), Member("AutoETS"), Member("AutoTheta", dies)]

    plan, clock = {"references_seconds_estimate": 1.0}, BudgetClock(None, None)
    args = (task, TimeSeriesSpace(), MethodBudget(), plan, clock, kept)
    monkeypatch.setattr(early, "reference_methods", members(dies=True))
    with pytest.raises(RuntimeError, match="killed"):
        early.classical_first(*args)
    assert calls == ["SeasonalNaive", "AutoETS", "AutoTheta"] and kept.exists()
    calls.clear()
    monkeypatch.setattr(early, "reference_methods", members(dies=False))
    refs = early.classical_first(*args)
    assert calls == ["AutoTheta"] and refs is not None
    assert [r.method for r in refs] == ["SeasonalNaive", "AutoETS", "AutoTheta"]
    calls.clear()
    assert early.classical_first(*args) is not None and calls == []  # every one kept
