"""benchmarks/ holds thin scripts over one library, `sgem.bench`: every script is under 200
lines and imports no other script; the library loads no optional package when imported; a
forecasting task's seasonal period comes from its data, not from a benchmark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


def _imported_modules(path: Path) -> set[str]:
    """Top-level names of every module `path` imports (module level and inside functions)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_every_script_is_short() -> None:
    long = {p.name: n for p in SCRIPTS if (n := len(p.read_text().splitlines())) >= 200}
    assert not long, f"benchmark scripts of 200 lines or more (move code to sgem.bench): {long}"


def test_no_script_imports_another() -> None:
    scripts = {p.stem for p in SCRIPTS}
    found = {p.name: sorted(_imported_modules(p) & scripts) for p in SCRIPTS}
    found = {name: mods for name, mods in found.items() if mods}
    assert not found, f"scripts importing other scripts (import sgem.bench instead): {found}"


def test_the_library_imports_no_optional_package() -> None:
    """Importing every module of sgem.bench loads neither statsforecast nor ray."""
    code = (
        "import pkgutil, importlib, sys, sgem.bench as b\n"
        "for m in pkgutil.iter_modules(b.__path__):\n"
        "    importlib.import_module(f'sgem.bench.{m.name}')\n"
        "print(sorted(n for n in ('statsforecast', 'ray') if n in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_seasonal_period_comes_from_the_files_frequency() -> None:
    from sgem.data.timeseries import make_timeseries_task
    from sgem.data.tsf import TSFData

    t = np.arange(600.0)
    domains = {
        name: TSFData(
            [np.sin(2 * np.pi * t / period) + 0.01 * t + 5 + i for i in range(3)],
            [{"series_name": f"{name}{i}"} for i in range(3)],
            {"series_name": "string"},
            frequency=frequency,
        )
        for name, frequency, period in (("h", "hourly", 24), ("m", "monthly", 12), ("u", None, 7))
    }
    task = make_timeseries_task(domains, n_windows=90, n_clusters=3, context=48, horizon=8)
    assert task.meta["frequencies"] == ["hourly", "monthly", None]
    assert task.meta["seasonality"] == [24, 12, 1]


@pytest.mark.requires_shared_data("timeseries")
def test_a_benchmark_task_is_the_packages_task() -> None:
    """sgem.bench builds the task the run config's builder builds (one build path)."""
    from sgem.bench.config import scale_defaults
    from sgem.bench.tasks import build_task
    from sgem.run.runconfig import build_task_from_config

    cfg = scale_defaults("smoke")
    task = build_task(cfg["task"], seed=1)
    same = build_task_from_config(cfg["task"], 1)
    assert np.array_equal(task.test.x, same.test.x)
    assert task.meta["seasonality"] == [24, 24, 1, 12]  # hourly, hourly, daily, monthly
