"""The leaderboard at the end of every fit: members scored on validation (out of sample)
and the holdout, the greedy ensemble, selective routing, and the saved model it leads to."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import TINY_SEARCH

import sgem
from sgem.cli import main
from sgem.data import make_toy_task
from sgem.leaderboard import greedy_ensemble, leaderboard_frame, mixture_nll, selective_routing

SAVED = "saved model (selective routing)"


def _logits(p: np.ndarray) -> np.ndarray:
    return np.log(np.stack([1 - p, p], axis=1))


def _binary_table(seed: int, train: int, val: int, test: int):
    """A user's two-class table task (random rows) as `combine` reads one."""
    from types import SimpleNamespace

    from sgem.data.task import Split

    rng = np.random.default_rng(seed)

    def split(n: int) -> Split:
        return Split(rng.normal(size=(n, 2)), rng.integers(0, 2, n), np.zeros(n, dtype=int))

    task = SimpleNamespace(
        name="table", train=split(train), val=split(val), test=split(test), loss="cross_entropy"
    )
    task.n_classes, task.meta = 2, {}
    return task, rng


def _right(y: np.ndarray, p: float) -> np.ndarray:
    """Logits giving the true class probability `p` (per row where `p` is an array)."""
    return _logits(np.where(y == 1, p, 1 - p))


def test_the_greedy_ensemble_never_loses_to_its_best_member() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    good = _logits(np.clip(0.8 * y + 0.1 + rng.normal(0, 0.05, 400), 0.01, 0.99))
    other = _logits(np.clip(0.6 * y + 0.2 + rng.normal(0, 0.2, 400), 0.01, 0.99))
    noise = _logits(np.full(400, 0.5))
    outs = [noise, good, other]
    w = greedy_ensemble(outs, y, "cross_entropy")
    assert w.sum() == pytest.approx(1.0) and w[1] > w[0]
    best_single = min(mixture_nll([o], np.ones(1), y, "cross_entropy") for o in outs)
    assert mixture_nll(outs, w, y, "cross_entropy") <= best_single + 1e-12


def test_a_mixture_of_student_t_forecasts_is_no_worse_than_its_members_mean() -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(0, 1, (50, 4))
    a = np.stack([y + 0.3, np.full_like(y, 1.0), np.full_like(y, 5.0)], -1)
    b = np.stack([y - 0.5, np.full_like(y, 0.5), np.full_like(y, 5.0)], -1)
    mixed = mixture_nll([a, b], np.array([0.5, 0.5]), y, "student_t")
    each = [mixture_nll([o], np.ones(1), y, "student_t") for o in (a, b)]
    assert mixed <= np.mean(each) + 1e-12


def test_a_regressions_combination_is_weighed_by_the_squared_error_of_its_mean() -> None:
    """A skewed target (0 on 90 % of the rows, 10 on the rest): a sharp Student-t at 0 has
    the better log density, a wide Normal at the mean (1) the lower squared error. A
    regression is judged by the RMSE of what `predict` gives, the mixture's mean."""
    y = np.r_[np.zeros(90), np.full(10, 10.0)]
    at_mean = np.stack([np.ones(100), np.full(100, 3.0), np.full(100, 1000.0)], -1)
    sharp = np.stack([np.zeros(100), np.full(100, 0.01), np.full(100, 2.0)], -1)
    by_density = greedy_ensemble([sharp, at_mean], y, "student_t")
    by_point = greedy_ensemble([sharp, at_mean], y, "student_t", point=True)
    assert by_density[0] > 0.5  # the log density prefers the sharp member
    np.testing.assert_array_equal(by_point, [0.0, 1.0])  # the mean's error is least at 1


def test_a_regression_combination_predicts_its_mean_and_old_ones_their_median() -> None:
    from sklearn.linear_model import Ridge

    from sgem.moe.combination import Combination
    from sgem.moe.portable import export

    ridge = Ridge().fit(np.arange(8.0)[:, None], np.arange(8.0))
    member, arrays = export(ridge)
    arrays = {f"m0.{k}": v for k, v in arrays.items()}
    state = {"weights": [0.75, 0.25], "names": ["ridge"], "scales": [1.0], "loss": "student_t"}
    saved_before = Combination.from_state(state | {"members": [member]}, arrays)
    assert saved_before.point == "median"  # a model saved without the field: as before
    with pytest.raises(ValueError, match="point must be one of"):
        Combination.from_state(state | {"members": [member], "point": "mode"}, arrays)
    mean = Combination.from_state(state | {"members": [member], "point": "mean"}, arrays)
    outs = [np.array([[[0.0, 0.01, 1000.0]]]), np.array([[[4.0, 1.0, 1000.0]]])]
    assert mean.point_of(outs)[0, 0] == pytest.approx(1.0)  # 0.75 x 0 + 0.25 x 4
    assert abs(saved_before.point_of(outs)[0, 0]) < 0.1  # the sharp member's mass


def test_selective_routing_keeps_an_expert_only_where_it_clearly_wins() -> None:
    task = make_toy_task(0)
    n = len(task.val)
    y = task.val.y
    truth = np.eye(task.n_classes)[y]
    sharp = np.log(np.clip(0.9 * truth + 0.1 / task.n_classes, 1e-9, 1))
    flat = np.log(np.full((n, task.n_classes), 1.0 / task.n_classes))
    winning = np.isin(task.val.cluster, [0, 1])  # the MoE wins on clusters 0 and 1 only
    moe = np.where(winning[:, None], sharp, flat)
    glob = np.log(np.clip(0.6 * truth + 0.4 / task.n_classes, 1e-9, 1))
    has = np.ones(n, dtype=bool)
    assignment = np.zeros(task.n_clusters, dtype=int)
    fallback, evidence = selective_routing(task, assignment, moe, glob, has)
    kept = sorted(set(range(task.n_clusters)) - set(fallback))
    assert kept == [c for c in (0, 1) if (task.val.cluster == c).sum() >= 2]
    assert evidence["0"]["keeps_expert"] and not evidence["2"]["keeps_expert"]


def test_every_table_fit_ends_with_a_leaderboard_and_saves_no_worse_on_validation(
    tmp_path,
) -> None:
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-3, 1, (300, 2)), rng.normal(3, 1, (300, 2))]
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1]})
    # each cloud split at its own centre, by the second feature
    frame["label"] = np.where(x[:, 1] > np.where(x[:, 0] < 0, -3.0, 3.0), "p", "n")
    out = tmp_path / "run"
    model = sgem.fit(
        frame,
        target="label",
        out=out,
        progress=False,
        config={"search": TINY_SEARCH},
        n_clusters=4,
        executor="inline",
    )
    board = model.result["leaderboard"]
    names = [r["model"] for r in board["rows"]]
    combined = names[-1] == "saved model (combination)"
    routed = "selective-routing MoE (before the combination)" if combined else SAVED
    assert names[0] == "sgem MoE (searched)" and names[-1] in (SAVED, "saved model (combination)")
    assert {"logistic regression", "gradient boosting"} <= set(names)
    assert all("validation" in r and "holdout" in r for r in board["rows"]), board["rows"]
    assert any(n.startswith("global network (") for n in names)
    rows = {r["model"]: r for r in board["rows"]}
    saved = rows[routed]["validation"]["nll"]
    searched = rows["sgem MoE (searched)"]["validation"]["nll"]
    assert saved <= searched + 1e-9  # a cluster only leaves its expert for a better network
    frame = model.leaderboard()
    assert {"model", "val_nll", "holdout_nll"} <= set(frame.columns)
    assert frame["val_nll"].dropna().is_monotonic_increasing, frame.to_string()
    if combined and "refitted on all" in rows["saved model (combination)"]["note"]:
        # the saved members saw the holdout: the card carries their scores without it
        assert model.spec.metrics["test_nll"] == rows["saved model (combination)"]["holdout"]["nll"]
    else:
        assert model.evaluate(model_split(out))["test_nll"] == model.spec.metrics["test_nll"]
    assert "leaderboard (validation decides" in model.summary()
    assert main(["leaderboard", str(out), "--csv", str(tmp_path / "lb.csv")]) == 0
    assert pd.read_csv(tmp_path / "lb.csv")["model"].tolist() == frame["model"].tolist()


def model_split(run):
    import yaml

    from sgem.run.pipeline import build_task_from_config

    cfg = yaml.safe_load((run / "config.yaml").read_text())["run"]
    return build_task_from_config(cfg["task"], cfg["seed"]).test


def test_a_model_without_a_leaderboard_says_so() -> None:
    assert leaderboard_frame(None).empty
    from sgem.leaderboard import leaderboard_lines

    assert leaderboard_lines({"skipped": "no validation"}) == ["leaderboard: no validation"]


def test_a_clearly_better_moe_keeps_its_experts_unless_the_network_clearly_wins() -> None:
    task = make_toy_task(0)
    n, y = len(task.val), task.val.y
    truth = np.eye(task.n_classes)[y]
    sharp = np.log(np.clip(0.9 * truth + 0.1 / task.n_classes, 1e-9, 1))
    weak = np.log(np.clip(0.5 * truth + 0.5 / task.n_classes, 1e-9, 1))
    network_wins = np.isin(task.val.cluster, [3])  # the network is better on cluster 3 only
    moe = np.where(network_wins[:, None], weak, sharp)
    glob = np.where(network_wins[:, None], sharp, weak)
    fallback, evidence = selective_routing(
        task, np.zeros(task.n_clusters, dtype=int), moe, glob, np.ones(n, dtype=bool)
    )
    assert evidence["overall"]["default"] == "expert"
    assert fallback == [3]


def test_a_combination_with_a_scikit_learn_member_is_saved_and_reloads(tmp_path) -> None:
    """A linear rule in 8 features, where logistic regression is hard to beat: the saved
    model combines it with the MoE (weights on validation), its members as plain arrays in
    members.safetensors; a reloaded model predicts and scores as the saved one, whose
    members were refitted on every row (the holdout's too: there it scores above the
    run's holdout scores, which were of the members fitted without it); a changed members
    file is refused."""
    from sgem.errors import SgemUserError

    rng = np.random.default_rng(3)
    x = rng.normal(size=(800, 8))
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(8)])
    frame["label"] = np.where(x @ np.linspace(1, -1, 8) + 0.3 * rng.normal(size=800) > 0, "a", "b")
    out = tmp_path / "run"
    search = {**TINY_SEARCH, "train": {"steps": 5}, "final_steps": 5}
    model = sgem.fit(
        frame,
        target="label",
        out=out,
        progress=False,
        config={"search": search},
        n_clusters=4,
        executor="inline",
    )
    assert model.combination is not None, model.result["leaderboard"]["shipped"]
    assert (out / "model" / "members.safetensors").is_file()
    assert model.combination.names and model.combination.weights.sum() == pytest.approx(1.0)
    proba = model.predict_proba(frame.drop(columns="label").head(50))
    assert proba.shape == (50, 2) and np.allclose(proba.sum(1), 1.0)
    reloaded = sgem.load(out)
    assert np.array_equal(reloaded.predict_proba(frame.head(50)), proba)
    holdout = model_split(out)
    assert reloaded.evaluate(holdout)["test_nll"] == model.evaluate(holdout)["test_nll"]
    combined = model.result["leaderboard"]["rows"][-1]
    assert combined["holdout"]["nll"] == model.spec.metrics["test_nll"]
    assert "refitted on all 800 rows" in combined["note"]
    assert "a combination (" in model.result["leaderboard"]["shipped"]["model"]
    members = out / "model" / "members.safetensors"
    members.write_bytes(members.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(SgemUserError, match="checksum"):
        sgem.load(out)


def test_a_table_whose_budget_ended_before_the_moes_validation_fits_is_still_compared(
    tmp_path, monkeypatch
) -> None:
    """The scikit-learn references are fitted before the search, so a budget that left no
    time for the MoE's validation fits still compares it with them on the holdout, and a
    far better reference is saved (a 48 000-row table's saved MoE had 1.7x gradient
    boosting's RMSE, the leaderboard skipped)."""
    import sgem.leaderboard.contest as contest

    monkeypatch.setattr(contest, "fence_passed", lambda: True)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(600, 4))
    frame = pd.DataFrame(x, columns=list("abcd"))
    frame["y"] = 3 * x[:, 0] - 2 * x[:, 1] + 0.1 * rng.normal(size=600)  # linear: ridge wins
    search = {**TINY_SEARCH, "train": {"steps": 2}, "final_steps": 2}
    model = sgem.fit(
        frame, target="y", out=tmp_path / "run", progress=False, config={"search": search}
    )
    lb = model.result["leaderboard"]
    assert "skipped" not in lb and "holdout alone" in lb["rule"]
    names = {r["model"] for r in lb["rows"]}
    assert {"ridge regression", "gradient boosting"} <= names
    assert model.combination is not None and "ridge regression" in model.combination.names
    assert model.combination.point == "mean"  # weights for its squared error: RMSE
    rmse = np.sqrt(np.mean((model.predict(frame[list("abcd")]) - frame["y"]) ** 2))
    assert rmse < 0.5  # the MoE trained two steps alone is far off (std of y: 3.6)
    assert "scikit_learn_references" in model.result["clock"]["stage_seconds"]


def test_a_user_tables_members_are_weighed_on_every_rows_out_of_fold_outputs() -> None:
    """Member A is better on the 800 out-of-fold rows, B on the 60 holdout rows by chance:
    greedy selection on the holdout alone would give B most of the weight, the two-step
    rule gives A its shares from every row, and the MoE (useless here) no weight; an MoE
    right on 59 of the 60 holdout rows earns weight, but not from a holdout of fewer than
    `MIN_HOLDOUT_ROWS` rows."""
    from types import SimpleNamespace

    from sgem.data.task import Split
    from sgem.leaderboard.table_members import OUT_OF_FOLD
    from sgem.leaderboard.table_weights import MIN_HOLDOUT_ROWS, _members_then_moe
    from sgem.methods.result import MethodResult

    rng = np.random.default_rng(0)

    def split(n: int) -> Split:
        return Split(np.zeros((n, 1)), rng.integers(0, 2, n), np.zeros(n, dtype=int))

    task = SimpleNamespace(train=split(600), val=split(200), test=split(60), loss="cross_entropy")
    rows = np.r_[task.train.y, task.val.y]

    def member(y: np.ndarray, right: float) -> np.ndarray:
        return _logits(np.where(y == 1, right, 1 - right))

    a = MethodResult("A", 0, extra={OUT_OF_FOLD: member(rows, 0.8)})
    b = MethodResult("B", 0, extra={OUT_OF_FOLD: member(rows, 0.6)})
    holdout = [_logits(np.full(60, 0.5)), member(task.test.y, 0.6), member(task.test.y, 0.8)]
    only_holdout = greedy_ensemble(holdout[1:], task.test.y, "cross_entropy")
    assert only_holdout[1] > only_holdout[0]  # the holdout alone prefers B
    w = _members_then_moe(task, holdout, [a, b])
    assert w.sum() == pytest.approx(1.0) and w[0] == 0.0 and w[1] > w[2]
    right = np.where(np.arange(60) == 0, 0.3, 0.97)
    clear = _logits(np.where(task.test.y == 1, right, 1 - right))
    assert _members_then_moe(task, [clear, *holdout[1:]], [a, b])[0] > 0.5
    few = MIN_HOLDOUT_ROWS - 1
    cut = Split(task.test.x[:few], task.test.y[:few], task.test.cluster[:few])
    small = SimpleNamespace(**{**vars(task), "test": cut})
    outs = [o[:few] for o in (clear, *holdout[1:])]
    w = _members_then_moe(small, outs, [a, b])
    assert w[0] == 0.0 and w.sum() == pytest.approx(1.0)


def test_a_saved_network_with_out_of_fold_outputs_is_weighed_on_every_row() -> None:
    """A network right on 59 of 60 holdout rows by chance but no better than a coin on the
    800 others: on the holdout it takes most of the weight; given its out-of-fold outputs,
    member A (right 80 % of the time everywhere) does."""
    from types import SimpleNamespace

    from sgem.data.task import Split
    from sgem.leaderboard.table_members import OUT_OF_FOLD
    from sgem.leaderboard.table_weights import table_weights
    from sgem.methods.result import MethodResult

    rng = np.random.default_rng(1)

    def split(n: int) -> Split:
        return Split(np.zeros((n, 1)), rng.integers(0, 2, n), np.zeros(n, dtype=int))

    task = SimpleNamespace(train=split(600), val=split(200), test=split(60), loss="cross_entropy")
    rows = np.r_[task.train.y, task.val.y]

    def member(y: np.ndarray, right) -> np.ndarray:
        return _logits(np.where(y == 1, right, 1 - right))

    a = MethodResult("A", 0, extra={OUT_OF_FOLD: member(rows, 0.8)})
    lucky = member(task.test.y, np.where(np.arange(60) == 0, 0.3, 0.97))
    holdout = [lucky, member(task.test.y, 0.8)]
    w_holdout, _, judged = table_weights(task, holdout, [a], None)
    assert w_holdout[0] > 0.5 and judged is None
    coin = member(rows, np.where(rng.random(800) < 0.5, 0.9, 0.1))
    w, fit_on, judged = table_weights(task, holdout, [a], coin)
    assert w[1] > 0.8 and fit_on.startswith("every row")
    assert judged is not None and len(judged[1]) == 860


def test_a_saved_network_is_not_weighed_on_fewer_rows_than_a_holdout_needs() -> None:
    """A network right on every row beside a member right on 80 %: on 60 rows it takes the
    weight; on fewer than `MIN_HOLDOUT_ROWS` in all it takes none (too few rows to judge it,
    as the MoE on a small holdout)."""
    from types import SimpleNamespace

    from sgem.data.task import Split
    from sgem.leaderboard.table_members import OUT_OF_FOLD
    from sgem.leaderboard.table_weights import MIN_HOLDOUT_ROWS, table_weights
    from sgem.methods.result import MethodResult

    rng = np.random.default_rng(2)

    def weights(rows: int) -> np.ndarray:
        n_train, n_val = rows // 2, rows // 4
        sizes = (n_train, n_val, rows - n_train - n_val)
        splits = [Split(np.zeros((n, 1)), rng.integers(0, 2, n), np.zeros(n, int)) for n in sizes]
        task = SimpleNamespace(train=splits[0], val=splits[1], test=splits[2], loss="cross_entropy")
        seen = np.r_[task.train.y, task.val.y]

        def member(y: np.ndarray, right: float) -> np.ndarray:
            return _logits(np.where(y == 1, right, 1 - right))

        a = MethodResult("A", 0, extra={OUT_OF_FOLD: member(seen, 0.8)})
        holdout = [member(task.test.y, 0.95), member(task.test.y, 0.8)]
        return table_weights(task, holdout, [a], member(seen, 0.95))[0]

    assert weights(60)[0] > 0.5
    assert weights(MIN_HOLDOUT_ROWS - 10)[0] == 0.0


def test_no_combination_saves_the_moe_and_says_so(tmp_path) -> None:
    """`sgem fit --no-combination` on the table whose saved model is otherwise a combination
    (above): the MoE is saved, the leaderboard says the combination was off, the run config
    keeps it, and the model is one ONNX export can serve."""
    import json

    import yaml

    from sgem.export.onnx_export import kind_of

    rng = np.random.default_rng(3)
    x = rng.normal(size=(800, 8))
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(8)])
    frame["label"] = np.where(x @ np.linspace(1, -1, 8) + 0.3 * rng.normal(size=800) > 0, "a", "b")
    frame.to_csv(tmp_path / "t.csv", index=False)
    search = {**TINY_SEARCH, "train": {"steps": 5}, "final_steps": 5}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"search": search}))
    out = tmp_path / "run"
    argv = ["fit", str(tmp_path / "t.csv"), "--target", "label", "--clusters", "4"]
    argv += ["--config", str(tmp_path / "c.yaml"), "--out", str(out), "--quiet"]
    assert main([*argv, "--no-combination"]) == 0
    model = sgem.load(out)
    assert model.combination is None and not (out / "model" / "members.safetensors").exists()
    board = json.loads((out / "result.json").read_text())["leaderboard"]
    assert board["combination"].startswith("off")
    assert "combination: off" in model.summary()
    assert yaml.safe_load((out / "config.yaml").read_text())["run"]["combine"] is False
    assert kind_of(model) == "classifier"


def test_the_shipped_summary_names_the_network_member_as_what_it_is() -> None:
    """A combination whose network member routes every cluster to the global network calls
    it the global network, not "MoE"; a partly routed MoE says how many clusters left it."""
    from types import SimpleNamespace

    from sgem.leaderboard.contest import _shipped_summary

    row = {"model": "saved", "kind": "sgem", "validation": {"nll": 0.1}}
    task = SimpleNamespace(n_clusters=4)
    mix = (None, {"weights_by_name": {"MoE": 0.25, "logistic regression": 0.75}})
    alone = _shipped_summary(row, [row], [0, 1, 2, 3], task, mix)["model"]
    assert alone == "a combination (global network 0.25, logistic regression 0.75)"
    partly = _shipped_summary(row, [row], [1, 3], task, mix)["model"]
    assert partly == (
        "a combination (MoE 0.25, logistic regression 0.75), the MoE with 2 of 4 clusters "
        "routed to the global network"
    )
    assert _shipped_summary(row, [row], [], task, mix)["model"].startswith("a combination (MoE")
    assert _shipped_summary(row, [row], [], task)["model"] == "the searched MoE"


def test_the_fallback_network_is_not_listed_as_missing_from_the_saved_model() -> None:
    """Where every cluster goes to the global network, that network is in the saved model:
    it is not among the members "better on validation, yet not in the saved model"."""
    from types import SimpleNamespace

    from sgem.leaderboard.contest import _shipped_summary

    net = {"model": "global network (relu<0)", "kind": "network", "validation": {"nll": 0.01}}
    saved = {"model": "saved model (combination)", "kind": "sgem", "validation": {"nll": 0.02}}
    mix = (None, {"weights_by_name": {"MoE": 0.4, "logistic regression": 0.6}})
    task = SimpleNamespace(n_clusters=2)
    listed = _shipped_summary(saved, [net, saved], [0, 1], task, mix, {net["model"]})
    assert listed["better_on_validation"] == []
    assert _shipped_summary(saved, [net, saved], [0, 1], task, mix)["better_on_validation"] == [
        net["model"]
    ]


def test_a_small_tables_members_are_weighed_on_every_row_not_on_validation() -> None:
    """A 28-row holdout (wine's 142 rows) is below the holdout rule's 50, but the members'
    out-of-fold outputs cover every row: they are weighed there, and the MoE - flattering
    on the validation rows the search chose it on, a coin on new rows - gets no weight.
    (Decided on validation, the MoE was kept: one network shipped 3-5 points below
    logistic regression and gradient boosting on wine.)"""
    from sklearn.linear_model import LogisticRegression

    from sgem.leaderboard.combining import MIN_HOLDOUT_ROWS, combine
    from sgem.leaderboard.table_members import OUT_OF_FOLD
    from sgem.methods.result import Fitted, MethodResult

    task, rng = _binary_table(1, 100, 42, 28)
    assert len(task.test) < MIN_HOLDOUT_ROWS
    right = _right

    rows = np.r_[task.train.y, task.val.y]
    fitted = LogisticRegression().fit(task.train.x, task.train.y)
    member = MethodResult(
        "logistic regression",
        0,
        kind="scikit-learn",
        val_output=right(task.val.y, 0.85),
        test_output=right(task.test.y, 0.85),
        fitted=Fitted(estimator=fitted),
        extra={OUT_OF_FOLD: right(rows, 0.85)},
    )
    coin = np.where(rng.random(28) < 0.5, 0.9, 0.1)  # (confidently right or wrong)
    moe_val, moe_test = right(task.val.y, 0.97), right(task.test.y, coin)
    has = np.ones(len(task.val), dtype=bool)
    saved, row = combine(task, moe_val, moe_test, [member], has)
    assert saved is not None, "decided on validation, the MoE alone would be kept"
    assert saved[1]["weights_by_name"] == {"MoE": 0.0, "logistic regression": 1.0}
    assert row["note"].startswith("weights fit on the holdout (the MoE's; the members' out-of")


def test_the_saved_network_keeps_a_share_beside_the_members_only_where_it_clearly_gains() -> None:
    """Weighed on every row out of fold (`_network_gains`): a network whose errors are
    independent of ridge regression's halves the squared error of their mean and keeps its
    share; a near copy of ridge regression gains nothing on rows it was not fit on, whatever
    share greedy selection would give it."""
    from sgem.leaderboard.table_weights import _network_gains

    rng = np.random.default_rng(0)
    y = rng.normal(size=300)

    def student_t(loc: np.ndarray) -> np.ndarray:
        return np.stack([loc, np.ones(300), np.full(300, 30.0)], -1)

    ridge = student_t(y + rng.normal(size=300))
    independent = student_t(y + rng.normal(size=300))
    near_copy = student_t(ridge[:, 0] + 0.05 * rng.normal(size=300))
    assert _network_gains([independent, ridge], y, "student_t", point=True)
    assert not _network_gains([near_copy, ridge], y, "student_t", point=True)


@pytest.mark.parametrize("loss", ["cross_entropy", "student_t"])
def test_a_scikit_learn_member_is_fitted_on_a_seeded_sample_of_a_large_table(loss) -> None:
    """Given the most values a budget allows, a member is fitted on a seeded sample (on
    540 000 rows its fits ran past a whole 3-minute budget), still predicts every row asked
    of it, and gives no out-of-fold outputs (they would miss rows); without, every row."""
    from types import SimpleNamespace

    from sklearn.linear_model import LogisticRegression, Ridge

    from sgem.data.task import Split
    from sgem.leaderboard.table_members import _sklearn_outputs

    rng = np.random.default_rng(0)
    classes = loss == "cross_entropy"
    x = rng.normal(size=(30_000, 4))
    y = (x[:, 0] > 0).astype(int) if classes else x[:, :1] + rng.normal(0, 0.1, (30_000, 1))
    fit_on = Split(x, y, np.zeros(len(x), dtype=int))
    asked = Split(x[:50], y[:50], np.zeros(50, dtype=int))
    task = SimpleNamespace(loss=loss, n_classes=2 if classes else None)
    rows: list[int] = []

    class Recorded(LogisticRegression if classes else Ridge):  # type: ignore[misc]
        def fit(self, x, y):
            rows.append(len(y))
            return super().fit(x, y)

    values = 4 * 12_000 * (1 if classes else 6)
    (out,), _, _, oof = _sklearn_outputs(task, Recorded, fit_on, [asked], (0, values), True)
    assert max(rows) == 12_000 and oof is None and len(out) == 50 and np.isfinite(out).all()
    rows.clear()
    _sklearn_outputs(task, Recorded, fit_on, [asked], (0, None))
    assert max(rows) == 30_000


def test_a_sampled_scikit_learn_member_is_fitted_once_on_twice_the_rows() -> None:
    """Where a budget's cap samples a member's rows, one fit on a sample of the training split
    (twice the rows of each of the two fits it replaces) predicts validation and holdout, and
    is the member saved: on 540 000 rows the sample's size, not a refit on the validation
    rows, decided gradient boosting's accuracy."""
    from types import SimpleNamespace

    from sklearn.linear_model import LogisticRegression

    from sgem.data.task import Split
    from sgem.leaderboard.table_members import LinearModel
    from sgem.methods.budget import MethodBudget

    rng = np.random.default_rng(0)

    def split(n: int) -> Split:
        x = rng.normal(size=(n, 4))
        return Split(x, (x[:, 0] > 0).astype(int), np.zeros(n, dtype=int))

    task = SimpleNamespace(
        name="table", train=split(30_000), val=split(6_000), test=split(4_000),
        loss="cross_entropy", n_classes=2, meta={},
    )  # fmt: skip
    rows: list[int] = []

    class Recorded(LogisticRegression):
        def fit(self, x, y):
            rows.append(len(y))
            return super().fit(x, y)

    class Linear(LinearModel):
        def _maker(self, task, budget):
            return "logistic regression", Recorded, ""

    result = Linear().fit_evaluate(task, MethodBudget(reference_values=4 * 12_000))
    assert rows == [24_000], "one fit, on twice the 12 000 rows the cap gives a fit"
    assert result.val_output.shape == (6_000, 2) and result.test_output.shape == (4_000, 2)
    assert result.fitted.estimator.coef_.shape == (1, 4)
    rows.clear()
    Linear().fit_evaluate(task, MethodBudget(reference_values=None))
    assert rows[:2] == [30_000, 36_000], "unsampled: a fit on train, then on train + validation"


def test_an_moe_certain_and_wrong_on_one_row_keeps_its_weight_beside_the_members() -> None:
    """An MoE right and sure on 99 of 100 holdout rows, certain and wrong on one (an expert
    shown a class its clusters never had): the folds without that row would pick the MoE
    alone and the fold with it lose about 250 there. The members keep at least
    `MIN_MEMBERS_SHARE`, which bounds that row, so the MoE keeps most of the weight."""
    from types import SimpleNamespace

    from sgem.data.task import Split
    from sgem.leaderboard.table_members import OUT_OF_FOLD
    from sgem.leaderboard.table_weights import MIN_MEMBERS_SHARE, _members_then_moe
    from sgem.methods.result import MethodResult

    rng = np.random.default_rng(3)

    def split(n: int) -> Split:
        return Split(np.zeros((n, 1)), rng.integers(0, 2, n), np.zeros(n, dtype=int))

    task = SimpleNamespace(train=split(600), val=split(200), test=split(100), loss="cross_entropy")
    y = task.test.y
    rows = np.r_[task.train.y, task.val.y]
    a = MethodResult("A", 0, extra={OUT_OF_FOLD: _logits(np.where(rows == 1, 0.8, 0.2))})
    member = _logits(np.where(y == 1, 0.8, 0.2))
    sure = np.where(y == 1, 1.0, -1.0)[:, None] * np.array([-4.0, 4.0])  # right, p = 0.9997
    sure[0] = -125.0 * sure[0] / 4.0  # certain and wrong: NLL about 250
    w = _members_then_moe(task, [sure, member], [a])
    assert 0.5 < w[0] <= 1.0 - MIN_MEMBERS_SHARE + 1e-9 and w.sum() == pytest.approx(1.0)


def test_the_stages_show_the_measure_the_saved_model_is_chosen_on() -> None:
    """A regression's combination is weighed by the squared error of its mean: its NLL may
    rise while its RMSE (in the target's units) falls, and both are shown; a forecaster's
    combination has no NLL and is shown by its CRPS."""
    from sgem.leaderboard.frame import stage_lines

    def row(model: str, **validation) -> dict:
        return {"model": model, "kind": "sgem", "validation": validation}

    regression = {
        "target_std": 10.0,
        "rows": [
            row("sgem MoE (searched)", nll=0.03, rmse=0.48, crps=0.13),
            row("global network (a)", nll=0.04, rmse=0.45, crps=0.12),
            row("saved model (selective routing)", nll=0.04, rmse=0.45, crps=0.12),
            row("saved model (combination)", nll=1.36, rmse=0.40, crps=None),
        ],
    }
    lines = stage_lines(regression)
    assert "validation NLL and RMSE" in lines[0]
    combination = next(line for line in lines if "combination" in line)
    assert "(+1.3200)" in combination and "4.0000 (-0.5000)" in combination
    series = {
        "rows": [
            row("sgem MoE (searched)", nll=-1.9, rmse=0.1, crps=0.031),
            row("saved model (selective routing)", nll=-1.9, rmse=0.1, crps=0.031),
            row("saved model (combination)", rmse=0.1, crps=0.029),
        ]
    }
    lines = stage_lines(series)
    assert "validation NLL and CRPS" in lines[0]
    assert "-  " in lines[-1] and "0.0290 (-0.0020)" in lines[-1]


def test_an_moe_whose_final_training_was_cut_gets_no_weight_in_the_saved_combination() -> None:
    """Where the budget's fence cut the MoE's final training (`untrained_experts`), the
    combination weighs the members alone, however good the MoE's held-out outputs look
    (an untrained forecaster's scaled windows can look good where most targets are 0),
    and is saved without the test it must otherwise pass."""
    from sklearn.linear_model import LogisticRegression

    from sgem.final.moe_fit import MoEReport
    from sgem.leaderboard.board import greedy_ensemble
    from sgem.leaderboard.combining import combine, untrained_experts
    from sgem.methods.result import Fitted, MethodResult

    task, _ = _binary_table(2, 200, 80, 80)
    right = _right

    member = MethodResult(
        "logistic regression",
        0,
        kind="scikit-learn",
        val_output=right(task.val.y, 0.7),
        test_output=right(task.test.y, 0.7),
        fitted=Fitted(estimator=LogisticRegression().fit(task.train.x, task.train.y)),
    )
    moe_val, moe_test = right(task.val.y, 0.95), right(task.test.y, 0.95)
    has = np.ones(len(task.val), dtype=bool)
    outs = [moe_test, right(task.test.y, 0.7)]
    assert greedy_ensemble(outs, task.test.y, "cross_entropy")[0] == 1.0
    assert greedy_ensemble(outs, task.test.y, "cross_entropy", first=1).tolist() == [0.0, 1.0]
    assert combine(task, moe_val, moe_test, [member], has)[0] is None  # the MoE alone wins
    saved, row = combine(task, moe_val, moe_test, [member], has, with_moe=False)
    assert saved is not None
    assert saved[1]["weights_by_name"] == {"MoE": 0.0, "logistic regression": 1.0}
    assert "fence cut its final training" in row["note"]
    cut = {"0": {"steps": 1, "of": 100}, "1": {"steps": 1, "of": 100}}
    final = MethodResult(
        "sgem",
        0,
        assignment=np.array([0, 1, 1]),
        report=MoEReport(None, 0.0, [], 0.0, final_training_cut=cut),
    )
    assert untrained_experts(final) == [0, 1]
    assert untrained_experts(final, fallback=[0]) == [1]  # cluster 0 went to the global network
    assert untrained_experts(final, fallback=[0, 1, 2]) == []
