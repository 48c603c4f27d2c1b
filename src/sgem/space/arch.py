"""`Arch`: one cell as a DAG. Node i applies `ops[i]` to state `inputs[i]`.

States are numbered 0 (the cell input) and j >= 1 (the output of node j-1), so node i may read
any state 0..i, which makes every (ops, inputs) pair with inputs[i] <= i a valid DAG by
construction. Nodes whose output nobody reads are the leaves; the cell output combines them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Arch:
    ops: tuple[str, ...]
    inputs: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "inputs", tuple(int(i) for i in self.inputs))
        if len(self.ops) == 0:
            raise ValueError("an Arch needs at least one node")
        if len(self.ops) != len(self.inputs):
            raise ValueError(
                f"ops and inputs must have one entry per node, got {len(self.ops)} ops and "
                f"{len(self.inputs)} inputs"
            )
        for i, src in enumerate(self.inputs):
            if not 0 <= src <= i:
                raise ValueError(
                    f"node {i} reads state {src}, but only states 0..{i} exist before it "
                    "(0 is the cell input, j >= 1 the output of node j-1)"
                )

    @property
    def n_nodes(self) -> int:
        return len(self.ops)

    @property
    def leaves(self) -> tuple[int, ...]:
        """Nodes whose output no later node reads: combined into the cell output."""
        used = {src - 1 for src in self.inputs if src >= 1}
        return tuple(i for i in range(self.n_nodes) if i not in used)

    @property
    def key(self) -> str:
        """A compact, stable identity, e.g. 'rbf<0|linear<1'."""
        return "|".join(f"{op}<{src}" for op, src in zip(self.ops, self.inputs, strict=True))

    @classmethod
    def from_key(cls, key: str) -> Arch:
        """The inverse of `key`: 'rbf<0|linear<1' -> Arch(('rbf', 'linear'), (0, 1))."""
        try:
            ops, inputs = zip(*(part.split("<") for part in key.split("|")), strict=True)
            return cls(tuple(ops), tuple(int(i) for i in inputs))
        except ValueError as err:
            raise ValueError(f"not an Arch key of the form 'op<input|op<input': {key!r}") from err

    def uses(self, op: str) -> bool:
        return op in self.ops

    def to_json(self) -> dict:
        return {"ops": list(self.ops), "inputs": list(self.inputs)}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, data: dict | str) -> Arch:
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, dict) or set(data) != {"ops", "inputs"}:
            raise ValueError(
                f"an Arch JSON object has exactly the keys 'ops' and 'inputs': {data!r}"
            )
        return cls(tuple(data["ops"]), tuple(data["inputs"]))

    def __str__(self) -> str:
        return self.key


class CellSpace:
    """The finite set of cells over `op_names` with `n_nodes` nodes.

    Knows how to validate, sample, mutate, enumerate and graph-encode architectures.
    Modality spaces subclass it and add `build` (the network skeleton).
    """

    def __init__(self, op_names: Sequence[str], n_nodes: int) -> None:
        if n_nodes < 1:
            raise ValueError(f"n_nodes must be >= 1, got {n_nodes}")
        if len(set(op_names)) != len(op_names) or not op_names:
            raise ValueError(f"op_names must be a non-empty list of distinct names: {op_names}")
        reserved = [op for op in op_names if not op or "<" in op or "|" in op]
        if reserved:
            raise ValueError(
                f"op names must be non-empty and free of '<' and '|' (they delimit Arch.key): "
                f"{reserved}"
            )
        self.op_names = tuple(op_names)
        self.n_nodes = n_nodes
        self._op_index = {op: i for i, op in enumerate(self.op_names)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(ops={list(self.op_names)}, n_nodes={self.n_nodes})"

    @property
    def size(self) -> int:
        """Number of distinct architectures: prod_i |O| * (i + 1)."""
        return int(np.prod([len(self.op_names) * (i + 1) for i in range(self.n_nodes)]))

    def validate(self, arch: Arch) -> Arch:
        if arch.n_nodes != self.n_nodes:
            raise ValueError(f"{arch} has {arch.n_nodes} nodes; this space has {self.n_nodes}")
        unknown = [op for op in arch.ops if op not in self._op_index]
        if unknown:
            raise ValueError(
                f"unknown op(s) {unknown} in {arch}; this space's ops are {list(self.op_names)}"
            )
        return arch

    def sample(self, rng: np.random.Generator) -> Arch:
        ops = tuple(self.op_names[i] for i in rng.integers(len(self.op_names), size=self.n_nodes))
        inputs = tuple(int(rng.integers(i + 1)) for i in range(self.n_nodes))
        return Arch(ops, inputs)

    def sample_many(self, n: int, rng: np.random.Generator) -> list[Arch]:
        return [self.sample(rng) for _ in range(n)]

    def mutate(self, arch: Arch, rng: np.random.Generator) -> Arch:
        """Change one node's op or input (always a different, valid Arch when one exists)."""
        ops, inputs = list(arch.ops), list(arch.inputs)
        for _ in range(32):
            node = int(rng.integers(self.n_nodes))
            if rng.random() < 0.5 or node == 0:
                ops[node] = self.op_names[int(rng.integers(len(self.op_names)))]
            else:
                inputs[node] = int(rng.integers(node + 1))
            new = Arch(tuple(ops), tuple(inputs))
            if new != arch:
                return new
            ops, inputs = list(arch.ops), list(arch.inputs)
        return arch

    def enumerate(self) -> Iterator[Arch]:
        op_choices = itertools.product(self.op_names, repeat=self.n_nodes)
        for ops in op_choices:
            for inputs in itertools.product(*(range(i + 1) for i in range(self.n_nodes))):
                yield Arch(ops, inputs)

    # -- graph encoding for the surrogate -------------------------------------------------
    @property
    def n_graph_nodes(self) -> int:
        return self.n_nodes + 2

    @property
    def n_node_features(self) -> int:
        return len(self.op_names) + 2

    def encode(self, arch: Arch) -> tuple[np.ndarray, np.ndarray]:
        """(adjacency, node features) of the DAG: input node, one node per op, output node.

        adjacency[i, j] = 1 for an edge i -> j. Features are one-hot over ops plus two
        extra types, "input" and "output".
        """
        self.validate(arch)
        n = self.n_graph_nodes
        adj = np.zeros((n, n), dtype=np.float32)
        feats = np.zeros((n, self.n_node_features), dtype=np.float32)
        feats[0, len(self.op_names)] = 1.0
        feats[n - 1, len(self.op_names) + 1] = 1.0
        for i, (op, src) in enumerate(zip(arch.ops, arch.inputs, strict=True)):
            adj[src, i + 1] = 1.0
            feats[i + 1, self._op_index[op]] = 1.0
        for leaf in arch.leaves:
            adj[leaf + 1, n - 1] = 1.0
        return adj, feats

    def encode_many(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        pairs = [self.encode(a) for a in archs]
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
