"""Kill a running `sgem fit` / `sgem resume` with SIGKILL at a chosen moment, and say which
stage it interrupted: the drill behind the kill-and-resume test and benchmark.

Why in the package: the test (tests/test_kill_resume.py) and the stress benchmark
(benchmarks/kill_resume.py) kill the same way and must name stages the same way; the
stages are the run clock's (`sgem.run.budget_clock`), which saves itself at the end of every
stage, so the clock file tells which stages an attempt finished before its kill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from .budget_clock import CLOCK_FILE
from .rundir import CONFIG, RESULT

#: the clock's stages in run order; "saving" (model directory, result.json) is not a
#: clock stage: it lies between "calibration" and "figures"; of the two references stages
#: before the search a run has its task's only (`EARLY_REFERENCES`)
STAGES = (
    "reading_data",
    "scikit_learn_references",
    "planning",
    "classical_references",
    "search",
    "final_stage",
    "references",
    "seed_rounds",
    "leaderboard",
    "calibration",
    "saving",
    "figures",
)


#: the stage in which a user's task fits its references before the search, by the task's name
EARLY_REFERENCES = {"table": "scikit_learn_references", "series": "classical_references"}


def clock_state(run: Path) -> tuple[float | None, dict[str, float]]:
    """(seconds spent, {stage: seconds}) as the run clock last saved them; (None, {}) when
    there is no clock yet."""
    try:
        doc = json.loads((Path(run) / CLOCK_FILE).read_text())
        return float(doc["spent_seconds"]), {k: float(v) for k, v in doc["stages"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, {}


def _kind(run: Path) -> str | None:
    """The run's task name (its config.yaml's), or None where it cannot be read."""
    try:
        return str(yaml.safe_load((run / CONFIG).read_text())["run"]["task"]["name"])
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return None


def _budgeted(run: Path) -> bool:
    """Whether the run's clock holds a time budget (unreadable: as if it did)."""
    try:
        return json.loads((run / CLOCK_FILE).read_text()).get("budget_seconds") is not None
    except (OSError, ValueError, AttributeError):
        return True


def next_command(fit: list[str], resume: list[str], run: str | os.PathLike) -> list[str]:
    """What continues a killed fit: `resume` once the run directory holds its config; a
    fit killed before that (reading the data) wrote nothing to resume: `fit` again."""
    return resume if (Path(run) / CONFIG).exists() else fit


def interrupted_stage(
    before: dict[str, float],
    after: dict[str, float],
    saved: bool,
    budgeted: bool = True,
    kind: str | None = None,
) -> str:
    """The stage a killed attempt was in: the one after the last clock stage it finished
    (`before` / `after`: the clock's stages at its start and at its death; `saved`: it had
    saved the model, so only the figures and result.json were left; `budgeted`: the run
    has a time budget, without which it has no seed rounds; `kind`: the task's name, whose
    references stage before the search the run has, `EARLY_REFERENCES`)."""
    if saved:
        return "figures"
    early = EARLY_REFERENCES.get(kind or "")
    stages = [
        s
        for s in STAGES
        if (budgeted or s != "seed_rounds") and (s == early or s not in EARLY_REFERENCES.values())
    ]
    done = [s for s in stages if after.get(s, 0.0) > before.get(s, 0.0)]
    if not done:  # a table fits its references first; else reading, planning or the search
        table_first = kind == "table" and early not in after
        return EARLY_REFERENCES["table"] if table_first else "search"
    if done[-1] == "calibration":
        return "saving"
    return stages[min(stages.index(done[-1]) + 1, len(stages) - 1)]


@dataclass
class Attempt:
    """One run of a command that may have been killed."""

    killed: bool
    stage: str  # the stage it was in when it stopped (`interrupted_stage`)
    seconds: float  # wall seconds of the process
    returncode: int
    spent_at_kill: float | None  # what the clock had saved when the process died
    stderr: str


def attempt(
    cmd: list[str],
    run: str | os.PathLike,
    delay: float,
    after_stage: str | None = None,
    timeout: float = 600.0,
) -> Attempt:
    """Run `cmd` (which writes run directory `run`) and SIGKILL it `delay` seconds after it
    started, or `delay` seconds after it finished clock stage `after_stage`; it is left to
    finish when it ends first. A stage it never reaches leaves it to finish too."""
    run = Path(run)
    _, before = clock_state(run)
    err = run.parent / f".{run.name}.stderr"
    start, wall = time.perf_counter(), time.time()
    with open(err, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh)
        kill_at = None if after_stage else start + delay
        while proc.poll() is None and time.perf_counter() - start < timeout:
            if kill_at is None and after_stage is not None:
                _, now = clock_state(run)
                if now.get(after_stage, 0.0) > before.get(after_stage, 0.0):
                    kill_at = time.perf_counter() + delay
            if kill_at is not None and time.perf_counter() >= kill_at:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.01)
        if proc.poll() is None and kill_at is None:
            proc.kill()
            proc.wait()
            raise TimeoutError(f"{' '.join(cmd)} ran past {timeout:.0f} s")
        code = proc.wait()
    seconds = time.perf_counter() - start
    killed = code == -signal.SIGKILL
    spent, after = clock_state(run)
    model = run / "model" / "model.json"  # saved just before the figures
    saved = model.exists() and model.stat().st_mtime >= wall and not (run / RESULT).exists()
    stage = interrupted_stage(before, after, saved, _budgeted(run), _kind(run))
    if spent is None:
        stage = "start-up"  # no clock yet: reading the data, claiming the directory
    text = err.read_text()
    err.unlink()
    return Attempt(killed, stage if killed else "end", seconds, code, spent, text[-2000:])


__all__ = [
    "EARLY_REFERENCES",
    "STAGES",
    "Attempt",
    "attempt",
    "clock_state",
    "interrupted_stage",
    "next_command",
]
