"""sgem: structure-aware neural architecture search for Mixture-of-Experts.

SGEM partitions a dataset into clusters, then jointly searches which expert each cluster is
routed to and a cell architecture per expert, with a surrogate-assisted generalised EM.

The public names below are resolved lazily (PEP 562): `import sgem` and `sgem --help` do not
import torch, scikit-learn or scipy; the first use of a name imports its module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_attributes

__version__ = "0.1.0"

#: public name -> the submodule defining it
_LAZY: dict[str, str] = {
    "ClusteredTask": ".data",
    "Split": ".data",
    "build_task": ".data",
    "make_image_task": ".data",
    "make_timeseries_task": ".data",
    "make_toy_task": ".data",
    "read_tsf": ".data",
    "SgemUserError": ".errors",
    "SgemClassifier": ".estimators",
    "SgemRegressor": ".estimators",
    "fit": ".run.fitting",
    "SgemForecaster": ".forecaster",
    "Forecast": ".moe.model",
    "Routing": ".moe.model",
    "SgemModel": ".moe.model",
    "load": ".moe.model",
    "SGEM": ".search",
    "SearchConfig": ".search",
    "SearchResult": ".search",
    "Arch": ".space",
    "CellSpace": ".space",
    "DartsSpace": ".space",
    "TabularSpace": ".space",
    "TimeSeriesSpace": ".space",
    "Surrogate": ".surrogate",
    "SurrogateConfig": ".surrogate",
    "TrainConfig": ".train",
    "Trainer": ".train",
}

if TYPE_CHECKING:  # what static analysers and IDEs see
    from .data import (
        ClusteredTask,
        Split,
        build_task,
        make_image_task,
        make_timeseries_task,
        make_toy_task,
        read_tsf,
    )
    from .errors import SgemUserError
    from .estimators import SgemClassifier, SgemRegressor
    from .forecaster import SgemForecaster
    from .moe.model import Forecast, Routing, SgemModel, load
    from .run.fitting import fit
    from .search import SGEM, SearchConfig, SearchResult
    from .space import Arch, CellSpace, DartsSpace, TabularSpace, TimeSeriesSpace
    from .surrogate import Surrogate, SurrogateConfig
    from .train import TrainConfig, Trainer


__all__ = [
    "SGEM",
    "Arch",
    "CellSpace",
    "ClusteredTask",
    "DartsSpace",
    "Forecast",
    "Routing",
    "SearchConfig",
    "SearchResult",
    "SgemClassifier",
    "SgemForecaster",
    "SgemModel",
    "SgemRegressor",
    "SgemUserError",
    "Split",
    "Surrogate",
    "SurrogateConfig",
    "TabularSpace",
    "TimeSeriesSpace",
    "TrainConfig",
    "Trainer",
    "__version__",
    "build_task",
    "fit",
    "load",
    "make_image_task",
    "make_timeseries_task",
    "make_toy_task",
    "read_tsf",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
