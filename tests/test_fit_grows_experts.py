"""A budgeted table fit without --experts chooses K on the holdout within its budget: K grows
from 2 while one of the last two Ks is the best so far and the budget left holds the next."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers import TINY_SEARCH

import sgem
from sgem.run.experts_choice import _why_not_grow, grows_experts


def _row(k: int, loss: float, seconds: float = 10.0, m: int = 20) -> dict:
    return {"n_experts": k, "validation_loss": loss, "seconds": seconds, "n_clusters": m}


def test_growth_goes_on_while_validation_gains_and_the_budget_holds_the_next_k() -> None:
    assert _why_not_grow([_row(2, 0.5)], left=100.0, k=3) is None
    assert _why_not_grow([_row(2, 0.5), _row(3, 0.4)], left=100.0, k=4) is None
    # one K that did not gain is not enough to stop (GROW_PATIENCE): a larger one may
    assert _why_not_grow([_row(2, 0.5), _row(3, 0.5)], left=100.0, k=4) is None
    stalled = [_row(2, 0.5), _row(3, 0.6), _row(4, 0.5)]
    assert "K=3 and K=4 did not gain on validation over K=2" in _why_not_grow(stalled, 100.0, 5)
    assert _why_not_grow([*stalled[:2], _row(4, 0.45)], left=100.0, k=5) is None
    # K=2 took 10 s: K=3 starts with at least 0.5 * 10 * 3 / 2 = 7.5 s
    assert "needs about 8 s" in _why_not_grow([_row(2, 0.5)], left=7.0, k=3)
    assert _why_not_grow([_row(2, 0.5)], left=7.6, k=3) is None
    # ... less the 4 s of references the next run reuses: 0.5 * 6 * 3 / 2 = 4.5 s
    reusing = {**_row(2, 0.5), "reused_seconds": 4.0}
    assert "needs about 4 s" in _why_not_grow([reusing], left=4.0, k=3)
    assert _why_not_grow([reusing], left=4.6, k=3) is None
    assert "half of the 4 clusters" in _why_not_grow([_row(2, 0.5, m=4)], left=100.0, k=3)


def test_ks_are_compared_on_the_holdout_where_every_k_has_one() -> None:
    """Validation scored the search-stage networks each K chose among; the holdout scores
    the final MoE as saved. Growing stops where the holdout stops gaining, even if
    validation still gains; without a holdout score anywhere, validation decides."""
    from sgem.run.experts_choice import _choice_key

    gains_on_val = [{**_row(2, 0.5), "test_nll": 0.3}, {**_row(3, 0.4), "test_nll": 0.35}]
    assert _choice_key(gains_on_val) == "test_nll"
    worse = {**_row(4, 0.3), "test_nll": 0.4}
    assert "did not gain on the holdout" in _why_not_grow([*gains_on_val, worse], 100.0, k=5)
    gains_on_holdout = [{**_row(2, 0.4), "test_nll": 0.3}, {**_row(3, 0.5), "test_nll": 0.2}]
    assert _why_not_grow(gains_on_holdout, left=100.0, k=4) is None
    floored = [{**row, "choice_nll": 0.1} for row in gains_on_holdout]
    assert _choice_key(floored) == "choice_nll"  # (test_nll: runs from before it)
    one_without = [gains_on_holdout[0], {**_row(3, 0.5), "test_nll": None}]
    assert _choice_key(one_without) == "validation_loss"
    worse = {**_row(4, 0.6), "test_nll": 0.1}
    assert "did not gain on validation" in _why_not_grow([*one_without, worse], 100.0, k=5)


def test_the_smallest_k_within_one_paired_standard_error_of_the_best_is_saved() -> None:
    """A larger K must beat a smaller one on the same holdout rows by more than one standard
    error of their per-row difference; without every K's rows the best K wins."""
    from sgem.run.experts_choice import _chosen

    rng = np.random.default_rng(0)
    hard = rng.exponential(0.1, 400)  # every K's rows share this difficulty
    k2, k3 = hard + 0.2, hard + rng.normal(0.0, 0.05, 400)

    def report(rows):
        return [{**_row(k, 0.5), "choice_nll": float(r.mean())} for k, r in enumerate(rows, 2)]

    assert _chosen(report([k2, k3]), "choice_nll", [k2, k3]) == 1  # K=3 clearly ahead
    e = rng.normal(0.0, 0.02, 400)
    e -= e.mean()  # per-row noise between two Ks: their paired difference's se is 0.001
    close = k3 - 0.0005 + e  # K=4 ahead of K=3 by half a paired se
    rows = report([k2, k3, close])
    assert _chosen(rows, "choice_nll", [k2, k3, close]) == 1
    assert rows[1]["paired_difference_to_best"] == pytest.approx(0.0005)
    assert rows[2]["paired_difference_to_best"] == 0.0
    clear = k3 - 0.004 + e  # ... by four: within the rows' own spread, yet a real gain
    assert k3.std() / np.sqrt(400) > 0.004
    assert _chosen(report([k2, k3, clear]), "choice_nll", [k2, k3, clear]) == 2
    assert _chosen(report([k2, k3, close]), "choice_nll", [k2, k3, None]) == 2  # (no rows)
    assert _chosen(report([k2, k3, close]), "choice_nll") == 2
    assert _chosen(report([k2, k3]), "validation_loss", [k2, k3]) == 0  # (both 0.5: the first)


def test_one_certain_and_wrong_row_costs_the_k_choice_a_bounded_amount() -> None:
    """`choice_nll` floors a classifier's probabilities (`CHOICE_FLOOR` of the uniform), so
    a row where an expert is certain and wrong costs about -log(floor / classes), not 250;
    a regression's is its plain NLL."""
    import torch

    from sgem.moe.scoring import CHOICE_FLOOR, choice_nll
    from sgem.train.losses import per_sample_nll

    y = np.zeros(100, dtype=np.int64)
    logits = torch.tensor([[8.0, 0.0, 0.0]]).repeat(100, 1)
    logits[0] = torch.tensor([-250.0, 0.0, 0.0])
    plain = torch.nn.functional.cross_entropy(logits, torch.as_tensor(y)).item()
    rows = choice_nll(logits, y, "cross_entropy")
    assert plain > 2.4 and rows.mean() < 0.1 and rows.shape == (100,)
    assert rows[0] == pytest.approx(-np.log(CHOICE_FLOOR / 3), rel=1e-3)
    params = torch.tensor([[0.0, 1.0, 5.0]]).repeat(4, 2, 1)  # (loc, scale, df) per step
    target = np.zeros((4, 2))
    expected = per_sample_nll(params, torch.as_tensor(target), "student_t").mean().item()
    assert choice_nll(params, target, "student_t").mean() == pytest.approx(expected)


def test_only_a_budgeted_table_fit_with_k_left_open_grows(tmp_path) -> None:
    from sgem.run.fit_setup import fit_config

    path = tmp_path / "t.csv"
    pd.DataFrame({"a": np.arange(40.0), "label": ["p", "n"] * 20}).to_csv(path, index=False)

    def grows(**options) -> bool:
        return grows_experts(fit_config(path, target="label", **options))

    assert grows(time_budget=60)
    assert not grows(time_budget=60, n_experts=3)
    assert not grows()
    assert not grows(time_budget=60, config={"search": {"n_experts": 2}})
    series = {"task": {"name": "series"}, "time_budget": 60.0, "experts_at_most_clusters": True}
    assert not grows_experts(series)


def test_a_budgeted_fit_tries_a_larger_k_and_keeps_the_better_one(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-4, 1, (300, 2)), rng.normal(4, 1, (300, 2))]
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1]})
    frame["label"] = np.where(x[:, 0] > x[:, 1], "p", "n")
    path = tmp_path / "train.csv"
    frame.to_csv(path, index=False)
    config = {"search": {**TINY_SEARCH, "n_iterations": 1}}
    out = tmp_path / "run"
    model = sgem.fit(
        path,
        target="label",
        out=out,
        progress=False,
        config=config,
        time_budget=120,
        n_clusters=6,
        executor="inline",
    )
    auto = model.result["experts_auto"]
    tried = [row["n_experts"] for row in auto["candidates"]]
    assert tried[:2] == [2, 3] and auto["chosen"] in tried  # K=4 > 6 // 2 is never tried
    assert "chosen on the holdout" in model.result["time_budget"]["why_it_ended"]
    best = min(auto["candidates"], key=lambda row: row["choice_nll"])
    assert best["paired_difference_to_best"] == 0.0
    within = [
        r["n_experts"]
        for r in auto["candidates"]
        if r["paired_difference_to_best"] <= r["paired_difference_se"]
    ]
    assert auto["chosen"] == min(within) and auto["chosen_on"].startswith("the holdout")
    saved = json.loads((out / "result.json").read_text())
    assert saved["experts_auto"]["chosen"] == auto["chosen"]
    # the winner's per-row holdout NLL lies beside its result.json, as in every run
    from sgem.run.rundir import RunDirectory

    rows = RunDirectory(out).holdout_nll()
    assert rows is not None and rows.mean() == pytest.approx(saved["choice_nll"])
    from sgem.cli.commands import experts_lines  # what `sgem fit` prints of the choice

    printed = experts_lines(auto)
    assert printed[0].startswith("  K=2: validation loss") and "against the best" in printed[0]
    assert printed[-1] == f"  chose K={auto['chosen']} on {auto['chosen_on']}"
    # the scikit-learn references do not depend on K: K = 3's run reuses K = 2's
    first, second = auto["candidates"][:2]
    assert first["reused_seconds"] > 0 and second["reused_seconds"] == 0.0
    stages = json.loads((out / "experts-3" / "result.json").read_text())["clock"]["stage_seconds"]
    assert "scikit_learn_references" not in stages
    assert model.spec.n_experts >= 1 and (out / "config.yaml").exists()  # out: K=2's run


def test_shared_references_are_reused_only_on_the_same_rows(monkeypatch) -> None:
    """Within `shared_table_references` a second run on the same rows and seed gets copies of
    the first run's fitted references; other rows, another seed, or outside it: fitted."""
    from types import SimpleNamespace

    import sgem.run.early_references as early
    from sgem.data.task import Split
    from sgem.run.budget_clock import BudgetClock
    from sgem.space.tabular import TabularSpace

    fits: list[int] = []

    class Counted:
        def fit_evaluate(self, task, budget):
            fits.append(budget.seed)
            return SimpleNamespace(val_output=np.zeros(1), seed=budget.seed)

    monkeypatch.setattr(early, "reference_methods", lambda space: [Counted()])

    def task(shift: float):
        split = Split(np.full((4, 2), shift), np.zeros(4, dtype=np.int64), np.zeros(4, int))
        return SimpleNamespace(name="table", train=split, val=split, test=split)

    space, clock = TabularSpace(), BudgetClock(None, None)
    with early.shared_table_references():
        first = early.table_references(task(0.0), space, 0, 100, clock)
        again = early.table_references(task(0.0), space, 0, 100, clock)
        assert len(fits) == 1 and again is not first and again[0].seed == first[0].seed
        early.table_references(task(1.0), space, 0, 100, clock)  # other rows
        early.table_references(task(0.0), space, 1, 100, clock)  # another seed
        assert len(fits) == 3
    early.table_references(task(0.0), space, 0, 100, clock)  # not shared any more
    assert len(fits) == 4


def test_a_k_whose_search_left_an_expert_without_a_cluster_is_scored_on_the_used_ones() -> None:
    """K = 3 whose search routed every cluster to two experts: result.json holds the two
    used regions' losses and a routing over them; the choice between Ks weighs them by
    their clusters' sizes (it raised an IndexError, ending a budgeted digits fit)."""
    from sgem.run.experts_choice import _validation_loss

    result = {
        "region_val_losses": [0.1, 0.4],
        "routing": [1, 0, 0, 1],
        "cluster_sizes": [10, 20, 30, 40],
    }
    assert _validation_loss(result) == pytest.approx((0.1 * 50 + 0.4 * 50) / 100)
    result["region_val_losses"] = [None, 0.4]  # a region without validation samples
    assert _validation_loss(result) == pytest.approx(0.4)
