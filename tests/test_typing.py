"""mypy on src/sgem is clean (configuration: [tool.mypy] in pyproject.toml).

CI runs only `sgem run toy` and pytest, so type checking runs here, as a test. It uses a
fresh cache under pytest's tmp directory (nothing written into the checkout; a cold run
takes seconds).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_is_clean_on_src(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[dev]')")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy_cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mypy found problems:\n{done.stdout}{done.stderr}"
