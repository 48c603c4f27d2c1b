"""sgem: structure-aware neural architecture search for Mixture-of-Experts.

SGEM partitions a dataset into clusters, then jointly searches which expert each cluster is
routed to and a cell architecture per expert, with a surrogate-assisted generalised EM.
"""

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
from .fitting import fit
from .moe.model import Forecast, Routing, SgemModel, load
from .search import SGEM, SearchConfig, SearchResult
from .space import Arch, CellSpace, DartsSpace, TabularSpace, TimeSeriesSpace
from .surrogate import Surrogate, SurrogateConfig
from .train import TrainConfig, Trainer

__version__ = "0.1.0"

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
    "SgemModel",
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
