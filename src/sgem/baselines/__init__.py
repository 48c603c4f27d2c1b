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


def register_baseline(name: str, factory: Callable[[], Baseline]) -> None:
    """Make `factory()` available as `get_baseline(name)`. Names are unique."""
    if name in _REGISTRY and _REGISTRY[name] is not factory:
        raise ValueError(f"a baseline named {name!r} is already registered")
    _REGISTRY[name] = factory


for _cls in (
    Naive,
    SeasonalNaive,
    DLinear,
    GlobalSingle,
    RandomMoE,
    GeometryRouting,
    BestArchTimesK,
    NASMoE,
    MoLE,
    OracleSpecialists,
):
    register_baseline(_cls.name, _cls)


def _discover() -> None:
    """Import every module of the package once, so that they can register themselves."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


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
