"""How sgem's commands speak at a terminal: a warning is one line, `sgem: warning: ...`,
and each distinct one is said once per command."""

from __future__ import annotations

from collections.abc import Callable


def one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as the user reads it at a terminal: `sgem: warning: ...`, without the
    source file and code line Python shows by default."""
    return f"sgem: warning: {message}\n"


def said_once(show: Callable[..., None]) -> Callable[..., None]:
    """`show` (warnings.showwarning) that shows each distinct message once per command: a
    fit trying several K reads its table once per K, and said the same about it each time."""
    said: set[tuple[type, str]] = set()

    def show_once(message, category, *args, **kwargs) -> None:
        if (category, str(message)) not in said:
            said.add((category, str(message)))
            show(message, category, *args, **kwargs)

    return show_once


__all__ = ["one_line_warning", "said_once"]
