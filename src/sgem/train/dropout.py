"""Dropout from 16 random bits per element: the same distribution at a third of the cost.

Why: on CPU `torch.nn.functional.dropout` draws one 32-bit Mersenne-Twister number per
element through a scalar path (~3.5 ns each); in a toy search (tiny networks, full-batch
steps, MC-dropout passes of the surrogate) that was a fifth of all compute. Here one 64-bit
draw feeds four elements, and an element is dropped when its 16 bits fall below p * 2^16:
the drop probability is p rounded to a multiple of 2^-16 (|error| <= 7.7e-6).

The draws come from `generator` (or torch's default one), so runs are reproducible from a
seed and chunks that train side by side in threads each use their own stream.
"""

from __future__ import annotations

import math

import torch
from torch import nn

_INT64_LOW, _INT64_HIGH = -(2**63), 2**63 - 1


def keep_scale(
    shape: torch.Size | tuple[int, ...],
    p: float,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """A tensor of `shape`: 1 / (1 - p) where an element is kept, 0 where it is dropped."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    n = math.prod(shape)
    words = torch.randint(
        _INT64_LOW,
        _INT64_HIGH,
        ((n + 3) // 4,),
        dtype=torch.int64,
        generator=generator,
        device=device,
    )
    bits = words.view(torch.int16)[:n].view(shape)
    threshold = round(p * 65536) - 32768  # int16 values below it (a share p) are dropped
    return (bits >= threshold).to(dtype) * (1.0 / (1.0 - p))


def dropout(
    x: torch.Tensor, p: float, training: bool = True, generator: torch.Generator | None = None
) -> torch.Tensor:
    """`F.dropout(x, p, training)` with the cheaper mask (gradients flow through x only)."""
    if not training or p == 0.0:
        return x
    return x * keep_scale(x.shape, p, generator, x.device, x.dtype)


class Dropout(nn.Module):
    """`nn.Dropout` with the cheaper mask; draws from `generator` when one is set, else from
    torch's default generator (so `torch.manual_seed` makes it reproducible as it does
    `nn.Dropout`). No parameters or buffers: a state dict saved with `nn.Dropout` loads
    unchanged."""

    def __init__(self, p: float = 0.5, generator: torch.Generator | None = None) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p
        self.generator = generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training, self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}"


__all__ = ["Dropout", "dropout", "keep_scale"]
