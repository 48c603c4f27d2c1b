"""The wall clock of one run: stages, time spent across resumes, and a progress heartbeat.

Why a clock of its own: a time budget is a promise about the whole fit (reading the data,
the search, the final stage, the references, saving), and a resumed fit must continue with
what is *left* of it, not start a fresh budget. The clock therefore keeps the seconds spent
in the run directory (`budget_clock.json`, rewritten atomically every second and at
every stage change), so a fit killed at any moment loses at most that much of its account.

Long stages used to be silent for minutes; while a run goes, a heartbeat thread saves the
clock every `SAVE_SECONDS` (so a kill loses at most that much of the account: one small
atomic rewrite a second) and, with progress on, prints one line (stage, elapsed, left of the
budget) every `HEARTBEAT_SECONDS`.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..atomic import write_atomic

CLOCK_FILE = "budget_clock.json"
HEARTBEAT_SECONDS = 10.0
#: how often the clock file is rewritten: a SIGKILL loses at most this much of the account
SAVE_SECONDS = 1.0


class BudgetClock:
    """Seconds spent by a run (across resumes), per stage, against an optional budget."""

    def __init__(
        self,
        file: Path | None,
        budget: float | None,
        started: float | None = None,
        resume: bool = False,
        heartbeat: bool = False,
    ) -> None:
        self.file = file
        self.budget = None if budget is None else float(budget)
        spent, stages = 0.0, {}
        if resume and file is not None and file.exists():
            try:
                saved = json.loads(file.read_text())
                spent, stages = float(saved["spent_seconds"]), dict(saved.get("stages", {}))
            except (ValueError, KeyError, TypeError, OSError):
                spent, stages = 0.0, {}  # a torn clock costs the account, never the run
        now = time.perf_counter()
        begun = now if started is None else started
        #: the perf_counter value the run would have started at had it never stopped
        self.started = begun - spent
        self.resumed_with_spent = spent
        self.stages: dict[str, float] = {k: float(v) for k, v in stages.items()}
        self.stage = "start"
        self._stage_started = now
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prints = heartbeat
        if heartbeat or file is not None:
            self._thread = threading.Thread(target=self._beat, name="sgem-heartbeat", daemon=True)
            self._thread.start()

    # -- reading ------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def left(self) -> float | None:
        return None if self.budget is None else self.budget - self.elapsed()

    def wall_time_at(self, seconds_into_run: float) -> float:
        """The `time.time()` value `seconds_into_run` after the run's (virtual) start."""
        return time.time() - self.elapsed() + seconds_into_run

    def line(self) -> str:
        """One progress line: stage, elapsed, left of the budget."""
        text = f"[sgem] {self.stage.replace('_', ' ')}: {self.elapsed():.0f} s elapsed"
        left = self.left()
        if left is not None and self.budget is not None:
            text += f", {max(left, 0.0):.0f} s left of {self.budget:.0f} s"
        return text

    # -- stages -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Time a stage (its seconds add up over resumes and repeated entries)."""
        with self._lock:
            previous, self.stage, self._stage_started = self.stage, stage, time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                seconds = time.perf_counter() - self._stage_started
                self.stages[stage] = self.stages.get(stage, 0.0) + seconds
                self.stage, self._stage_started = previous, time.perf_counter()
            self.save()

    def save(self) -> None:
        """Write the spent seconds and the stage times (temporary file, then rename)."""
        if self.file is None or not self.file.parent.exists():
            return
        doc = {
            "spent_seconds": round(self.elapsed(), 3),
            "budget_seconds": self.budget,
            "stages": {k: round(v, 3) for k, v in self.stages.items()},
        }
        with contextlib.suppress(OSError):  # atomic; not fsynced: rewritten every second
            write_atomic(self.file, json.dumps(doc, indent=1), durable=False)

    def report(self) -> dict:
        """What result.json records: the budget, the wall clock per stage, resumes."""
        out: dict = {
            "budget_seconds": self.budget,
            "wall_seconds": round(self.elapsed(), 3),
            "stage_seconds": {k: round(v, 3) for k, v in self.stages.items()},
        }
        if self.resumed_with_spent:
            out["spent_before_resume_seconds"] = round(self.resumed_with_spent, 3)
        return out

    # -- heartbeat ----------------------------------------------------------------------------
    def _beat(self) -> None:
        beats = 0
        while not self._stop.wait(SAVE_SECONDS):
            self.save()
            beats += 1
            if self._prints and beats % round(HEARTBEAT_SECONDS / SAVE_SECONDS) == 0:
                with contextlib.suppress(Exception):
                    _print_line(self.line())

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        self.save()


def _print_line(text: str) -> None:
    """A line between progress bars (tqdm's write keeps an active bar intact)."""
    try:
        from tqdm import tqdm

        tqdm.write(text, file=sys.stderr)
    except ImportError:  # pragma: no cover - tqdm is a core dependency
        print(text, file=sys.stderr, flush=True)


__all__ = ["CLOCK_FILE", "HEARTBEAT_SECONDS", "SAVE_SECONDS", "BudgetClock"]
