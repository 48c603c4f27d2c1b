"""The `sgem` command: run, fit, resume, predict, show, plot, ops, download.

User mistakes (`SgemUserError` and the older ValueError-based errors) print one line and
exit with code 2; anything else is a bug and prints its traceback with a request to report
it. The parser (`parser`) and the commands (`commands`) are separate modules; heavy imports
happen inside the commands, so `sgem --help` starts fast.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from ..terminal import one_line_warning, said_once
from .commands import COMMANDS, EXIT_INTERRUPTED, EXIT_USER_ERROR, _fail
from .parser import _parser

#: set (to anything) to print the traceback of an error reported as the user's
DEBUG_VARIABLE = "SGEM_DEBUG"
#: the installed package: an error whose innermost frame is outside it came from a library
_PACKAGE = Path(__file__).resolve().parent.parent


def _raised_outside(exc: BaseException) -> str:
    """A hint for an error no check of sgem's raised (its innermost frame is in a library,
    e.g. numpy's "cannot reshape array of size 0"): it may be a bug, not the input."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or Path(frames[-1].filename).resolve().is_relative_to(_PACKAGE):
        return ""
    return (
        f"\n(raised inside {Path(frames[-1].filename).name}, not by a check of sgem's: if "
        f"the input looks right, this may be a bug; {DEBUG_VARIABLE}=1 prints the traceback "
        "to report)"
    )


#: options whose value is a duration: a value written with a minus reaches their check
_DURATIONS = ("--time-budget", "--forecast-budget")


def _durations_joined(argv: list[str]) -> list[str]:
    """`--time-budget -5m` as `--time-budget=-5m`: argparse reads a value that starts with
    "-" and is not a plain number as the next option, and answers "expected one argument"
    instead of the budget's own check, which names what it accepts."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if argv[i] in _DURATIONS and value[:1] == "-" and value[1:2].isdigit():
            out.append(f"{argv[i]}={value}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    import warnings

    started = time.perf_counter()  # before torch and statsforecast are imported: a time
    # budget counts their seconds too (`sgem fit --time-budget 30s` returned after 36 s)
    args = _parser().parse_args(_durations_joined(sys.argv[1:] if argv is None else argv))
    args.started = started
    shown, warnings.formatwarning = warnings.formatwarning, one_line_warning
    show, warnings.showwarning = warnings.showwarning, said_once(warnings.showwarning)
    try:
        return COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError, ConnectionError, ImportError, PermissionError) as exc:
        # SgemUserError, RunDirectoryError and StoreError are ValueErrors: the user's to fix
        if os.environ.get(DEBUG_VARIABLE):
            traceback.print_exc()
        return _fail(str(exc) + _raised_outside(exc))
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
