"""The one error type for user mistakes.

Anything the user can fix (a bad input file, a wrong config value, a run directory that
belongs to another run) raises `SgemUserError` (a `ValueError`, so existing `except
ValueError` code keeps working). The CLI prints its message alone and exits with code 2;
any other exception is a bug and is shown with its traceback and a request for a report.
A message names the problem and the fix.
"""

from __future__ import annotations


class SgemUserError(ValueError):
    """A problem in what the user gave sgem (data, config, paths), with the fix in the message."""


__all__ = ["SgemUserError"]
