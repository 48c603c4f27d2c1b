"""A table model saved as a combination, in the graph: the MoE's outputs mixed with its
scikit-learn members' (`sgem.export.member_parts`) by the saved weights, as
`sgem.moe.combination.Combination` mixes them in `predict_proba` / `predict` /
`predict_quantiles`: a classifier's probabilities (the MoE's raw softmax and each member's),
a regression's mixture of the MoE's Student-t and each member's Normal (its quantiles by
`sgem.export.mixture_parts`; its point the mixture's mean or median, as saved)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..baselines.naive import NORMAL_DF
from ..moe.combination import Combination
from .graph_parts import _const
from .member_parts import MemberLocation, MemberProbabilities
from .mixture_parts import MixtureQuantiles


class MixedProbabilities(nn.Module):
    """`Combination.proba`: (n, C) float64 from the MoE's logits and the model inputs."""

    def __init__(self, mix: Combination, n_classes: int) -> None:
        super().__init__()
        self.members = nn.ModuleList(MemberProbabilities(m, n_classes) for m in mix.members)
        self.register_buffer("weights", _const(mix.weights))

    def forward(self, moe_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        mixed = self.weights[0] * torch.softmax(moe_out.double(), dim=1)
        for w, member in zip(self.weights[1:], self.members, strict=True):
            mixed = mixed + w * member(x)
        return mixed


class MixedRegression(nn.Module):
    """`Combination.quantiles` (Q, n) and `Combination.point_prediction` (n,), in model
    units, from the MoE's (n, 1, 3) Student-t and the model inputs."""

    def __init__(self, mix: Combination, quantiles: Sequence[float]) -> None:
        super().__init__()
        self.members = nn.ModuleList(MemberLocation(m) for m in mix.members)
        self.register_buffer("scales", _const(mix.scales))
        self.register_buffer("weights", _const(mix.weights))
        qs = sorted(float(q) for q in quantiles)
        self.spread = float(mix.interval_scale)
        self.binned = mix.width_factors is not None  # (a factor per bin of the point)
        if mix.width_edges is not None and mix.width_factors is not None:
            self.register_buffer("edges", _const(mix.width_edges))
            self.register_buffer("factors", _const(mix.width_factors))
        # the median is found beside the quantiles where it is the point or the width
        # factors move them about it (one bisection of the mixture's CDF for both)
        self.moved = self.spread != 1.0 or self.binned
        self.median_point = mix.point == "median"
        levels = sorted({*qs, 0.5}) if self.moved or self.median_point else qs
        self.at_median = levels.index(0.5) if 0.5 in levels else -1
        self.chosen = [levels.index(q) for q in qs]
        self.mixture = MixtureQuantiles(levels, mix.weights)

    def forward(self, moe_out: torch.Tensor, x: torch.Tensor):
        o = moe_out.double()
        locs = [o[:, 0, 0], *(member(x) for member in self.members)]
        loc = torch.stack(locs)  # (members, n)
        scale = torch.cat([o[None, :, 0, 1], self.scales[:, None].expand(-1, loc.shape[1])])
        df = torch.cat([o[None, :, 0, 2], torch.full_like(loc[1:], NORMAL_DF)])
        found = self.mixture(loc, scale, df)  # (levels, n)
        median = found[self.at_median]
        if self.median_point:
            point = median
        else:  # `mixture_mean`
            point = (self.weights[:, None] / self.weights.sum() * loc).sum(0)
        if self.moved:  # `Combination.quantiles_of`: distances from the median scaled by the
            # point's bin's factor, or by the one factor
            factor = (
                self.factors[(point.unsqueeze(0) >= self.edges.unsqueeze(1)).long().sum(0)]
                if self.binned
                else self.spread
            )
            return median + factor * (found[self.chosen] - median), point
        return found[self.chosen], point


def combination_part(model, quantiles: Sequence[float]) -> nn.Module | None:
    """The graph's part for `model`'s saved combination (an `SgemModel` of a table), or
    None where it was saved without one."""
    mix = model.combination
    if mix is None:
        return None
    if model.is_classifier:
        return MixedProbabilities(mix, len(model.classes))
    return MixedRegression(mix, quantiles)


__all__ = ["MixedProbabilities", "MixedRegression", "combination_part"]
