"""Progress bars for the work after the search: the champion cell, the global networks,
the tracking runs and the final experts take minutes on a forecasting preset (most of a
`sgem run ts-offline` after the EM bar has finished) and would otherwise be silent.

Off unless a caller opts in with `shown(True)` (`sgem run` / `sgem fit` do, when the
search shows its own bar), so the library and the tests stay quiet. A context variable
rather than a flag threaded through every function between the pipeline and the training
loops; worker processes never show one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from tqdm.auto import tqdm

_SHOW: ContextVar[bool] = ContextVar("sgem_show_progress", default=False)


@contextmanager
def shown(show: bool = True) -> Iterator[None]:
    """Within this block, `stage_bar`s are drawn (when `show`)."""
    token = _SHOW.set(show)
    try:
        yield
    finally:
        _SHOW.reset(token)


def stage_bar(total: int, desc: str, unit: str = "net") -> tqdm:
    """A bar over `total` trainings (or other `unit`s) of one stage (drawn only inside
    `shown(True)`)."""
    return tqdm(total=total, desc=desc, unit=unit, disable=not _SHOW.get() or total < 1)


__all__ = ["shown", "stage_bar"]
