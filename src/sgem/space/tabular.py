"""The tabular / 2-D search space: ops, the cell module and the skeleton (a classifier, or
a Student-t regressor with `head="student_t"`).

Width rule: `linear` maps its input to `hidden` features, `rbf` to `rbf_centres` radial
features (one by default, the paper's exp(-gamma ||x - c||^2)); every other op keeps its
input's width. The leaves are concatenated, so a cell may mix widths freely, and a linear
head maps the concatenation to the classes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .arch import Arch, CellSpace

TABULAR_OPS = ("linear", "rbf", "identity", "square", "shift", "relu", "dropout")


def squared_distances(x: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """||x_i - c_j||^2 summed explicitly (exact, and identical in batched training)."""
    return (x.unsqueeze(-2) - centres.unsqueeze(-3)).pow(2).sum(-1)


class RBF(nn.Module):
    """exp(-gamma_h * ||x - c_h||^2) for `width` learnable centres c_h and gamma_h > 0.

    Centres start near the mean of the data the op sees and gamma at 1 / median squared
    distance (`data_init`): a radial feature around the centre of the data, which is what
    separates concentric structure. Without a data-dependent start the units sit saturated
    at 0 wherever the data is not near the origin.
    """

    def __init__(self, in_dim: int, width: int) -> None:
        super().__init__()
        self.centres = nn.Parameter(torch.randn(width, in_dim))
        self.log_gamma = nn.Parameter(torch.zeros(width))

    def data_init(self, x: torch.Tensor, generator: torch.Generator) -> None:
        with torch.no_grad():
            # drawn on the generator's (CPU) device: the same centres wherever x lives
            noise = torch.randn(self.centres.shape, generator=generator, dtype=x.dtype)
            noise = noise.to(x.device)
            # (one row - a cluster of a tiny table: no spread, not the NaN of its std)
            spread = x.std(0) if len(x) > 1 else torch.zeros_like(x[0])
            self.centres.copy_(x.mean(0) + 0.1 * spread * noise)
            d2 = squared_distances(x, self.centres)
            scale = d2.median().clamp_min(1e-3)
            self.log_gamma.fill_(float(torch.log(1.0 / scale)))

    @property
    def gamma(self) -> torch.Tensor:
        return self.log_gamma.exp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(-self.gamma * squared_distances(x, self.centres))


class Shift(nn.Module):
    """x + s with a learnable shift s (per feature)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.shift = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.shift


class Square(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x


def make_op(
    name: str, in_dim: int, hidden: int, dropout: float, rbf_centres: int = 1
) -> tuple[nn.Module, int]:
    """Build one op; returns (module, output width)."""
    if name == "linear":
        return nn.Linear(in_dim, hidden, bias=False), hidden
    if name == "rbf":
        return RBF(in_dim, rbf_centres), rbf_centres
    if name == "identity":
        return nn.Identity(), in_dim
    if name == "square":
        return Square(), in_dim
    if name == "shift":
        return Shift(in_dim), in_dim
    if name == "relu":
        return nn.ReLU(), in_dim
    if name == "dropout":
        return nn.Dropout(dropout), in_dim
    raise ValueError(f"unknown op {name!r}; tabular ops are {list(TABULAR_OPS)}")


class Cell(nn.Module):
    def __init__(
        self, arch: Arch, in_dim: int, hidden: int, dropout: float, rbf_centres: int = 1
    ) -> None:
        super().__init__()
        self.arch = arch
        widths = [in_dim]
        ops = []
        for op, src in zip(arch.ops, arch.inputs, strict=True):
            module, width = make_op(op, widths[src], hidden, dropout, rbf_centres)
            ops.append(module)
            widths.append(width)
        self.ops = nn.ModuleList(ops)
        self.out_dim = sum(widths[leaf + 1] for leaf in arch.leaves)

    def _states(self, x: torch.Tensor, init_generator: torch.Generator | None = None):
        states = [x]
        for op, src in zip(self.ops, self.arch.inputs, strict=True):
            if init_generator is not None and hasattr(op, "data_init"):
                op.data_init(states[src], init_generator)
            states.append(op(states[src]))
        return states

    def data_init(self, x: torch.Tensor, generator: torch.Generator) -> None:
        with torch.no_grad():
            self._states(x, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        states = self._states(x)
        return torch.cat([states[leaf + 1] for leaf in self.arch.leaves], dim=-1)


HEADS = ("classifier", "student_t")


def student_t_params(raw: torch.Tensor, min_scale: float = 1e-3) -> torch.Tensor:
    """(B, 3H) unconstrained -> (B, H, 3) Student-t (loc, scale > 0, df > 2), as GluonTS."""
    raw = raw.reshape(raw.shape[0], -1, 3)  # shape[0]: a traced export keeps n free
    scale = min_scale + torch.nn.functional.softplus(raw[..., 1])
    df = 2.0 + torch.nn.functional.softplus(raw[..., 2])
    return torch.stack([raw[..., 0], scale, df], dim=-1)


#: how a network standardises its inputs: "global" with the whole training split's
#: statistics (every candidate sees one input geometry: the paper's toy), "region" with
#: those of the rows it is trained on (`TabularNet.data_init`)
FRAMES = ("global", "region")
#: a region's scale is at least this share of the whole split's (a region of near-equal rows
#: must not blow its neighbours' inputs up)
REGION_SCALE_FLOOR = 0.1


class TabularNet(nn.Module):
    """Fixed standardisation -> cell -> linear head. One scale for all features, so
    distances (and radial ops) keep their geometry.

    `frame="global"`: the whole training split's statistics, so all candidates see the same
    input geometry. `frame="region"`: centred and scaled on the rows the network is trained
    on, set once at `data_init`. Why: an expert owns a region of the input space, and a
    ring or an XOR around the region's centre is a product or a square of centred
    coordinates - in the whole table's frame it needs a learned shift first, which 150
    steps rarely find (on a CSV of linear / ring / XOR clouds the best of 24 random cells
    reached a holdout NLL of 0.65 / 0.62 on the ring / XOR rows in the global frame, 0.17 /
    0.09 in the region's). The statistics are buffers, saved with the weights."""

    def __init__(
        self,
        arch: Arch,
        in_dim: int,
        n_out: int,
        hidden: int,
        dropout: float,
        x_mean: np.ndarray,
        x_std: np.ndarray,
        rbf_centres: int = 1,
        head: str = "classifier",
        frame: str = "global",
    ) -> None:
        super().__init__()
        self.student_t = head == "student_t"
        self.region_frame = frame == "region"
        # copies (as_tensor would share the caller's array, which a region frame overwrites)
        self.register_buffer("x_mean", torch.tensor(x_mean, dtype=torch.float32))
        self.register_buffer("x_std", torch.tensor(x_std, dtype=torch.float32))
        self.cell = Cell(arch, in_dim, hidden, dropout, rbf_centres)
        self.head = nn.Linear(self.cell.out_dim, n_out)

    def standardise(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.x_mean) / self.x_std

    def data_init(self, x: torch.Tensor, generator: torch.Generator) -> None:
        if self.region_frame and len(x) > 1:
            self._frame_on(x)
        self.cell.data_init(self.standardise(x), generator)

    @torch.no_grad()
    def _frame_on(self, x: torch.Tensor) -> None:
        """Centre and scale on `x` (its one scale: the mean feature's std, at least
        `REGION_SCALE_FLOOR` of the whole split's)."""
        flat = x.reshape(len(x), -1).to(self.x_mean.dtype)
        scale = flat.std(0).mean().clamp_min(REGION_SCALE_FLOOR * float(self.x_std.mean()))
        self.x_mean.copy_(flat.mean(0))
        self.x_std.fill_(float(scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.head(self.cell(self.standardise(x)))
        return student_t_params(out) if self.student_t else out


class TabularSpace(CellSpace):
    """Cells over 2-D / tabular inputs with a linear classifier head."""

    def __init__(
        self,
        op_names: Sequence[str] = TABULAR_OPS,
        n_nodes: int = 3,
        hidden: int = 8,
        dropout: float = 0.2,
        rbf_centres: int = 1,
        head: str = "classifier",
        frame: str = "global",
    ) -> None:
        unknown = [op for op in op_names if op not in TABULAR_OPS]
        if unknown:
            raise ValueError(f"unknown op(s) {unknown}; tabular ops are {list(TABULAR_OPS)}")
        if head not in HEADS:
            raise ValueError(f"head must be one of {list(HEADS)}, got {head!r}")
        if frame not in FRAMES:
            raise ValueError(f"frame must be one of {list(FRAMES)}, got {frame!r}")
        super().__init__(op_names, n_nodes)
        self.hidden = hidden
        self.dropout = dropout
        self.rbf_centres = rbf_centres
        self.head = head
        self.frame = frame

    def output_size(self, task) -> int:
        """Classes for a classifier; 3 per target column (loc, scale, df) for Student-t."""
        if self.head == "student_t":
            if task.train.y.ndim != 2:
                raise ValueError(
                    "a Student-t tabular head needs targets of shape (n, outputs), got "
                    f"{task.train.y.shape}"
                )
            return 3 * int(task.train.y.shape[1])
        if task.loss != "cross_entropy":
            raise ValueError(
                f"a classifier head cannot fit loss {task.loss!r}: its output_size is the "
                "number of classes. Use TabularSpace(head='student_t') for regression targets."
            )
        return int(task.n_classes)

    def build(
        self, arch: Arch, in_dim: int, n_out: int, x_mean: np.ndarray, x_std: np.ndarray
    ) -> TabularNet:
        self.validate(arch)
        return TabularNet(
            arch,
            in_dim,
            n_out,
            self.hidden,
            self.dropout,
            x_mean,
            x_std,
            self.rbf_centres,
            self.head,
            self.frame,
        )
