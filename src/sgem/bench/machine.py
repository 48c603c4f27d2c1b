"""What the machine was doing while a benchmark timed something (saved with its numbers).

Timings on a shared machine mean little without the load beside them, so the scripts save
the load average, the busiest other processes and the platform with every measurement.
"""

from __future__ import annotations

import os
import platform
import subprocess


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded."""
    return [round(v, 2) for v in os.getloadavg()]


def busiest(n: int = 6) -> list[str]:
    """The `n` processes using the most CPU right now (what else was running)."""
    try:
        out = subprocess.run(
            ["ps", "-eo", "pcpu,etime,args", "--sort=-pcpu"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line.strip()[:160] for line in out.splitlines()[1 : n + 1]]


def commit(short: bool = True) -> str | None:
    """The checkout's HEAD commit (what a result file records), or None outside git."""
    args = ["git", "rev-parse", *(["--short"] if short else []), "HEAD"]
    try:
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out or None


def machine_info() -> dict[str, str]:
    """Platform, Python and torch versions (torch imported only here, when asked)."""
    import torch

    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
