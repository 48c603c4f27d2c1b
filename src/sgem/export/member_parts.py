"""A table's saved scikit-learn members as tensor ops, so that a combination's mixed
probabilities (`sgem.moe.combination.Combination.proba`) or its mixture's quantiles
(`sgem.export.mixture_parts`) trace into the same ONNX graph as the MoE.

Each module mirrors `sgem.moe.portable.PortableModel` on the checked arrays, in float64: a
classifier's `predict_proba` followed by what `Combination.member_outputs` does to it (each
class's probability at least 1e-12, renormalised, placed at its class's code), a
regression's `predict` (the location of its Normal). Gradient boosting's trees are walked
all at once, one level per step, for as many steps as the deepest tree has levels (a row at
a leaf stays there): a static graph of a few ops per level.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..moe.classical import ClassicalMember
from ..moe.portable import PortableModel
from .graph_parts import _const

#: the least probability `Combination.member_outputs` gives a member's class
MEMBER_FLOOR = 1e-12


def tree_depth(arrays: dict[str, np.ndarray]) -> int:
    """The most levels any tree of checked `arrays` has below its root (children come
    after their parent, so one pass in node order sets every depth)."""
    depth = np.zeros(len(arrays["is_leaf"]), dtype=np.int64)
    for node in np.flatnonzero(arrays["is_leaf"] == 0):
        for child in (arrays["left_global"][node], arrays["right_global"][node]):
            depth[child] = depth[node] + 1
    return int(depth.max(initial=0))


class MemberDecision(nn.Module):
    """One member's raw scores (`PortableModel.decision`), (n, k), float64."""

    def __init__(self, member: PortableModel | ClassicalMember) -> None:
        super().__init__()
        if not isinstance(member, PortableModel):
            raise TypeError("a table's combination has scikit-learn members only")
        a, state = member.arrays, member.state
        self.kind = member.kind
        if self.kind in ("logistic", "ridge"):
            self.register_buffer("coef_t", _const(a["coef"].T))
            self.register_buffer("intercept", _const(a["intercept"]))
            return
        self.levels = tree_depth(a)
        self.k, self.n_iterations = state["n_trees_per_iteration"], state["n_iterations"]
        self.register_buffer("roots", _const(a["tree_offsets"][:-1], torch.long))
        self.register_buffer("feature", _const(a["feature_safe"], torch.long))
        self.register_buffer("threshold", _const(a["num_threshold"]))
        self.register_buffer("missing_left", _const(a["missing_go_to_left"] == 1, torch.bool))
        self.register_buffer("is_leaf", _const(a["is_leaf"] == 1, torch.bool))
        self.register_buffer("left", _const(a["left_global"], torch.long))
        self.register_buffer("right", _const(a["right_global"], torch.long))
        self.register_buffer("value", _const(a["value"]))
        self.register_buffer("baseline", _const(state["baseline"]))

    def decision(self, x: torch.Tensor) -> torch.Tensor:
        """(n, k) raw scores (k = 1 for a binary classifier or a regression)."""
        if self.kind in ("logistic", "ridge"):
            return x @ self.coef_t + self.intercept
        node = self.roots.expand(x.shape[0], -1)  # (n, trees)
        for _ in range(self.levels):
            v = torch.gather(x, 1, self.feature[node])
            # (NaN <= t is false; onnxruntime has no boolean Where)
            go_left = (v <= self.threshold[node]) | (torch.isnan(v) & self.missing_left[node])
            step = torch.where(go_left, self.left[node], self.right[node])
            node = torch.where(self.is_leaf[node], node, step)
        leaves = self.value[node].reshape(x.shape[0], self.n_iterations, self.k)
        return self.baseline + leaves.sum(1)


class MemberProbabilities(MemberDecision):
    """One classifier member's probabilities (n, C) over the model's C classes, float64."""

    def __init__(self, member: PortableModel | ClassicalMember, n_classes: int) -> None:
        super().__init__(member)
        assert isinstance(member, PortableModel)
        self.ovr = member.state.get("multiclass") == "ovr"
        place = np.zeros((len(member.classes or []), n_classes))  # its class j -> code
        place[np.arange(len(place)), np.asarray(member.classes, dtype=int)] = 1.0
        self.register_buffer("place", _const(place))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.decision(x)
        if d.shape[1] == 1:  # binary: the positive class's sigmoid
            p1 = torch.sigmoid(d[:, 0])
            p = torch.stack([1.0 - p1, p1], dim=1)
        elif self.ovr:
            s = torch.sigmoid(d)
            total = s.sum(1, keepdim=True)
            p = torch.where(total == 0, 1.0 / s.shape[1], s / torch.where(total == 0, 1.0, total))
        else:
            p = torch.softmax(d, dim=1)
        full = MEMBER_FLOOR + (torch.clamp(p, min=MEMBER_FLOOR) - MEMBER_FLOOR) @ self.place
        return full / full.sum(1, keepdim=True)


class MemberLocation(MemberDecision):
    """One regression member's prediction (n,), float64: its Normal's location."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decision(x)[:, 0]


__all__ = ["MEMBER_FLOOR", "MemberDecision", "MemberLocation", "MemberProbabilities", "tree_depth"]
