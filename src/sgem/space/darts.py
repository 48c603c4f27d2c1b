"""The image search space: a DARTS-style CNN cell and the small `CIFAR100Net`-like skeleton.

The DARTS cell (Liu et al., 2019) has B intermediate nodes; node j is the SUM of two ops,
each applied to an earlier state (0 = the cell input, d >= 1 = intermediate node d-1). The
cell output concatenates all B node outputs, then a 1x1 conv and BatchNorm map them back to
the cell's channel count (the paper's "concatenated -> 1x1 conv -> BN").

Representation as an `Arch` (why: the search, the store, the JSON files and the surrogate
all speak `Arch`, so the image space reuses it unchanged). A cell with B DARTS nodes is an
`Arch` with 2B entries: entries 2j and 2j+1 are the two edges of DARTS node j, `ops[i]`
is the edge's op and `inputs[i]` the DARTS state it reads (0 .. j). Because j <= i, every
such genotype is also a valid `Arch`, and its JSON is the plain `{"ops", "inputs"}`
object. Note that `inputs` here count DARTS states (sums of two edges), not single `Arch`
nodes, so `Arch.leaves` is meaningless for this space: the cell concatenates every node.
The two edges of a node commute; `DartsSpace.canonical` orders them so that one network
has one `Arch` (sampling and mutation return canonical genotypes).

With a single cell input, node 0 has only one predecessor, so both its edges read state 0;
later nodes may also take both edges from the same state (two different ops on one input).

Surrogate encoding (`encode`): one graph node per edge op (one-hot op feature), plus an
input node and an output node. An edge op reading state d > 0 receives edges from both ops
of node d-1 (the state is their sum); every op feeds the output node (all nodes are
concatenated). Shapes match the other spaces: (2B + 2, 2B + 2) adjacency and
(2B + 2, |ops| + 2) node features.

Skeleton (`DartsNet`): per-channel input standardisation -> stem (conv 3x3, BN) at C
channels -> normal cell (C) -> fixed reduction (ReLU, conv 3x3 stride 2, BN; C -> 2C) ->
normal cell (2C, same genotype, its own weights) -> global average pooling -> linear head.
`init_channels` C = 16 as in the paper.

Ops, as in DARTS: `skip` (identity), `sep_conv_3x3` / `sep_conv_5x5` (twice ReLU ->
depthwise conv -> pointwise conv -> BN), `max_pool_3x3` (stride 1, padding 1).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import nn

from .arch import Arch, CellSpace

DARTS_OPS = ("skip", "sep_conv_3x3", "sep_conv_5x5", "max_pool_3x3")


class SepConv(nn.Module):
    """DARTS' separable conv: (ReLU, depthwise k x k, pointwise 1x1, BN) applied twice."""

    def __init__(self, channels: int, kernel: int, affine: bool = True) -> None:
        super().__init__()
        pad = kernel // 2
        layers: list[nn.Module] = []
        for _ in range(2):
            layers += [
                nn.ReLU(inplace=False),
                nn.Conv2d(channels, channels, kernel, padding=pad, groups=channels, bias=False),
                nn.Conv2d(channels, channels, 1, bias=False),
                nn.BatchNorm2d(channels, affine=affine),
            ]
        self.op = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


def make_op(name: str, channels: int, affine: bool = True) -> nn.Module:
    """One op mapping (B, C, H, W) -> (B, C, H, W). `affine=False` is DARTS' supernet BN."""
    if name == "skip":
        return nn.Identity()
    if name == "sep_conv_3x3":
        return SepConv(channels, 3, affine)
    if name == "sep_conv_5x5":
        return SepConv(channels, 5, affine)
    if name == "max_pool_3x3":
        return nn.MaxPool2d(3, stride=1, padding=1)
    raise ValueError(f"unknown op {name!r}; DARTS ops are {list(DARTS_OPS)}")


class ReLUConvBN(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1) -> None:
        super().__init__()
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=False),
            nn.BatchNorm2d(c_out),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


class DartsCell(nn.Module):
    """A normal cell for one genotype: preprocess, B two-edge nodes, concat, 1x1 conv, BN."""

    def __init__(self, arch: Arch, channels: int) -> None:
        super().__init__()
        if arch.n_nodes % 2:
            raise ValueError(f"a DARTS genotype has two edges per node, got {arch.n_nodes} edges")
        self.arch = arch
        self.n_nodes = arch.n_nodes // 2
        self.pre = ReLUConvBN(channels, channels, 1)
        self.ops = nn.ModuleList(make_op(op, channels) for op in arch.ops)
        self.out = nn.Sequential(
            nn.Conv2d(self.n_nodes * channels, channels, 1, bias=False), nn.BatchNorm2d(channels)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        states = [self.pre(x)]
        inputs = self.arch.inputs
        for j in range(self.n_nodes):
            a, b = 2 * j, 2 * j + 1
            states.append(self.ops[a](states[inputs[a]]) + self.ops[b](states[inputs[b]]))
        return self.out(torch.cat(states[1:], dim=1))


class DartsSkeleton(nn.Module):
    """Stem -> cell_1 -> fixed reduction -> cell_2 -> GAP -> linear, for any cell factory.

    Shared by the discrete network (`DartsNet`) and the DARTS supernet (the baseline), so the
    one-shot search optimises exactly the network the experts are built from.
    """

    def __init__(
        self,
        make_cell,
        in_channels: int,
        channels: int,
        n_out: int,
        x_mean: np.ndarray | None,
        x_std: np.ndarray | None,
    ) -> None:
        super().__init__()
        mean, std = _channel_stats(in_channels, x_mean, x_std)
        self.register_buffer("x_mean", mean.view(1, -1, 1, 1))
        self.register_buffer("x_std", std.view(1, -1, 1, 1))
        self.in_channels = in_channels
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels)
        )
        self.cell1 = make_cell(channels)
        self.reduce = ReLUConvBN(channels, 2 * channels, 3, stride=2)
        self.cell2 = make_cell(2 * channels)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(2 * channels, n_out)

    def features(self, x: torch.Tensor, *cell_args) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"expected images (batch, {self.in_channels}, H, W), got {tuple(x.shape)}; "
                "image tasks hold NCHW float arrays (sgem.data.images.make_image_task)"
            )
        h = self.stem((x - self.x_mean) / self.x_std)
        h = self.cell2(self.reduce(self.cell1(h, *cell_args)), *cell_args)
        return self.pool(h).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class DartsNet(DartsSkeleton):
    """The expert network for one genotype (both normal cells share it, not their weights)."""

    def __init__(
        self,
        arch: Arch,
        in_channels: int,
        channels: int,
        n_out: int,
        x_mean: np.ndarray | None = None,
        x_std: np.ndarray | None = None,
    ) -> None:
        super().__init__(lambda c: DartsCell(arch, c), in_channels, channels, n_out, x_mean, x_std)
        self.arch = arch


def _channel_stats(
    in_channels: int, x_mean: np.ndarray | None, x_std: np.ndarray | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean / std from the Trainer's flat per-feature statistics (C*H*W long)."""
    if x_mean is None:
        mean = torch.zeros(in_channels)
    else:
        flat = np.asarray(x_mean, dtype=np.float64).reshape(-1)
        if flat.size % in_channels:
            raise ValueError(
                f"x_mean has {flat.size} entries, not a multiple of in_channels={in_channels}"
            )
        mean = torch.as_tensor(flat.reshape(in_channels, -1).mean(1), dtype=torch.float32)
    if x_std is None:
        std = torch.ones(in_channels)
    else:
        flat = np.asarray(x_std, dtype=np.float64).reshape(-1)
        if flat.size % in_channels:
            raise ValueError(
                f"x_std has {flat.size} entries, not a multiple of in_channels={in_channels}"
            )
        std = torch.as_tensor(flat.reshape(in_channels, -1).mean(1), dtype=torch.float32)
    return mean, std.clamp_min(1e-6)


class DartsSpace(CellSpace):
    """DARTS cells with `n_cell_nodes` two-edge nodes over {skip, sep convs, max pool}.

    `n_nodes` (the `Arch` length) is 2 * n_cell_nodes; see the module docstring for the
    encoding. `build(arch, in_features, n_out, x_mean, x_std)` has the signature of the
    other spaces: `in_features` is C*H*W (what the Trainer passes) or a (C, H, W) shape;
    the network needs only the channel count, `in_channels`, because the skeleton ends in
    global average pooling and so accepts any image size.
    """

    def __init__(
        self,
        op_names: Sequence[str] = DARTS_OPS,
        n_cell_nodes: int = 4,
        init_channels: int = 16,
        in_channels: int = 3,
    ) -> None:
        unknown = [op for op in op_names if op not in DARTS_OPS]
        if unknown:
            raise ValueError(f"unknown op(s) {unknown}; DARTS ops are {list(DARTS_OPS)}")
        if n_cell_nodes < 1:
            raise ValueError(f"n_cell_nodes must be >= 1, got {n_cell_nodes}")
        if init_channels < 1 or in_channels < 1:
            raise ValueError(
                f"init_channels and in_channels must be >= 1, got {init_channels}, {in_channels}"
            )
        super().__init__(op_names, 2 * n_cell_nodes)
        self.n_cell_nodes = n_cell_nodes
        self.init_channels = init_channels
        self.in_channels = in_channels

    def __repr__(self) -> str:
        return (
            f"DartsSpace(ops={list(self.op_names)}, n_cell_nodes={self.n_cell_nodes}, "
            f"init_channels={self.init_channels})"
        )

    # -- the genotype set --------------------------------------------------------------------
    def _edge_choices(self, node: int) -> list[tuple[str, int]]:
        return [(op, src) for src in range(node + 1) for op in self.op_names]

    @property
    def size(self) -> int:
        """Distinct networks: per node, unordered pairs (with repetition) of (op, input)."""
        total = 1
        for j in range(self.n_cell_nodes):
            e = len(self.op_names) * (j + 1)
            total *= e * (e + 1) // 2
        return total

    def canonical(self, arch: Arch) -> Arch:
        """The same network with each node's two edges in a fixed order (by input, op)."""
        ops, inputs = list(arch.ops), list(arch.inputs)
        for j in range(self.n_cell_nodes):
            a, b = 2 * j, 2 * j + 1
            pair = sorted(
                [(inputs[a], self._op_index[ops[a]]), (inputs[b], self._op_index[ops[b]])]
            )
            (inputs[a], oa), (inputs[b], ob) = pair
            ops[a], ops[b] = self.op_names[oa], self.op_names[ob]
        return Arch(tuple(ops), tuple(inputs))

    def validate(self, arch: Arch) -> Arch:
        super().validate(arch)
        for i, src in enumerate(arch.inputs):
            if src > i // 2:
                raise ValueError(
                    f"edge {i} of {arch} belongs to DARTS node {i // 2} and may read states "
                    f"0..{i // 2} (0 = cell input, d = node d-1), not {src}"
                )
        return arch

    def sample(self, rng: np.random.Generator) -> Arch:
        ops, inputs = [], []
        for j in range(self.n_cell_nodes):
            for _ in range(2):
                ops.append(self.op_names[int(rng.integers(len(self.op_names)))])
                inputs.append(int(rng.integers(j + 1)))
        return self.canonical(Arch(tuple(ops), tuple(inputs)))

    def mutate(self, arch: Arch, rng: np.random.Generator) -> Arch:
        """Change one edge's op or input; returns a different canonical genotype."""
        arch = self.canonical(self.validate(arch))
        for _ in range(64):
            ops, inputs = list(arch.ops), list(arch.inputs)
            edge = int(rng.integers(self.n_nodes))
            node = edge // 2
            if rng.random() < 0.5 or node == 0:
                ops[edge] = self.op_names[int(rng.integers(len(self.op_names)))]
            else:
                inputs[edge] = int(rng.integers(node + 1))
            new = self.canonical(Arch(tuple(ops), tuple(inputs)))
            if new != arch:
                return new
        return arch

    def enumerate(self) -> Iterator[Arch]:
        per_node = [
            list(itertools.combinations_with_replacement(self._edge_choices(j), 2))
            for j in range(self.n_cell_nodes)
        ]
        for pairs in itertools.product(*per_node):
            edges = [edge for pair in pairs for edge in pair]
            yield self.canonical(Arch(tuple(e[0] for e in edges), tuple(e[1] for e in edges)))

    # -- graph encoding for the surrogate ----------------------------------------------------
    def encode(self, arch: Arch) -> tuple[np.ndarray, np.ndarray]:
        """(adjacency, node features): input node, one node per edge op, output node."""
        self.validate(arch)
        n = self.n_graph_nodes
        adj = np.zeros((n, n), dtype=np.float32)
        feats = np.zeros((n, self.n_node_features), dtype=np.float32)
        feats[0, len(self.op_names)] = 1.0
        feats[n - 1, len(self.op_names) + 1] = 1.0
        for i, (op, src) in enumerate(zip(arch.ops, arch.inputs, strict=True)):
            feats[i + 1, self._op_index[op]] = 1.0
            if src == 0:
                adj[0, i + 1] = 1.0
            else:  # state src is the sum of node src-1's two edge ops
                adj[2 * (src - 1) + 1, i + 1] = 1.0
                adj[2 * (src - 1) + 2, i + 1] = 1.0
            adj[i + 1, n - 1] = 1.0
        return adj, feats

    # -- networks ------------------------------------------------------------------------------
    def _channels_of(self, in_features: int | Sequence[int]) -> int:
        if isinstance(in_features, int | np.integer):
            if in_features % self.in_channels:
                raise ValueError(
                    f"in_features={in_features} is not C*H*W for in_channels="
                    f"{self.in_channels}; set DartsSpace(in_channels=...) to the images' channels"
                )
            return self.in_channels
        shape = tuple(int(s) for s in in_features)
        if len(shape) != 3:
            raise ValueError(f"an image input shape is (C, H, W), got {shape}")
        if shape[0] != self.in_channels:
            raise ValueError(
                f"images have {shape[0]} channels but the space was built for "
                f"in_channels={self.in_channels}"
            )
        return shape[0]

    def build(
        self,
        arch: Arch,
        in_features: int | Sequence[int],
        n_out: int,
        x_mean: np.ndarray | None = None,
        x_std: np.ndarray | None = None,
    ) -> DartsNet:
        self.validate(arch)
        if n_out < 1:
            raise ValueError(f"n_out must be >= 1 (the number of classes), got {n_out}")
        return DartsNet(
            arch, self._channels_of(in_features), self.init_channels, n_out, x_mean, x_std
        )
