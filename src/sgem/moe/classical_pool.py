"""AutoETS / AutoTheta refitted on many series side by side, one process per core.

Why: a classical member is refitted on every series wherever it is used (the leaderboard's
validation and holdout windows before the search, and every `predict` of a saved
combination), one local fit after another. On the 366 tourism series that is 53 s for
AutoETS and 18 s for AutoTheta on one core, while the machine has more: the fits of
different series share nothing, so they split across processes with the same numbers.

The series (all the histories of one series together, so its later origins still run
forward on its first fit) are dealt to `CHUNKS_PER_WORKER` chunks per worker, largest
first; each chunk is the serial loop (`sgem.moe.classical`) in a spawned process that does not
run the caller's main script again, and a chunk a dying worker lost is done here. A `Deadline` (a
wall-clock time, and the budget's fence, which spawned workers inherit) stops them: with
`partial`, every chunk ends with the series it finished (still a random subset of the
series), otherwise `Stopped` is raised as by the serial loop.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np

from ..execution.progress import stage_bar
from ..train.time_fence import fence_passed

#: histories below which one process does it (starting workers costs seconds)
MIN_POOLED = 64
#: the most worker processes (also bounded by the cores this process may use)
MAX_WORKERS = 8
#: chunks per worker: a finer split balances the workers and moves the progress bar
CHUNKS_PER_WORKER = 4
#: where more processes than one may refit: the seconds the rest must be expected to take
#: in one process for the workers to be worth starting, and what starting them costs
#: (spawning, importing statsforecast and torch)
POOL_SECONDS = 8.0
START_SECONDS = 4.0


@dataclass(frozen=True)
class Deadline:
    """A stop rule that crosses processes: `at` (a `time.time()` value, or None) has
    passed, or the time budget's fence has."""

    at: float | None = None

    def __call__(self) -> bool:
        return (self.at is not None and time.time() > self.at) or fence_passed()


def pool_workers(n_histories: int) -> int:
    """How many processes refit `n_histories` histories: 1 below `MIN_POOLED`, else the
    cores this process may use, at most `MAX_WORKERS`."""
    if n_histories < MIN_POOLED:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def pooled_seconds(serial: float, workers: int) -> float:
    """What refits that take `serial` seconds in one process take where `ClassicalMember.
    forecast` may use `workers` (it pools only what is expected to take `POOL_SECONDS`)."""
    if workers <= 1 or serial < POOL_SECONDS:
        return serial
    return START_SECONDS + serial / workers


def process_start(cost: float) -> float:
    """The process start inside a member's every-series `cost`: `pooled_seconds` adds it
    where the refits are spread over processes, and such a cost is at least `POOL_SECONDS`
    on two cores (an unpooled one is less; on more cores a pooled cost just under it is
    taken for unpooled, a few seconds optimistic). Why: at a 30-s budget on the 756 M3
    quarterly series, AutoTheta (about 6 s, in one process) was charged a start it never
    pays, left out with AutoETS, and the fit then had nothing but seasonal naive to lean on."""
    return START_SECONDS if cost >= POOL_SECONDS else 0.0


def pooled_forecast(
    chunk_forecast: Callable,
    name: str,
    histories: Sequence[np.ndarray],
    horizon: int,
    seasons: np.ndarray,
    series: np.ndarray,
    stop: Deadline | None,
    partial: bool,
    workers: int,
) -> tuple[np.ndarray, np.ndarray]:
    """`chunk_forecast` (a module-level function the workers import: member `name`'s
    serial forecast of some histories) of every history, split by series across `workers`
    processes: (loc, scale), each (n, horizon); NaN where `partial` stopped first."""
    chunks = _chunks(histories, series, workers * CHUNKS_PER_WORKER)
    loc = np.full((len(histories), horizon), np.nan)
    scale = np.full_like(loc, np.nan)
    left = dict(enumerate(chunks))

    def args(rows: np.ndarray) -> tuple:
        subset = [histories[i] for i in rows]
        return (name, subset, horizon, seasons[rows], series[rows], stop, partial)

    desc = f"{name} refitted per series ({workers} processes)"
    with stage_bar(len(histories), desc, "fit") as bar:
        try:
            with (
                _main_not_rerun(),  # (the workers start while chunks are submitted)
                ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool,
            ):
                futures = {pool.submit(chunk_forecast, *args(r)): i for i, r in left.items()}
                for future in as_completed(futures):
                    rows = left.pop(futures[future])
                    loc[rows], scale[rows] = future.result()  # (a `Stopped` is raised here)
                    bar.update(len(rows))
        except BrokenProcessPool:  # a worker died (memory, a kill): the rest in this process
            for rows in left.values():
                loc[rows], scale[rows] = chunk_forecast(*args(rows))
                bar.update(len(rows))
    return loc, scale


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Spawned workers start without importing the caller's `__main__`: multiprocessing's
    spawn re-runs the main script in every worker (a user's script that calls `predict` at
    top level, without `if __name__ == "__main__"`, would run again there and die), and
    these workers need nothing from it (they import `chunk_forecast` by its module)."""
    main = sys.modules.get("__main__")
    saved = {k: getattr(main, k) for k in ("__file__", "__spec__") if hasattr(main, k)}
    try:
        for key in saved:
            setattr(main, key, None)
        yield
    finally:
        for key, value in saved.items():
            setattr(main, key, value)


def _chunks(histories: Sequence[np.ndarray], series: np.ndarray, n: int) -> list[np.ndarray]:
    """The histories' indices in at most `n` chunks, a series' histories always together,
    the series dealt largest first to the chunk with the fewest points so far."""
    ids, inverse = np.unique(series, return_inverse=True)
    points = np.zeros(len(ids))
    np.add.at(points, inverse, [len(h) for h in histories])
    n = max(1, min(n, len(ids)))
    load = np.zeros(n)
    owner = np.empty(len(ids), dtype=np.int64)
    for s in np.argsort(-points, kind="stable"):
        owner[s] = int(np.argmin(load))
        load[owner[s]] += points[s] + 50.0  # (a fit's fixed cost, in points)
    return [np.flatnonzero(owner[inverse] == c) for c in range(n) if (owner == c).any()]


__all__ = ["Deadline", "pool_workers", "pooled_forecast", "pooled_seconds", "process_start"]
