"""The built-in presets: one YAML file per preset in this package (their only source).

`load_preset(name)` returns a fresh copy of a file's content as a plain mapping; the
`search` section lists only the settings that differ from `SearchConfig`'s defaults, and
`sgem.run.runconfig.preset(name)` gives the full run config (what `sgem run NAME` runs).
`PRESET_NAMES` lists them. A file is read once per process.
"""

from __future__ import annotations

import copy
from functools import cache
from importlib import resources
from typing import Any

import yaml

#: The presets, in the order `sgem run --help` shows them.
PRESET_NAMES = ("toy", "ts-offline", "ts-paper", "images-offline", "images-paper")


@cache
def _read(name: str) -> dict[str, Any]:
    text = resources.files(__name__).joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"the packaged preset {name}.yaml is not a mapping")
    return data


def load_preset(name: str) -> dict[str, Any]:
    """A fresh copy of preset `name`'s run config (KeyError for an unknown name)."""
    if name not in PRESET_NAMES:
        raise KeyError(name)
    return copy.deepcopy(_read(name))


__all__ = ["PRESET_NAMES", "load_preset"]
