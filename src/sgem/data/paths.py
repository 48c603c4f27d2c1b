"""Where the offline datasets live.

The project keeps real offline stand-ins in a `shared/data` folder next to the checkout
(`../shared/data` from the repository root). `$SGEM_DATA` overrides it. Nothing here
downloads anything.
"""

from __future__ import annotations

import os
from pathlib import Path


def shared_data_dir() -> Path:
    """`$SGEM_DATA`, else `shared/data` beside the repository this package runs from, else
    `../shared/data` from the working directory (the path may not exist; callers say so)."""
    env = os.environ.get("SGEM_DATA")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[3]  # src/sgem/data/paths.py -> repository root
    beside_repo = repo.parent / "shared" / "data"
    if beside_repo.is_dir():
        return beside_repo
    return Path.cwd().resolve().parent / "shared" / "data"
