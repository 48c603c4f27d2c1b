"""The comparison methods of the paper's benchmarks, one module each, one interface.

Every baseline is a method of `sgem.methods`: a `name`, a `uses_domain_labels` flag and
`fit_evaluate(task, budget) -> MethodResult` (`sgem.methods.MethodBudget`).
Only the oracle uses domain labels. Look one up with `get_baseline(name)`; list them with
`available()`.

Extending: a new module in this package registers its method with
`register_baseline(name, factory)` at import time; every module of the package is imported
the first time the registry is read, so a new file (say `darts.py`) needs no edit here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..lazy import lazy_attributes

#: public name -> the submodule defining it (resolved lazily, `sgem.lazy`: the processes
#: refitting AutoETS / AutoTheta import `statistical` and `seasonal_naive` alone, and the
#: rest of the package costs them torch, about 2 s each)
_LAZY: dict[str, str] = {
    "Baseline": ".base",
    "CandidateLog": ".base",
    "best_single_architecture": ".base",
    "random_partition": ".base",
    "recovery": ".base",
    "search_region": ".base",
    "BestArchTimesK": ".bestarch",
    "DLinear": ".dlinear",
    "DLinearT": ".dlinear",
    "GeometryRouting": ".geometry",
    "geometry_partition": ".geometry",
    "GlobalSingle": ".global_single",
    "MixtureOfLinearExperts": ".mole",
    "MoLE": ".mole",
    "Naive": ".naive",
    "NASMoE": ".nas_moe",
    "OracleSpecialists": ".oracle",
    "RandomMoE": ".random_moe",
    "SeasonalNaive": ".seasonal_naive",
}

if TYPE_CHECKING:  # what static analysers and IDEs see
    from .base import (
        Baseline,
        CandidateLog,
        best_single_architecture,
        random_partition,
        recovery,
        search_region,
    )
    from .bestarch import BestArchTimesK
    from .dlinear import DLinear, DLinearT
    from .geometry import GeometryRouting, geometry_partition
    from .global_single import GlobalSingle
    from .mole import MixtureOfLinearExperts, MoLE
    from .naive import Naive
    from .nas_moe import NASMoE
    from .oracle import OracleSpecialists
    from .random_moe import RandomMoE
    from .seasonal_naive import SeasonalNaive

_REGISTRY: dict[str, Callable[[], Baseline]] = {}
_discovered = False
#: the paper's baselines, registered (in this order) the first time the registry is read
_BUILT_IN = (
    "Naive",
    "SeasonalNaive",
    "DLinear",
    "GlobalSingle",
    "RandomMoE",
    "GeometryRouting",
    "BestArchTimesK",
    "NASMoE",
    "MoLE",
    "OracleSpecialists",
)


def register_baseline(name: str, factory: Callable[[], Baseline]) -> None:
    """Make `factory()` available as `get_baseline(name)`. Names are unique."""
    if name in _REGISTRY and _REGISTRY[name] is not factory:
        raise ValueError(f"a baseline named {name!r} is already registered")
    _REGISTRY[name] = factory


def _discover() -> None:
    """Import every module of the package once, so that they can register themselves."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    built_in = [__getattr__(name) for name in _BUILT_IN]
    for cls in built_in:
        register_baseline(cls.name, cls)
    modules = [f"{__name__}.{info.name}" for info in pkgutil.iter_modules(__path__)]
    for module in modules:
        importlib.import_module(module)
    # one order whatever was imported first: the built-ins, then by module (a module
    # imported before discovery, as the AutoETS / AutoTheta refits import theirs, registered
    # its methods then)
    order = [cls.name for cls in built_in]

    def place(item: tuple[str, Callable[[], Baseline]]) -> tuple[int, int]:
        name, factory = item
        if name in order:
            return (0, order.index(name))
        where = getattr(factory, "__module__", "")
        return (1, modules.index(where) if where in modules else len(modules))

    ordered = sorted(_REGISTRY.items(), key=place)
    _REGISTRY.clear()
    _REGISTRY.update(ordered)


def available() -> list[str]:
    """Registered baseline names, in registration order."""
    _discover()
    return list(_REGISTRY)


def get_baseline(name: str) -> Baseline:
    """A fresh instance of the baseline registered as `name`."""
    _discover()
    if name not in _REGISTRY:
        raise ValueError(f"unknown baseline {name!r}; available: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]()


__all__ = [
    "Baseline",
    "BestArchTimesK",
    "CandidateLog",
    "DLinear",
    "DLinearT",
    "GeometryRouting",
    "GlobalSingle",
    "MixtureOfLinearExperts",
    "MoLE",
    "NASMoE",
    "Naive",
    "OracleSpecialists",
    "RandomMoE",
    "SeasonalNaive",
    "available",
    "best_single_architecture",
    "geometry_partition",
    "get_baseline",
    "random_partition",
    "recovery",
    "register_baseline",
    "search_region",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
