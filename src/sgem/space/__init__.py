"""Search spaces: the cell DAG (`Arch`) and the modality-specific ops and skeletons."""

from .arch import Arch, CellSpace
from .tabular import TABULAR_OPS, TabularSpace

__all__ = ["TABULAR_OPS", "Arch", "CellSpace", "TabularSpace"]
