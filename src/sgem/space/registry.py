"""A search space <-> its config section (`space:` in a run config, `model.json`).

One place turns a config into a space and a space back into a config, so a saved model can
rebuild its experts' networks from plain JSON.
"""

from __future__ import annotations

from typing import Any

from ..errors import SgemUserError
from .arch import CellSpace
from .darts import DartsSpace
from .tabular import TabularSpace
from .timeseries import TimeSeriesSpace

SPACES: dict[str, type[CellSpace]] = {
    "tabular": TabularSpace,
    "timeseries": TimeSeriesSpace,
    "darts": DartsSpace,
}
#: The constructor arguments (besides the ops) each kind records.
_FIELDS: dict[str, tuple[str, ...]] = {
    "tabular": ("n_nodes", "hidden", "dropout", "rbf_centres", "head", "frame"),
    "timeseries": (
        "n_nodes",
        "channels",
        "ma_kernel",
        "dilation",
        "patch_len",
        "heads",
        "min_scale",
    ),
    "darts": ("n_cell_nodes", "init_channels", "in_channels"),
}


def build_space(cfg: dict[str, Any]) -> CellSpace:
    """The search space of a config section: `kind` ("tabular", "timeseries", "darts"),
    `ops`, and the kind's own settings."""
    params = dict(cfg)
    kind = params.pop("kind", None)
    if kind not in SPACES:
        raise SgemUserError(
            f"unknown space kind {kind!r}; available: {sorted(SPACES)} (set space.kind)"
        )
    ops = params.pop("ops")
    unknown = sorted(set(params) - set(_FIELDS[kind]))
    if unknown:
        raise SgemUserError(
            f"unknown setting(s) {unknown} for a {kind} space; known: {list(_FIELDS[kind])}"
        )
    return SPACES[kind](op_names=ops, **params)


def space_config(space: CellSpace) -> dict[str, Any]:
    """The config section that `build_space` turns back into an equal space."""
    for kind, cls in SPACES.items():
        if type(space) is cls:
            cfg: dict[str, Any] = {"kind": kind, "ops": list(space.op_names)}
            cfg.update({name: getattr(space, name) for name in _FIELDS[kind]})
            return cfg
    raise SgemUserError(
        f"a {type(space).__name__} cannot be saved in a model: only the built-in spaces "
        f"({', '.join(c.__name__ for c in SPACES.values())}) are rebuilt from a model directory"
    )


__all__ = ["SPACES", "build_space", "space_config"]
