"""Classical members refitted in several processes (sgem.moe.classical_pool): the same
numbers as one process, a series' origins kept together, and a deadline that stops them."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgem.moe import classical_pool
from sgem.moe.classical import ClassicalMember, Stopped
from sgem.moe.classical_pool import MAX_WORKERS, MIN_POOLED, Deadline, _chunks, pool_workers


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(0, 12), min_size=1, max_size=60),
    st.lists(st.integers(3, 40), min_size=60, max_size=60),
    st.integers(1, 9),
)
def test_chunks_hold_every_history_once_and_a_series_in_one_chunk(series, lengths, n):
    ids = np.asarray(series)
    histories = [np.zeros(lengths[i]) for i in range(len(ids))]
    chunks = _chunks(histories, ids, n)
    assert 1 <= len(chunks) <= min(n, len(set(series)))
    every = np.sort(np.concatenate(chunks))
    np.testing.assert_array_equal(every, np.arange(len(ids)))
    owner = {}
    for c, rows in enumerate(chunks):
        assert len(rows) > 0
        for s in ids[rows].tolist():
            assert owner.setdefault(s, c) == c  # a series' histories in one chunk


def _histories(n_series: int, origins: int = 2):
    rng = np.random.default_rng(0)
    histories, series = [], []
    for s in range(n_series):
        x = 50 + np.cumsum(rng.normal(size=40)) + 5 * np.sin(np.arange(40) * 2 * np.pi / 4)
        for o in range(origins):
            histories.append(x[: 32 + 4 * o])
            series.append(s)
    return histories, series


def test_the_processes_give_the_numbers_of_one_process(monkeypatch):
    histories, series = _histories(40)
    member = ClassicalMember("AutoTheta")
    one = member.forecast(histories, 4, 4, series=series, workers=1)
    monkeypatch.setattr(classical_pool, "POOL_SECONDS", 0.0)  # pool whatever the probe says
    many = member.forecast(histories, 4, 4, series=series, workers=2)
    np.testing.assert_allclose(many[0], one[0])
    np.testing.assert_allclose(many[1], one[1])


def test_a_deadline_stops_them_partially_or_raises(monkeypatch):
    histories, series = _histories(30)
    member = ClassicalMember("AutoETS")
    passed = Deadline(time.time() - 1.0)
    loc, scale = member.forecast(histories, 4, 4, passed, series, partial=True, workers=2)
    assert np.isnan(loc).all() and np.isnan(scale).all()
    with pytest.raises(Stopped):
        member.forecast(histories, 4, 4, passed, series, partial=False, workers=2)
    assert not Deadline(None)() and not Deadline(time.time() + 60)()


def test_few_histories_stay_in_this_process():
    assert pool_workers(MIN_POOLED - 1) == 1
    assert 1 <= pool_workers(10_000) <= MAX_WORKERS


def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path):
    """multiprocessing's spawn re-runs the caller's main script in every worker; a user's
    script that forecasts at top level must run once, and its forecasts come back."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "import numpy as np\n"
        "import sgem.moe.classical_pool as pool\n"
        "from sgem.moe.classical import ClassicalMember\n"
        "pool.POOL_SECONDS = 0.0\n"
        "print('top level ran', flush=True)\n"
        "x = [50 + np.sin(np.arange(30 + i % 5)) for i in range(40)]\n"
        "loc, _ = ClassicalMember('AutoTheta').forecast(x, 3, 4, workers=2)\n"
        "print('finite', bool(np.isfinite(loc).all()), flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("top level ran") == 1
    assert "finite True" in done.stdout


def test_the_refitting_processes_import_no_torch() -> None:
    """What a process refitting AutoETS / AutoTheta imports (`_chunk_forecast`'s modules)
    pulls in neither torch nor scikit-learn: each such process started in about 8 s when
    it did (torch alone about 3 s), 4.5 s now, and a budgeted fit starts two."""
    code = (
        "import sys, sgem.moe.classical, sgem.baselines.statistical, "
        "sgem.baselines.seasonal_naive, sgem.baselines.naive; "
        "print(sorted(m for m in ('torch', 'sklearn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
