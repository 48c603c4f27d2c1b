"""The `sgem` command: run, fit, resume, predict, show, plot, ops, download.

User mistakes (`SgemUserError` and the older ValueError-based errors) print one line and
exit with code 2; anything else is a bug and prints its traceback with a request to report
it. The parser (`parser`) and the commands (`commands`) are separate modules; heavy imports
happen inside the commands, so `sgem --help` starts fast.
"""

from __future__ import annotations

import sys
import time
import traceback

from ..terminal import one_line_warning, said_once
from .commands import COMMANDS, EXIT_INTERRUPTED, EXIT_USER_ERROR, _fail
from .parser import _parser


def main(argv: list[str] | None = None) -> int:
    import warnings

    started = time.perf_counter()  # before torch and statsforecast are imported: a time
    # budget counts their seconds too (`sgem fit --time-budget 30s` returned after 36 s)
    args = _parser().parse_args(argv)
    args.started = started
    shown, warnings.formatwarning = warnings.formatwarning, one_line_warning
    show, warnings.showwarning = warnings.showwarning, said_once(warnings.showwarning)
    try:
        return COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError, ConnectionError, ImportError, PermissionError) as exc:
        # SgemUserError, RunDirectoryError and StoreError are ValueErrors: the user's to fix
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("\nsgem: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:
        traceback.print_exc()
        print(
            "sgem: internal error (a bug, not your input). Please report it with the "
            "traceback above and the command you ran.",
            file=sys.stderr,
        )
        return 1
    finally:
        warnings.formatwarning, warnings.showwarning = shown, show


__all__ = ["EXIT_INTERRUPTED", "EXIT_USER_ERROR", "main"]
