"""Twin experts (sgem.moe.averaged): a final expert shipped as its refitted and its tracked
network averaged, trained by the final stage for free, saved and loaded like any expert."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import short_train, small_ts_space, small_ts_task
from hypothesis import given, settings
from hypothesis import strategies as st

from sgem.final.length import ValidationLength, resolve_length
from sgem.final.moe_fit import train_final_moe
from sgem.final.protocol import FinalProtocol
from sgem.moe.averaged import AveragedExpert
from sgem.train.trainer import Trainer


class _Fixed(torch.nn.Module):
    def __init__(self, out: torch.Tensor) -> None:
        super().__init__()
        self.out = out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out.expand(len(x), *self.out.shape[1:])


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(-5, 5), min_size=2, max_size=2),
    st.lists(st.floats(0.1, 3), min_size=2, max_size=2),
    st.lists(st.floats(2.5, 50), min_size=2, max_size=2),
)
def test_a_student_t_twin_is_centred_between_and_never_narrower_than_its_networks(
    locs, scales, dfs
):
    nets = [
        _Fixed(torch.tensor([[[m, s, d]]], dtype=torch.float64))
        for m, s, d in zip(locs, scales, dfs, strict=True)
    ]
    out = AveragedExpert(nets, "student_t")(torch.zeros(3, 1))
    loc, scale, df = out[0, 0]
    assert float(loc) == pytest.approx(np.mean(locs))
    assert float(df) == pytest.approx(np.mean(dfs))
    assert float(scale) >= np.sqrt(np.mean(np.square(scales))) - 1e-12
    same = AveragedExpert([nets[0], nets[0]], "student_t")(torch.zeros(1, 1))
    torch.testing.assert_close(same, nets[0](torch.zeros(1, 1)))  # agreeing networks: as is


def test_a_class_twin_mixes_the_probabilities_exactly():
    a, b = torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([[-1.0, 1.0, 0.5]])
    twin = AveragedExpert([_Fixed(a), _Fixed(b)], "cross_entropy")
    mixed = torch.softmax(twin(torch.zeros(1, 1)), -1)
    expected = 0.5 * (torch.softmax(a, -1) + torch.softmax(b, -1))
    torch.testing.assert_close(mixed, expected)
    with pytest.raises(ValueError, match="at least 2"):
        AveragedExpert([_Fixed(a)], "cross_entropy")


def test_the_twins_protocol_is_named_and_needs_a_refit():
    rule = resolve_length("validation-warm-twins")
    assert rule == ValidationLength(warm_start=True, twins=True)
    protocol = FinalProtocol.from_name("validation-twins", 10)
    assert protocol.twins and protocol.length_name == "validation-twins"
    with pytest.raises(ValueError, match="twins need"):
        FinalProtocol(10, length="tracked", refit=False, twins=True)


@pytest.fixture(scope="module")
def task():
    return small_ts_task(context=12, horizon=3)


def test_the_final_stage_ships_twins_that_save_and_load(task, tmp_path):
    space = small_ts_space()
    trainer = Trainer(task, space, short_train())
    archs = space.sample_many(2, np.random.default_rng(1))
    assignment = np.arange(task.n_clusters) % 2
    moe, report = train_final_moe(
        task, trainer, assignment, archs, steps=8, seed=0, length="validation-twins"
    )
    plain, plain_report = train_final_moe(
        task, trainer, assignment, archs, steps=8, seed=0, length="validation"
    )
    for k, expert in enumerate(moe.experts):
        assert isinstance(expert, AveragedExpert)
        assert "twin" in report.final_length[k]
        # the refitted half is the plain protocol's expert, bit for bit
        for a, b in zip(
            expert.networks[0].state_dict().values(),
            plain.experts[k].state_dict().values(),
            strict=True,
        ):
            torch.testing.assert_close(a, b)
    assert report.test_nll != plain_report.test_nll

    from sgem.moe.artifact import load_parts, save_final_moe

    save_final_moe(tmp_path / "model", task, space, moe, trainer.n_out, metrics={})
    _, loaded, _ = load_parts(tmp_path / "model")
    x = torch.as_tensor(task.test.x[:16], dtype=torch.float32)
    c = torch.as_tensor(task.test.cluster[:16])
    with torch.no_grad():
        torch.testing.assert_close(loaded(x, c), moe(x, c))
    assert all(isinstance(e, AveragedExpert) for e in loaded.experts)


def test_the_leaderboard_global_network_is_a_twin_under_a_twins_protocol(task):
    """The fallback network selective routing ships is trained twice anyway (training split,
    then train + validation): under a twins protocol it is shipped as both, averaged."""
    from sgem.leaderboard.members import GlobalNetwork, reference_budget

    space = small_ts_space()
    trainer = Trainer(task, space, short_train())
    cell = space.sample_many(1, np.random.default_rng(3))[0]
    twins = reference_budget(trainer, 0, steps=6, length="validation-twins")
    plain = reference_budget(trainer, 0, steps=6, length="validation")
    both = GlobalNetwork(cell).fit_evaluate(task, twins)
    one = GlobalNetwork(cell).fit_evaluate(task, plain)
    assert isinstance(both.fitted.network, AveragedExpert)
    assert not isinstance(one.fitted.network, AveragedExpert)
    np.testing.assert_array_equal(both.val_output, one.val_output)  # the choice is unchanged
    assert not np.array_equal(both.test_output, one.test_output)


@pytest.mark.parametrize(("length", "networks"), [("fixed", 6), ("validation-twins", 7)])
def test_a_table_that_ships_its_global_network_averages_the_fold_networks_in(
    tmp_path, monkeypatch, length, networks
):
    """Where every cluster of a user's table goes to the global network, its five
    out-of-fold networks (trained anyway, for the combination's weights) are averaged with
    the saved one (under twins: both of its networks, one flat average); the saved model
    reloads to the same predictions."""
    import json

    import pandas as pd
    from helpers import TINY_SEARCH

    import sgem
    from sgem.leaderboard import contest

    monkeypatch.setattr(
        contest, "selective_routing", lambda task, *a: (list(range(task.n_clusters)), {})
    )
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-3, 1, (150, 2)), rng.normal(3, 1, (150, 2))]
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1]})
    frame["label"] = np.where(x[:, 1] > 0, "p", "n")
    out = tmp_path / "run"
    model = sgem.fit(
        frame,
        target="label",
        out=out,
        progress=False,
        config={"search": TINY_SEARCH, "final_length": length},
        n_clusters=4,
        executor="inline",
    )
    experts = json.loads((out / "model" / "model.json").read_text())["experts"]
    assert [e["networks"] for e in experts] == [networks]  # the global network(s), 5 folds
    again = sgem.load(out)
    np.testing.assert_allclose(again.predict_proba(frame), model.predict_proba(frame))
