"""User `.npz` files, read safely: never unpickled, `x` and `y` required, and every failure
a one-line error that says how to save a readable file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import SgemUserError


def read_xy_npz(path: Path, x_is: str, y_is: str, save_as: str) -> dict[str, np.ndarray]:
    """Every array of the `.npz` at `path`, which must hold `x` and `y`. `x_is` / `y_is` say
    what they hold and `save_as` how to write such a file, for the messages (e.g.
    "np.savez(path, x=x, y=y)")."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}
    except ValueError as exc:
        raise SgemUserError(
            f"{path}: could not be read without pickle ({exc}); save plain arrays with {save_as}"
        ) from exc
    except (OSError, EOFError) as exc:
        raise SgemUserError(f"{path}: not a readable .npz file ({exc})") from exc
    if "x" not in arrays or "y" not in arrays:
        raise SgemUserError(
            f"{path} holds arrays {sorted(arrays)}; expected 'x' ({x_is}) and 'y' ({y_is}): "
            f"save it with {save_as}"
        )
    return arrays


__all__ = ["read_xy_npz"]
