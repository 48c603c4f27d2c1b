"""The scalar reduction of the surrogate (paper eq. scalar_u), for the ablation.

`ScalarReduced` wraps a fitted `Surrogate` and replaces every per-cluster prediction by the
validation-size-weighted average over the clusters in the training mask, so that u no
longer depends on the evaluation cluster. It exposes the same prediction interface, so the
search runs unchanged on top of it. With it the routing collapses onto one expert unless a
load-balancing penalty is added (paper appendix "The scalar surrogate and load balancing").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..space.arch import Arch
from .model import Surrogate


class ScalarReduced:
    def __init__(self, base: Surrogate, val_sizes: np.ndarray) -> None:
        self.base = base
        self.val_sizes = torch.as_tensor(np.asarray(val_sizes, dtype=np.float64))

    @property
    def net(self):
        return self.base.net

    @property
    def clip_value_(self) -> float | None:
        return self.base.clip_value_

    def graphs(self, archs: Sequence[Arch]):
        return self.base.graphs(archs)

    def _reduce(self, pred: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        w = masks * self.val_sizes
        total = w.sum(-1, keepdim=True)
        uniform = torch.ones_like(w) * self.val_sizes
        w = torch.where(total > 0, w, uniform)
        scalar = (pred * w).sum(-1, keepdim=True) / w.sum(-1, keepdim=True)
        return scalar.expand_as(pred)

    def forward(self, adj: torch.Tensor, feats: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        return self._reduce(self.base.forward(adj, feats, masks), masks)

    def predict(self, archs: Sequence[Arch], masks: np.ndarray) -> np.ndarray:
        pred = torch.as_tensor(self.base.predict(archs, masks))
        return self._reduce(pred, torch.as_tensor(np.asarray(masks, np.float64))).numpy()

    def predict_mc(
        self, archs: Sequence[Arch], masks: np.ndarray, seed: int, n_samples: int | None = None
    ) -> np.ndarray:
        pred = torch.as_tensor(self.base.predict_mc(archs, masks, seed, n_samples))
        return self._reduce(pred, torch.as_tensor(np.asarray(masks, np.float64))).numpy()
