"""`Arch`, `CellSpace` and the tabular space (property-based with hypothesis)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sgem.space import TABULAR_OPS, Arch, CellSpace, TabularSpace
from sgem.space.tabular import RBF, Cell

OPS = ("conv", "pool", "skip", "mlp")
FAST = settings(max_examples=60, deadline=None)


@st.composite
def archs(draw, ops=OPS, min_nodes=1, max_nodes=6):
    n = draw(st.integers(min_nodes, max_nodes))
    chosen = draw(st.lists(st.sampled_from(ops), min_size=n, max_size=n))
    inputs = [draw(st.integers(0, i)) for i in range(n)]
    return Arch(tuple(chosen), tuple(inputs))


@FAST
@given(archs())
def test_json_round_trip(a):
    assert Arch.from_json(a.to_json()) == a
    assert Arch.from_json(a.dumps()) == a
    assert json.loads(a.dumps()) == {"ops": list(a.ops), "inputs": list(a.inputs)}
    again = Arch.from_json(json.loads(json.dumps(a.to_json())))
    assert hash(again) == hash(a) and again.key == a.key


@FAST
@given(archs(), archs())
def test_key_identifies_the_arch(a, b):
    assert (a == b) == (a.key == b.key)
    assert str(a) == a.key
    assert a.key.count("|") == a.n_nodes - 1


@FAST
@given(archs())
def test_leaves_are_the_unread_nodes(a):
    read = set()
    for src in a.inputs:
        if src >= 1:
            read.add(src - 1)
    assert set(a.leaves) == set(range(a.n_nodes)) - read
    assert a.n_nodes - 1 in a.leaves  # nobody reads the last node


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_sample_is_valid(seed, n_nodes):
    space = CellSpace(OPS[:3], n_nodes)
    rng = np.random.default_rng(seed)
    for a in space.sample_many(5, rng):
        assert space.validate(a) is a
        assert a.n_nodes == n_nodes
        assert all(0 <= src <= i for i, src in enumerate(a.inputs))


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_mutate_changes_exactly_one_gene(seed, n_nodes):
    space = CellSpace(OPS, n_nodes)
    rng = np.random.default_rng(seed)
    a = space.sample(rng)
    b = space.mutate(a, rng)
    assert b != a
    space.validate(b)
    changed_ops = sum(x != y for x, y in zip(a.ops, b.ops, strict=True))
    changed_inputs = sum(x != y for x, y in zip(a.inputs, b.inputs, strict=True))
    assert changed_ops + changed_inputs == 1


def test_mutate_reaches_every_single_gene_neighbour():
    space = CellSpace(OPS[:3], 3)
    a = Arch(("conv", "pool", "skip"), (0, 1, 1))
    neighbours = set()
    for node in range(3):
        for op in space.op_names:
            if op != a.ops[node]:
                ops = list(a.ops)
                ops[node] = op
                neighbours.add(Arch(tuple(ops), a.inputs))
        for src in range(node + 1):
            if src != a.inputs[node]:
                inputs = list(a.inputs)
                inputs[node] = src
                neighbours.add(Arch(a.ops, tuple(inputs)))
    rng = np.random.default_rng(0)
    seen = {space.mutate(a, rng) for _ in range(600)}
    assert seen == neighbours


def test_mutate_returns_the_arch_when_the_space_has_one_element():
    space = CellSpace(["only"], 1)
    a = Arch(("only",), (0,))
    assert space.size == 1
    assert space.mutate(a, np.random.default_rng(0)) == a


@pytest.mark.parametrize(("n_ops", "n_nodes"), [(3, 2), (2, 3), (1, 1), (4, 1)])
def test_enumerate_yields_size_distinct_valid_archs(n_ops, n_nodes):
    space = CellSpace(OPS[:n_ops], n_nodes)
    archs_list = list(space.enumerate())
    assert len(set(archs_list)) == len(archs_list) == space.size
    for a in archs_list:
        space.validate(a)
    # the same set by brute force: every op tuple x every input tuple with inputs[i] <= i
    brute = {
        Arch(ops, inputs)
        for ops in itertools.product(OPS[:n_ops], repeat=n_nodes)
        for inputs in itertools.product(range(n_nodes), repeat=n_nodes)
        if all(src <= i for i, src in enumerate(inputs))
    }
    assert set(archs_list) == brute


def test_space_size_of_three_ops_two_nodes():
    assert CellSpace(OPS[:3], 2).size == 18  # (3 * 1) * (3 * 2)


@FAST
@given(archs())
def test_encode_is_a_topologically_ordered_dag(a):
    space = CellSpace(OPS, a.n_nodes)
    adj, feats = space.encode(a)
    n = a.n_nodes + 2
    assert adj.shape == (n, n) and feats.shape == (n, len(OPS) + 2)
    assert set(np.unique(adj)) <= {0.0, 1.0}
    assert np.all(np.tril(adj) == 0)  # strictly upper triangular
    assert adj[:, 0].sum() == 0  # nothing flows into the cell input
    for i, src in enumerate(a.inputs):
        col = adj[:, i + 1]
        assert col.sum() == 1 and col[src] == 1  # one in-edge, from the state it reads
    out_sources = set(np.flatnonzero(adj[:, n - 1]).tolist())
    assert out_sources == {leaf + 1 for leaf in a.leaves}
    assert adj[n - 1].sum() == 0
    # one-hot node types: op index for op nodes, then "input" and "output"
    assert np.all(feats.sum(axis=1) == 1) and set(np.unique(feats)) <= {0.0, 1.0}
    assert feats[0, len(OPS)] == 1 and feats[n - 1, len(OPS) + 1] == 1
    for i, op in enumerate(a.ops):
        assert feats[i + 1, OPS.index(op)] == 1
    stacked_adj, stacked_feats = space.encode_many([a, a])
    assert stacked_adj.shape == (2, n, n)
    np.testing.assert_array_equal(stacked_feats[1], feats)


def test_inputs_beyond_the_node_index_raise():
    with pytest.raises(ValueError, match="node 1 reads state 2"):
        Arch(("conv", "pool"), (0, 2))
    with pytest.raises(ValueError, match="node 0"):
        Arch(("conv",), (1,))
    with pytest.raises(ValueError, match="node 0"):
        Arch(("conv",), (-1,))


def test_structural_errors_raise():
    with pytest.raises(ValueError, match="at least one node"):
        Arch((), ())
    with pytest.raises(ValueError, match="2 ops and 1 inputs"):
        Arch(("conv", "pool"), (0,))


def test_unknown_op_is_named_in_the_error():
    space = CellSpace(OPS, 2)
    with pytest.raises(ValueError, match="banana"):
        space.validate(Arch(("conv", "banana"), (0, 1)))
    with pytest.raises(ValueError, match="banana"):
        space.encode(Arch(("conv", "banana"), (0, 1)))
    with pytest.raises(ValueError, match="3 nodes"):
        space.validate(Arch(("conv", "conv", "conv"), (0, 0, 0)))


@pytest.mark.parametrize(
    "payload",
    [
        {"ops": ["conv"]},
        {"ops": ["conv"], "inputs": [0], "extra": 1},
        {"op": ["conv"], "inputs": [0]},
        '["conv", 0]',
        '{"ops": ["conv"]}',
    ],
)
def test_from_json_with_wrong_keys_raises(payload):
    with pytest.raises(ValueError, match="exactly the keys"):
        Arch.from_json(payload)


def test_cell_space_argument_checks():
    with pytest.raises(ValueError, match="n_nodes"):
        CellSpace(OPS, 0)
    with pytest.raises(ValueError, match="distinct"):
        CellSpace(["a", "a"], 2)
    with pytest.raises(ValueError, match="non-empty"):
        CellSpace([], 2)


# -- the tabular space --------------------------------------------------------------------


def expected_cell_width(a: Arch, in_dim: int, hidden: int, rbf_centres: int) -> int:
    widths = [in_dim]
    for op, src in zip(a.ops, a.inputs, strict=True):
        widths.append({"linear": hidden, "rbf": rbf_centres}.get(op, widths[src]))
    return sum(widths[leaf + 1] for leaf in a.leaves)


@settings(max_examples=40, deadline=None)
@given(archs(ops=TABULAR_OPS, max_nodes=4), st.integers(2, 5), st.integers(1, 3))
def test_tabular_network_forward_shape(a, n_classes, rbf_centres):
    space = TabularSpace(n_nodes=a.n_nodes, hidden=6, rbf_centres=rbf_centres)
    net = space.build(a, 2, n_classes, np.zeros(2, np.float32), np.ones(2, np.float32))
    assert net.cell.out_dim == expected_cell_width(a, 2, 6, rbf_centres)
    x = torch.randn(5, 2, generator=torch.Generator().manual_seed(0))
    net.data_init(x, torch.Generator().manual_seed(1))
    net.eval()
    out = net(x)
    assert out.shape == (5, n_classes)
    assert torch.isfinite(out).all()


def test_tabular_standardisation_is_applied():
    a = Arch(("identity",), (0,))
    space = TabularSpace(op_names=["identity"], n_nodes=1)
    mean, std = np.array([1.0, -2.0], np.float32), np.array([2.0, 2.0], np.float32)
    net = space.build(a, 2, 3, mean, std)
    x = torch.tensor([[3.0, 0.0], [1.0, -2.0]])
    np.testing.assert_allclose(net.cell(net.standardise(x)).numpy(), [[1.0, 1.0], [0.0, 0.0]])


def test_a_region_frame_centres_and_scales_on_the_training_rows():
    a = Arch(("identity",), (0,))
    space = TabularSpace(op_names=["identity"], n_nodes=1, frame="region")
    mean, std = np.zeros(2, np.float32), np.full(2, 10.0, np.float32)
    net = space.build(a, 2, 3, mean, std)
    x = torch.tensor([[4.0, 1.0], [6.0, 5.0]])  # feature stds 1.414 and 2.828: one scale
    net.data_init(x, torch.Generator().manual_seed(0))
    np.testing.assert_allclose(net.x_mean.numpy(), [5.0, 3.0])
    np.testing.assert_allclose(net.x_std.numpy(), [2.1213] * 2, rtol=1e-4)
    np.testing.assert_allclose(mean, [0.0, 0.0])  # the caller's statistics are untouched
    np.testing.assert_allclose(std, [10.0, 10.0])
    near = space.build(a, 2, 3, mean, std)  # near-equal rows: at least 0.1 x the split's scale
    near.data_init(torch.tensor([[1.0, 1.0], [1.0, 1.001]]), torch.Generator().manual_seed(0))
    np.testing.assert_allclose(near.x_std.numpy(), [1.0, 1.0])
    kept = TabularSpace(op_names=["identity"], n_nodes=1).build(a, 2, 3, mean, std)
    kept.data_init(x, torch.Generator().manual_seed(0))  # the global frame keeps the split's
    np.testing.assert_allclose(kept.x_mean.numpy(), mean)
    with pytest.raises(ValueError, match="frame"):
        TabularSpace(frame="local")


def test_rbf_started_on_one_row_is_finite():
    """A tiny table's cluster can hold one training row: its std is NaN, its start is not."""
    rbf = RBF(2, 3)
    rbf.data_init(torch.tensor([[1.0, 2.0]]), torch.Generator().manual_seed(0))
    assert torch.isfinite(rbf.centres).all() and torch.isfinite(rbf.log_gamma).all()
    np.testing.assert_allclose(rbf.centres.detach().numpy(), [[1.0, 2.0]] * 3)


def test_rbf_output_in_unit_interval_and_one_at_the_centre():
    torch.manual_seed(0)
    rbf = RBF(2, 3)
    x = torch.randn(50, 2) * 3
    rbf.data_init(x, torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = rbf(x)
        at_centre = float(rbf(rbf.centres[:1])[0, 0])
        c = rbf.centres[0]
        near, far = float(rbf(c[None] + 0.1)[0, 0]), float(rbf(c[None] + 1.0)[0, 0])
    assert out.shape == (50, 3)
    assert torch.all(out > 0) and torch.all(out <= 1)
    assert at_centre == pytest.approx(1.0)
    # farther from the centre -> smaller activation (gamma > 0)
    assert far < near < 1.0


def test_rbf_is_a_gaussian_of_the_squared_distance():
    torch.manual_seed(1)
    rbf = RBF(3, 2)
    with torch.no_grad():
        rbf.log_gamma.copy_(torch.log(torch.tensor([0.5, 2.0])))
        x = torch.randn(4, 3)
        out = rbf(x).numpy()
        centres = rbf.centres.numpy()
    for i in range(4):
        for h, gamma in enumerate((0.5, 2.0)):
            d2 = float(np.sum((x[i].numpy() - centres[h]) ** 2))
            assert out[i, h] == pytest.approx(np.exp(-gamma * d2), rel=1e-5)


def test_rbf_cell_output_in_unit_interval():
    a = Arch(("rbf",), (0,))
    cell = Cell(a, in_dim=2, hidden=4, dropout=0.0, rbf_centres=2)
    x = torch.randn(5, 2, generator=torch.Generator().manual_seed(3))
    cell.data_init(x, torch.Generator().manual_seed(4))
    out = cell(x)
    assert out.shape == (5, 2)
    assert torch.all(out > 0) and torch.all(out <= 1)


def test_tabular_space_rejects_unknown_ops():
    with pytest.raises(ValueError, match="conv3x3"):
        TabularSpace(op_names=["linear", "conv3x3"])
    space = TabularSpace(op_names=["linear", "rbf"], n_nodes=1)
    with pytest.raises(ValueError, match="relu"):
        space.build(Arch(("relu",), (0,)), 2, 2, np.zeros(2), np.ones(2))


def test_arch_key_round_trips_and_bad_keys_are_refused() -> None:
    arch = Arch(("rbf", "linear", "identity"), (0, 1, 0))
    assert Arch.from_key(arch.key) == arch
    with pytest.raises(ValueError, match="not an Arch key"):
        Arch.from_key("rbf|linear<x")
