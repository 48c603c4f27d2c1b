"""Lazily resolved package attributes (PEP 562), shared by `sgem` and `sgem.data`.

Why: `import sgem` / `sgem --help` and worker processes should not pay for torch,
scikit-learn or scipy.stats until a name that needs them is used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from typing import Any


def lazy_attributes(
    package: str, table: dict[str, str], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's `__getattr__` and `__dir__`: `table` maps a public name to the (relative)
    submodule defining it; the first use imports it and caches the value in the module."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        vars(sys.modules[package])[name] = value  # later look-ups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(public))

    return __getattr__, __dir__


__all__ = ["lazy_attributes"]
