"""The forecasting search space: sequence ops, the cell and the Student-t forecaster skeleton.

A sample is a context window x of length L (already scaled by its own mean |x|, see
`sgem.data.timeseries.make_windows`); the network returns, for each of the H forecast
steps, the parameters of a Student-t predictive distribution: a tensor of shape
(batch, H, 3) holding (loc, scale, df) on the last axis, already constrained
(scale >= min_scale, df > 2). `sgem.train.losses.per_sample_nll(out, y, "student_t")`
reads exactly that.

Skeleton (`TimeSeriesNet`):

1. no standardisation: the windows are scaled per window, so the level is already ~1 and
   a fixed, task-wide standardisation would only shift every window by the same amount.
   `build` accepts `x_mean` / `x_std` for signature compatibility and ignores them;
2. stem: a pointwise conv 1 -> C on the value axis, (B, L) -> (B, C, L);
3. the cell: every op maps (B, C, L) -> (B, C, L); the leaves are averaged (the mean, not
   the sum, so the scale does not depend on how many leaves a cell has);
4. head: one linear map along time, L -> H, shared by all channels (the DLinear-style
   temporal projection), then per forecast step a residual MLP on the C channels and a
   linear map C -> 3 raw parameters: loc = raw0, scale = min_scale + softplus(raw1),
   df = 2 + softplus(raw2) (the GluonTS convention for df; the scale floor is added, not
   clamped, so its gradient never dies).

The ops (C channels; L the context length) and their parameter counts for C = 16:

* `moving_average`: fixed causal box filter of width `ma_kernel` (5) per channel, the
  left edge padded by repeating the first value (so the start is not pulled to 0).
  0 parameters.
* `dilated_conv`: causal Conv1d(C, C, kernel 3, dilation `dilation` (2)), left zero
  padding, then GELU. C*C*3 + C = 784 parameters.
* `gru`: a one-layer GRU over time with hidden size C; the op returns every hidden state.
  3 * (2*C*C + 2*C) = 1632 parameters.
* `patch_attention`: the sequence is cut into patches of `patch_len` (12) steps (8 patches
  for L = 96; the left edge is padded by repetition when L is not a multiple); each patch
  (C * patch_len values) is embedded to C features, a learnable position embedding is
  added, one pre-norm multi-head self-attention layer (`heads` = 2) with a residual runs
  over the patches, and a linear map sends each patch token back to C * patch_len values.
  The attention is not causal: the whole context is in the past. For L = 96:
  3088 (embed) + 128 (positions) + 32 (LayerNorm) + 1088 (attention) + 3264 (back)
  = 7600 parameters.
* `linear_trend`: the least-squares line a_c + b_c t fitted to each channel over the
  window (the projection onto span{1, t}: a fixed L x L matrix), i.e. the trend
  component of a trend/remainder decomposition. Parameter-free, so it adds an inductive
  bias rather than capacity; the head extrapolates the line. 0 parameters.
* `skip`: identity. 0 parameters.

The stem has 2C = 32 parameters and the head L*H + H + C*C + C + 3C + 3 = 2651 for L = 96,
H = 24, C = 16; `TimeSeriesNet.n_cell_parameters` reports the cell alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .arch import Arch, CellSpace

if TYPE_CHECKING:
    from ..data.task import ClusteredTask

TIMESERIES_OPS = (
    "moving_average",
    "dilated_conv",
    "gru",
    "patch_attention",
    "linear_trend",
    "skip",
)

#: Number of Student-t parameters per forecast step: (loc, scale, df).
N_PARAMS = 3


class MovingAverage(nn.Module):
    """Causal box filter of width `kernel`; the left edge repeats the first value."""

    def __init__(self, kernel: int) -> None:
        super().__init__()
        if kernel < 1:
            raise ValueError(f"moving-average kernel must be >= 1, got {kernel}")
        self.kernel = kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel == 1:
            return x
        k, c = self.kernel, int(x.shape[1])  # int: an ONNX trace needs the conv's shape
        # a fixed depthwise conv: much faster on CPU than avg_pool1d / replicate padding
        padded = torch.cat([x[..., :1].expand(-1, -1, k - 1), x], dim=-1)
        weight = x.new_full((c, 1, k), 1.0 / k)
        return F.conv1d(padded, weight, groups=c)


class DilatedCausalConv(nn.Module):
    """Conv1d(C, C, kernel, dilation) with left zero padding (output t sees <= t), GELU."""

    def __init__(self, channels: int, kernel: int = 3, dilation: int = 2) -> None:
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv = nn.Conv1d(channels, channels, kernel, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.conv(F.pad(x, (self.pad, 0))))


class GRUOp(nn.Module):
    """One-layer GRU over time (hidden = channels); returns every hidden state."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.gru = nn.GRU(channels, channels, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x.transpose(1, 2))
        return out.transpose(1, 2)


class PatchAttention(nn.Module):
    """Self-attention over patches of `patch_len` steps, projected back to the sequence."""

    def __init__(self, channels: int, length: int, patch_len: int, heads: int) -> None:
        super().__init__()
        if patch_len < 1:
            raise ValueError(f"patch_len must be >= 1, got {patch_len}")
        if channels % heads:
            raise ValueError(f"channels ({channels}) must be a multiple of heads ({heads})")
        self.channels, self.length, self.patch_len = channels, length, patch_len
        self.n_patches = -(-length // patch_len)
        self.pad = self.n_patches * patch_len - length
        self.embed = nn.Linear(channels * patch_len, channels)
        self.position = nn.Parameter(0.02 * torch.randn(self.n_patches, channels))
        self.norm = nn.LayerNorm(channels)
        self.attn = nn.MultiheadAttention(channels, heads, batch_first=True)
        self.back = nn.Linear(channels, channels * patch_len)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, length = x.shape
        if length != self.length:
            raise ValueError(f"patch_attention was built for length {self.length}, got {length}")
        if self.pad:
            x = torch.cat([x[..., :1].expand(-1, -1, self.pad), x], dim=-1)
        p, n = self.patch_len, self.n_patches
        # (B, C, n*p) -> (B, n, C*p): one token per patch, all channels of the patch
        patches = x.reshape(b, c, n, p).permute(0, 2, 1, 3).reshape(b, n, c * p)
        tokens = self.embed(patches) + self.position
        q = self.norm(tokens)
        tokens = tokens + self.attn(q, q, q, need_weights=False)[0]
        out = self.back(tokens).reshape(b, n, c, p).permute(0, 2, 1, 3).reshape(b, c, n * p)
        return out[..., self.pad :]


class LinearTrend(nn.Module):
    """Per channel, the least-squares line over the window (projection onto span{1, t})."""

    def __init__(self, length: int) -> None:
        super().__init__()
        if length < 2:
            raise ValueError(f"linear_trend needs a context of >= 2 steps, got {length}")
        t = torch.linspace(-1.0, 1.0, length, dtype=torch.float64)
        basis = torch.stack([torch.ones_like(t), t], dim=1)  # (L, 2), orthogonal columns
        basis = basis / basis.norm(dim=0)  # orthonormal: the projection is basis @ basis.T
        self.register_buffer("basis", basis.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (x B) B^T costs O(L) per channel, the explicit L x L projection O(L^2)
        return (x @ self.basis) @ self.basis.T


def make_op(
    name: str,
    channels: int,
    length: int,
    ma_kernel: int = 5,
    dilation: int = 2,
    patch_len: int = 12,
    heads: int = 2,
) -> nn.Module:
    """Build one op mapping (B, channels, length) -> (B, channels, length)."""
    if name == "moving_average":
        return MovingAverage(ma_kernel)
    if name == "dilated_conv":
        return DilatedCausalConv(channels, 3, dilation)
    if name == "gru":
        return GRUOp(channels)
    if name == "patch_attention":
        return PatchAttention(channels, length, patch_len, heads)
    if name == "linear_trend":
        return LinearTrend(length)
    if name == "skip":
        return nn.Identity()
    raise ValueError(f"unknown op {name!r}; time-series ops are {list(TIMESERIES_OPS)}")


class SequenceCell(nn.Module):
    """The cell DAG on (B, C, L) states; the output is the mean of the leaves."""

    def __init__(self, arch: Arch, channels: int, length: int, **op_kwargs) -> None:
        super().__init__()
        self.arch = arch
        self.ops = nn.ModuleList(make_op(op, channels, length, **op_kwargs) for op in arch.ops)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        states = [x]
        for op, src in zip(self.ops, self.arch.inputs, strict=True):
            states.append(op(states[src]))
        leaves = [states[leaf + 1] for leaf in self.arch.leaves]
        return leaves[0] if len(leaves) == 1 else torch.stack(leaves).mean(0)


class StudentTHead(nn.Module):
    """(B, C, L) -> (B, H, 3) constrained Student-t parameters (loc, scale, df)."""

    def __init__(self, channels: int, length: int, horizon: int, min_scale: float) -> None:
        super().__init__()
        self.min_scale = min_scale
        self.time = nn.Linear(length, horizon)
        self.mix = nn.Linear(channels, channels)
        self.out = nn.Linear(channels, N_PARAMS)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.time(z).transpose(1, 2)  # (B, H, C)
        h = h + F.gelu(self.mix(h))
        raw = self.out(h)
        loc = raw[..., 0]
        scale = self.min_scale + F.softplus(raw[..., 1])
        df = 2.0 + F.softplus(raw[..., 2])
        return torch.stack([loc, scale, df], dim=-1)


class TimeSeriesNet(nn.Module):
    """Stem (pointwise 1 -> C) -> cell -> Student-t head; input (B, L), output (B, H, 3)."""

    def __init__(
        self,
        arch: Arch,
        context: int,
        horizon: int,
        channels: int,
        min_scale: float = 1e-3,
        **op_kwargs,
    ) -> None:
        super().__init__()
        self.context, self.horizon = context, horizon
        self.stem = nn.Conv1d(1, channels, 1)
        self.cell = SequenceCell(arch, channels, context, **op_kwargs)
        self.head = StudentTHead(channels, context, horizon, min_scale)

    @property
    def n_cell_parameters(self) -> int:
        return sum(p.numel() for p in self.cell.parameters())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], -1)  # shape[0]: a traced export keeps n free
        if x.shape[1] != self.context:
            raise ValueError(f"expected context windows of {self.context} steps, got {x.shape}")
        return self.head(self.cell(self.stem(x.unsqueeze(1))))


class TimeSeriesSpace(CellSpace):
    """Cells over context windows, with a per-step Student-t forecasting head.

    `build(arch, in_dim, n_out, x_mean, x_std)` has the tabular signature: `in_dim` is the
    context length and `n_out` = 3 * horizon (`output_size(task)` computes it from a
    task; the Trainer asks the space for it). `x_mean` and `x_std` are ignored (the
    windows are scaled per window; see the module docstring).
    """

    def __init__(
        self,
        op_names: Sequence[str] = TIMESERIES_OPS,
        n_nodes: int = 3,
        channels: int = 16,
        ma_kernel: int = 5,
        dilation: int = 2,
        patch_len: int = 12,
        heads: int = 2,
        min_scale: float = 1e-3,
    ) -> None:
        unknown = [op for op in op_names if op not in TIMESERIES_OPS]
        if unknown:
            raise ValueError(f"unknown op(s) {unknown}; time-series ops are {list(TIMESERIES_OPS)}")
        if channels < 1 or channels % heads:
            raise ValueError(
                f"channels ({channels}) must be >= 1 and a multiple of heads ({heads})"
            )
        if min_scale <= 0:
            raise ValueError(f"min_scale must be > 0, got {min_scale}")
        super().__init__(op_names, n_nodes)
        self.channels = channels
        self.ma_kernel = ma_kernel
        self.dilation = dilation
        self.patch_len = patch_len
        self.heads = heads
        self.min_scale = min_scale

    @staticmethod
    def output_size(task: ClusteredTask) -> int:
        """3 * horizon: (loc, scale, df) for every forecast step of the task's targets."""
        if task.train.y.ndim != 2:
            raise ValueError(
                f"a forecasting task has targets of shape (n, horizon), got {task.train.y.shape}"
            )
        return N_PARAMS * int(task.train.y.shape[1])

    def build(
        self,
        arch: Arch,
        in_dim: int,
        n_out: int,
        x_mean: np.ndarray | None = None,
        x_std: np.ndarray | None = None,
    ) -> TimeSeriesNet:
        self.validate(arch)
        if n_out < N_PARAMS or n_out % N_PARAMS:
            raise ValueError(
                f"n_out must be 3 * horizon (loc, scale, df per step), got {n_out}; a Trainer "
                "sets it from TimeSeriesSpace.output_size(task)"
            )
        return TimeSeriesNet(
            arch,
            int(in_dim),
            n_out // N_PARAMS,
            self.channels,
            self.min_scale,
            ma_kernel=self.ma_kernel,
            dilation=self.dilation,
            patch_len=self.patch_len,
            heads=self.heads,
        )
