"""The DARTS image space: genotype encoding, canonical form, surrogate graph, the network."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sgem.data.task import ClusteredTask, Split
from sgem.space import DARTS_OPS, Arch, DartsSpace, TimeSeriesSpace
from sgem.space.darts import DartsCell, DartsNet

SIZE = 8


def tiny_image_task(n: int = 192, size: int = SIZE, seed: int = 0) -> ClusteredTask:
    """Two sources of 3-channel images, two classes each (4 classes), 4 clusters.

    Source 0: red stripes, horizontal (class 0) or vertical (class 1). Source 1: a bright
    square on grey, left (class 2) or right (class 3). Clusters 2s, 2s+1 hold source s, so
    the oracle partition is [0, 0, 1, 1]. Noise keeps the task from being trivial.
    """
    rng = np.random.default_rng(seed)
    source = np.arange(n) % 2
    cls = (np.arange(n) // 2) % 2
    x = 0.1 * rng.standard_normal((n, 3, size, size)).astype(np.float32)
    stripes = (np.arange(size) % 2).astype(np.float32)
    for i in range(n):
        if source[i] == 0:
            pattern = stripes[:, None] if cls[i] == 0 else stripes[None, :]
            x[i, 0] += np.broadcast_to(pattern, (size, size))
        else:
            x[i] += 0.5
            half = slice(0, size // 2) if cls[i] == 0 else slice(size // 2, size)
            x[i, :, size // 4 : 3 * size // 4, half] += 1.0
    y = (2 * source + cls).astype(np.int64)
    cluster = (2 * source + (np.arange(n) // 4) % 2).astype(np.int64)
    parts = np.split(rng.permutation(n), [n // 2, 3 * n // 4])
    splits = [Split(x[p], y[p], cluster[p], source[p]) for p in parts]
    return ClusteredTask(
        "tiny-images",
        *splits,
        n_clusters=4,
        n_classes=4,
        oracle_partition=np.array([0, 0, 1, 1]),
    )


@pytest.fixture(scope="module")
def space() -> DartsSpace:
    return DartsSpace(n_cell_nodes=2, init_channels=4)


def test_exports_and_ops() -> None:
    assert DARTS_OPS == ("skip", "sep_conv_3x3", "sep_conv_5x5", "max_pool_3x3")
    assert TimeSeriesSpace().n_nodes == 3
    assert DartsSpace().n_nodes == 8  # 4 DARTS nodes, two edges each
    assert DartsSpace().init_channels == 16


def test_size_counts_distinct_networks(space) -> None:
    # node 0: unordered pairs of 4 (op, input 0) choices = 10; node 1: 8 choices -> 36
    assert space.size == 10 * 36
    archs = list(space.enumerate())
    assert len(archs) == len(set(archs)) == space.size
    assert all(space.canonical(a) == a for a in archs)


def test_sample_mutate_are_valid_and_canonical(space) -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        a = space.sample(rng)
        assert space.validate(a) is a and space.canonical(a) == a
        b = space.mutate(a, rng)
        assert b != a and space.canonical(b) == b
        space.validate(b)


def test_canonical_merges_swapped_edges(space) -> None:
    a = Arch(("sep_conv_5x5", "skip", "max_pool_3x3", "skip"), (0, 0, 1, 0))
    swapped = Arch(("skip", "sep_conv_5x5", "skip", "max_pool_3x3"), (0, 0, 0, 1))
    assert a != swapped
    assert space.canonical(a) == space.canonical(swapped)


def test_json_round_trip(space) -> None:
    a = space.sample(np.random.default_rng(3))
    assert Arch.from_json(a.dumps()) == a
    assert Arch.from_json(a.to_json()) == a


def test_validate_rejects_reading_a_later_state(space) -> None:
    # edge 1 belongs to node 0, which may only read the cell input (state 0)
    bad = Arch(("skip", "skip", "skip", "skip"), (0, 1, 0, 0))
    with pytest.raises(ValueError, match="DARTS node 0"):
        space.validate(bad)
    with pytest.raises(ValueError, match="unknown op"):
        space.validate(Arch(("conv", "skip", "skip", "skip"), (0, 0, 0, 0)))
    with pytest.raises(ValueError, match="nodes"):
        space.validate(Arch(("skip", "skip"), (0, 0)))


def test_encode_wires_sums_and_concat(space) -> None:
    a = Arch(("skip", "sep_conv_3x3", "max_pool_3x3", "sep_conv_5x5"), (0, 0, 0, 1))
    adj, feats = space.encode(a)
    n = space.n_graph_nodes
    assert adj.shape == (n, n) == (6, 6)
    assert feats.shape == (6, len(DARTS_OPS) + 2)
    # graph nodes: 0 input, 1..4 the edge ops, 5 output
    assert adj[0, 1] == adj[0, 2] == adj[0, 3] == 1  # three edges read the cell input
    assert adj[1, 4] == adj[2, 4] == 1  # edge 3 reads node 0 = sum of edges 0 and 1
    assert adj[0, 4] == 0
    assert (adj[1:5, 5] == 1).all()  # every node is concatenated into the output
    assert adj.sum() == 3 + 2 + 4
    assert feats[1, DARTS_OPS.index("skip")] == 1 and feats[4, DARTS_OPS.index("sep_conv_5x5")]
    assert feats[0, 4] == 1 and feats[5, 5] == 1
    assert (feats.sum(1) == 1).all()


def test_network_forward_backward_any_size(space) -> None:
    a = Arch(("sep_conv_3x3", "max_pool_3x3", "skip", "sep_conv_5x5"), (0, 0, 0, 1))
    torch.manual_seed(0)
    net = space.build(a, 3 * SIZE * SIZE, 5, np.zeros(3 * SIZE * SIZE), np.ones(3 * SIZE * SIZE))
    assert isinstance(net, DartsNet)
    for size in (SIZE, 16):
        out = net(torch.randn(4, 3, size, size))
        assert out.shape == (4, 5)
    out.sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    # two normal cells: the same genotype, separate weights; channels C then 2C
    assert isinstance(net.cell1, DartsCell) and isinstance(net.cell2, DartsCell)
    assert net.cell1.arch == net.cell2.arch == a
    assert net.cell1.ops[0].op[1].weight.shape[0] == 4
    assert net.cell2.ops[0].op[1].weight.shape[0] == 8
    assert net.head.in_features == 8


def test_build_normalises_per_channel(space) -> None:
    a = space.sample(np.random.default_rng(0))
    mean = np.repeat([0.1, 0.2, 0.3], SIZE * SIZE)
    net = space.build(a, (3, SIZE, SIZE), 2, mean, np.full(3 * SIZE * SIZE, 0.5))
    np.testing.assert_allclose(net.x_mean.flatten().numpy(), [0.1, 0.2, 0.3], rtol=1e-6)
    np.testing.assert_allclose(net.x_std.flatten().numpy(), [0.5] * 3)


def test_build_errors_name_the_problem(space) -> None:
    a = space.sample(np.random.default_rng(0))
    with pytest.raises(ValueError, match="in_channels"):
        space.build(a, 64, 2)  # 64 is not 3 * H * W
    with pytest.raises(ValueError, match="channels"):
        space.build(a, (1, 8, 8), 2)
    net = space.build(a, 3 * 64, 2)
    with pytest.raises(ValueError, match="NCHW"):
        net(torch.randn(2, 3 * 64))
    with pytest.raises(ValueError, match="unknown op"):
        DartsSpace(op_names=("skip", "conv_7x7"))
    with pytest.raises(ValueError, match="n_cell_nodes"):
        DartsSpace(n_cell_nodes=0)


def test_tiny_task_is_valid() -> None:
    task = tiny_image_task()
    assert task.input_shape == (3, SIZE, SIZE)
    assert set(np.unique(task.train.y)) == {0, 1, 2, 3}
