"""Search spaces: the cell DAG (`Arch`) and the modality-specific ops and skeletons."""

from .arch import Arch, CellSpace
from .darts import DARTS_OPS, DartsNet, DartsSpace
from .tabular import TABULAR_OPS, TabularSpace
from .timeseries import TIMESERIES_OPS, TimeSeriesSpace

__all__ = [
    "DARTS_OPS",
    "TABULAR_OPS",
    "TIMESERIES_OPS",
    "Arch",
    "CellSpace",
    "DartsNet",
    "DartsSpace",
    "TabularSpace",
    "TimeSeriesSpace",
]
