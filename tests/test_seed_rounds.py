"""Seed rounds (sgem.final.seed_rounds): the time a budgeted final stage leaves becomes more
seeds of every final expert, averaged in, tested again; a round that would not fit, or that
the fence cuts, adds nothing."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from helpers import short_train, small_ts_space, small_ts_task

from sgem.final.moe_fit import train_final_moe
from sgem.final.seed_rounds import add_seed_rounds
from sgem.methods.result import MethodResult
from sgem.moe.averaged import MAX_NETWORKS, n_networks
from sgem.moe.scoring import method_scores
from sgem.train.time_fence import training_fence
from sgem.train.trainer import Trainer


@pytest.fixture(scope="module")
def setup():
    task = small_ts_task(context=12, horizon=3)
    space = small_ts_space()
    trainer = Trainer(task, space, short_train())
    archs = space.sample_many(2, np.random.default_rng(1))
    return task, trainer, archs


def _final(setup, length: str) -> MethodResult:
    task, trainer, archs = setup
    assignment = np.arange(task.n_clusters) % 2
    started = time.perf_counter()
    moe, report = train_final_moe(task, trainer, assignment, archs, steps=8, seed=0, length=length)
    return MethodResult(
        method="sgem",
        seed=0,
        assignment=assignment,
        architectures=archs,
        report=report,
        moe=moe,
        n_out=trainer.n_out,
        n_trained=0,
        seconds=time.perf_counter() - started,
    )


@pytest.mark.parametrize("length", ["validation-warm-twins", "validation-warm-norefit", "fixed"])
def test_rounds_fill_the_time_left_and_the_holdout_is_scored_again(setup, length):
    task, trainer, _ = setup
    final = _final(setup, length)
    before = [n_networks(e) for e in final.moe.experts]
    record = add_seed_rounds(task, trainer, final, until=time.perf_counter() + 600)
    # with all the time in the world, every expert fills up to the most it may hold
    assert record["rounds"] == MAX_NETWORKS - max(before) > 0
    assert record["networks_per_expert"] == [MAX_NETWORKS] * len(before)
    assert "holds" in record["stopped"]
    report = final.report
    assert report.seed_rounds == record
    x = torch.as_tensor(task.test.x, dtype=torch.float32)
    with torch.no_grad():
        out = final.moe(x, torch.as_tensor(task.test.cluster))
    scores = method_scores(
        task, out, expert_of=final.assignment[task.test.cluster], n_experts=2, seed=0
    )
    assert report.test_nll == pytest.approx(scores["test_nll"])
    assert record["holdout_nll_after"] == report.test_nll != record["holdout_nll_before"]
    torch.testing.assert_close(report.output, out)


def test_no_round_starts_that_would_not_end_in_time(setup):
    task, trainer, _ = setup
    final = _final(setup, "validation-warm-twins")
    report_before = final.report
    record = add_seed_rounds(task, trainer, final, until=time.perf_counter())
    assert record["rounds"] == 0 and "would not end" in record["stopped"]
    assert [n_networks(e) for e in final.moe.experts] == [2, 2]
    assert final.report.test_nll == report_before.test_nll


def test_the_first_round_starts_where_half_its_price_fits(setup):
    """The first round's price (its share of the final stage's seconds) runs high, so it
    starts where half of it fits; the later ones are priced at what the last one took."""
    task, trainer, _ = setup
    final = _final(setup, "validation-warm-twins")
    final.seconds = 1000.0  # priced far above what a round of these small networks takes
    record = add_seed_rounds(task, trainer, final, until=time.perf_counter())
    price = record["first_round_priced_seconds"]
    assert price > 100 and record["rounds"] == 0
    record = add_seed_rounds(task, trainer, final, until=time.perf_counter() + 0.45 * price)
    assert record["rounds"] == 0 and "would not end" in record["stopped"]
    record = add_seed_rounds(task, trainer, final, until=time.perf_counter() + 0.55 * price)
    assert record["rounds"] == MAX_NETWORKS - 2 and "holds" in record["stopped"]


def test_a_round_the_fence_cuts_is_dropped(setup):
    task, trainer, _ = setup
    final = _final(setup, "validation-warm-twins")
    final.seconds = 0.0  # priced as free: the round starts, and the fence (passed) cuts it
    with training_fence(time.time() - 1.0):
        record = add_seed_rounds(task, trainer, final, until=time.perf_counter() + 600)
    assert record["rounds"] == 0 and "cut" in record["stopped"]
    assert [n_networks(e) for e in final.moe.experts] == [2, 2]


def test_a_budgeted_fit_spends_what_its_final_stage_left_on_seeds_and_saves_them(tmp_path):
    import pandas as pd
    from helpers import TINY_SEARCH

    import sgem

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "label": (x.sum(1) > 0).astype(int)})
    model = sgem.fit(
        frame,
        target="label",
        out=tmp_path / "run",
        progress=False,
        config={"search": {**TINY_SEARCH, "n_iterations": 1}},
        time_budget=20,
        n_clusters=4,
        executor="inline",
    )
    rounds = model.result["seed_rounds"]
    assert rounds["rounds"] >= 1 and max(rounds["networks_per_expert"]) > 1
    assert "round" in model.result["time_budget"]["why_it_ended"]
    assert model.result["clock"]["stage_seconds"]["seed_rounds"] > 0
    from sgem.leaderboard.frame import stage_lines

    assert any(
        "more seeds of every expert" in line for line in stage_lines(model.result["leaderboard"])
    )
    again = sgem.load(tmp_path / "run")
    np.testing.assert_allclose(again.predict_proba(frame), model.predict_proba(frame))


def test_the_rounds_leave_the_leaderboard_the_time_its_cells_take(setup, monkeypatch):
    """What the leaderboard trains after the rounds is priced from its own cells, each timed
    on a few steps: its global networks and, where no tracking run left validation outputs,
    each expert's retrain on the training split (longer trainings take longer; none for a
    tracked length). The rounds end that much (and the classical references not fitted yet)
    before the training's end, whatever the plan reserved."""
    from types import SimpleNamespace

    import sgem.leaderboard as leaderboard
    from sgem.final.calibration import retrains
    from sgem.leaderboard import after_rounds_seconds
    from sgem.run.budget import LEADERBOARD_SAFETY, seed_rounds_end

    task, trainer, _ = setup
    final = _final(setup, "fixed")
    assert retrains(task, final, "fixed")
    short = after_rounds_seconds(task, trainer, final, 5, None, "fixed")
    long = after_rounds_seconds(task, trainer, final, 5000, None, "fixed")
    assert 0 < short["networks"] < long["networks"] and np.isfinite(long["networks"])
    assert short["retrains"] > 0 and np.isfinite(short["retrains"])  # its own steps (8)
    assert long["retrains"] == pytest.approx(short["retrains"], rel=1.0)  # not the networks'
    tracked = _final(setup, "validation-warm-norefit")
    length = "validation-warm-norefit"
    assert after_rounds_seconds(task, trainer, tracked, 5, None, length)["retrains"] == 0.0
    now = time.perf_counter()
    plan = {"_training_ends": now + 60.0, "references_seconds_estimate": 7.0}
    protocol = SimpleNamespace(final_steps=5, final_epochs=None, length_name="fixed")
    for networks, retrain, done in ((4.0, 2.0, True), (20.0, 0.0, True), (20.0, 2.0, False)):
        priced = {"networks": networks, "retrains": retrain}
        monkeypatch.setattr(leaderboard, "after_rounds_seconds", lambda *a, p=priced: p)
        got = seed_rounds_end(plan, task, trainer, final, protocol, references_done=done)
        after = LEADERBOARD_SAFETY * (networks + retrain) + (0.0 if done else 7.0)
        assert got - now == pytest.approx(60.0 - after)
        assert plan["leaderboard_retrains_seconds"] == retrain
