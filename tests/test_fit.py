"""`sgem fit` on the user's own files (a CSV with string labels, long-format series, an image
folder), then `sgem predict` on new data, as a new user would type it; bad inputs refused
before a run directory is claimed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import TINY_SEARCH

import sgem
from sgem.cli import main
from sgem.errors import SgemUserError
from sgem.run.budget import final_units, parse_duration, plan_search
from sgem.run.fit_setup import fit_config, infer_kind
from sgem.run.pipeline import resume_experiment
from sgem.search import SearchConfig

#: a seconds-long search (the same keys as configs/toy-smoke.yaml)
TINY = {"search": dict(TINY_SEARCH)}


@pytest.fixture
def table(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-4, 1, (300, 2)), rng.normal(4, 1, (300, 2))]
    label = np.where(x[:, 0] + x[:, 1] > 0, "yes", "no")
    frame = pd.DataFrame({"a": x[:, 0], "b": 100 * x[:, 1], "kind": rng.choice(["u", "v"], 600)})
    frame["label"] = label
    path = tmp_path / "train.csv"
    frame.to_csv(path, index=False)
    frame.drop(columns="label").head(9).to_csv(tmp_path / "new.csv", index=False)
    return path


def _yaml(tmp_path: Path, cfg: dict) -> Path:
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_fit_a_csv_then_predict_as_a_user_would(table, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    cfg = _yaml(tmp_path, TINY)
    args = ["fit", str(table), "--target", "label", "--out", str(out), "--config", str(cfg)]
    assert main([*args, "--quiet"]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["task"] == "table" and result["test_accuracy"] is not None
    preds = tmp_path / "preds.csv"
    assert main(["predict", str(out), str(tmp_path / "new.csv"), "--out", str(preds)]) == 0
    frame = pd.read_csv(preds)
    assert len(frame) == 9 and set(frame["prediction"]) <= {"yes", "no"}
    assert {"p_no", "p_yes", "expert", "cluster"} <= set(frame.columns)
    capsys.readouterr()
    asked = ["predict", str(out), str(tmp_path / "new.csv"), "--out", str(preds), "--quiet"]
    assert main([*asked, "--quantiles", "0.05,0.95"]) == 0  # (a classifier has none)
    assert "--quantiles is for regression and forecasts" in capsys.readouterr().out
    model = sgem.load(out)
    assert model.classes == ["no", "yes"]
    config = (out / "config.yaml").read_text()
    assert "target: label" in config and "n_iterations: 2" in config


def test_fit_long_format_series_then_forecast(tmp_path) -> None:
    rng = np.random.default_rng(1)
    rows = []
    for i in range(6):
        n = 200 + 20 * i
        ds = pd.date_range("2020-01-01", periods=n, freq="D")
        y = (1 + i) * (10 + np.sin(np.arange(n) * 2 * np.pi / 7)) + rng.normal(0, 0.2, n)
        rows.append(pd.DataFrame({"unique_id": f"s{i}", "ds": ds, "y": y}))
    path = tmp_path / "series.csv"
    pd.concat(rows).to_csv(path, index=False)
    assert infer_kind(path) == "timeseries"
    override = {
        **TINY,
        "task": {"n_windows": 300, "n_clusters": 4},
        "space": {"channels": 4, "n_nodes": 2},
        "search": {**TINY["search"], "n_experts": 2, "train": {"steps": 10, "batch_size": 32}},
        "crps_samples": 10,
    }
    model = sgem.fit(path, horizon=7, out=tmp_path / "run", progress=False, config=override, seed=0)
    assert model.is_forecaster and model.preprocessor.context == 28  # daily: max(28, 4 * 7)
    out = tmp_path / "fc.csv"
    assert main(["predict", str(tmp_path / "run"), str(path), "--out", str(out)]) == 0
    fc = pd.read_csv(out)
    assert len(fc) == 6 * 7 and {"unique_id", "ds", "forecast", "q0.1", "q0.9"} <= set(fc)
    # forecasts are in each series' units: series s5 is ~6x series s0
    level = fc.groupby("unique_id")["forecast"].mean()
    assert 3 < level["s5"] / level["s0"] < 12


def test_a_short_budget_makes_the_forecasting_final_stage_cheaper(tmp_path, monkeypatch) -> None:
    """The forecasting preset's final stage (warm starts + champion cell) does not fit a
    short budget: the run gives them up, says so in budget_plan.json / result.json, and
    trains its final experts as planned. The pilot is made slow so the plan is tight on
    any machine."""
    import sgem.run.budget

    rng = np.random.default_rng(1)
    frames = []
    for i in range(4):
        ds = pd.date_range("2020-01-01", periods=150, freq="D")
        y = (1 + i) * (10 + np.sin(np.arange(150) * 2 * np.pi / 7)) + rng.normal(0, 0.2, 150)
        frames.append(pd.DataFrame({"unique_id": f"s{i}", "ds": ds, "y": y}))
    path = tmp_path / "series.csv"
    pd.concat(frames).to_csv(path, index=False)
    override = {
        **TINY,
        "task": {"n_windows": 200, "n_clusters": 4},
        "space": {"channels": 4, "n_nodes": 2},
        "search": {**TINY["search"], "n_experts": 2, "train": {"steps": 10, "batch_size": 32}},
        "crps_samples": 10,
    }
    monkeypatch.setattr(sgem.run.budget, "pilot_seconds", lambda *a, **k: 2.0)
    out = tmp_path / "run"
    model = sgem.fit(path, horizon=7, out=out, progress=False, config=override, time_budget=60)
    plan = json.loads((out / "budget_plan.json").read_text())
    assert plan["reduced"][0].startswith("no champion cell") and plan["champion_cells"] == 0
    assert plan["final_length"] in ("validation-warm-norefit", "validation-norefit", "fixed")
    assert plan["full_final_stage_needs_seconds"] > 60
    result = model.result
    assert result["time_budget"]["reduced"] == plan["reduced"]
    assert "champion" not in result["selection"]  # no champion cell was trained
    if plan["final_length"] == "fixed":  # no validation-chosen length was tracked
        assert not any(result.get("final_length") or [])
    # the summary says where the final stage's re-plan differs from the plan
    from sgem.run.run_result import summarise

    again = {"seconds_left": 42.0, "final_length": "validation-warm", "reduced": []}
    restored = {**result, "time_budget": {**result["time_budget"], "final_stage_replanned": again}}
    said = "final stage: validation-warm (planned again for the 42 s the search left; "
    assert said + f"the plan had {plan['final_length']})" in summarise(restored)
    over = {**result["time_budget"], "final_stage_replanned": {**again, "seconds_left": -14.0}}
    said = "planned again for no time: the search ran 14 s into the final stage's share; "
    assert said in summarise({**result, "time_budget": over})  # (not "the -14 s ... left")
    same = {**again, "reduced": plan["reduced"], "final_length": plan["final_length"]}
    kept = {**result, "time_budget": {**result["time_budget"], "final_stage_replanned": same}}
    assert "planned again" not in summarise(kept)


def test_fit_an_image_folder(tmp_path) -> None:
    from PIL import Image

    rng = np.random.default_rng(2)
    for c, (lo, hi) in enumerate(((0, 80), (170, 255))):
        folder = tmp_path / "imgs" / f"class{c}"
        folder.mkdir(parents=True)
        for i in range(40):
            pixels = rng.integers(lo, hi, size=(8, 8, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}.png")
    override = {
        **TINY,
        "space": {"ops": ["skip", "max_pool_3x3"], "n_cell_nodes": 1, "init_channels": 4},
        "search": {**TINY["search"], "train": {"steps": 5, "batch_size": 16}},
        "final_epochs": 1,
    }
    model = sgem.fit(
        tmp_path / "imgs",
        image_size=8,
        n_clusters=4,
        out=tmp_path / "run",
        progress=False,
        config=override,
    )
    assert model.classes == ["class0", "class1"]
    out = tmp_path / "p.csv"
    assert main(["predict", str(tmp_path / "run"), str(tmp_path / "imgs"), "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert len(frame) == 80 and set(frame["prediction"]) <= {"class0", "class1"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": "nope"}, "nope"),
        ({"target": None}, "--target"),
        ({"target": "label", "kind": "audio"}, "unknown --kind"),
        ({"target": "label", "time_budget": "soon"}, "time budget"),
    ],
)
def test_bad_fit_inputs_claim_nothing(table, tmp_path, kwargs, message) -> None:
    out = tmp_path / "never"
    with pytest.raises(SgemUserError, match=message):
        sgem.fit(table, out=out, progress=False, config=TINY, **kwargs)
    assert not out.exists()


def test_missing_file_and_bad_seed(tmp_path, table) -> None:
    with pytest.raises(SgemUserError, match="does not exist"):
        fit_config(tmp_path / "missing.csv", target="y")
    with pytest.raises(SgemUserError, match="seed"):
        sgem.fit(table, target="label", seed=-1, out=tmp_path / "r", progress=False)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("10m", 600), ("1.5h", 5400), ("1h30m", 5400)]
)
def test_parse_duration(text, seconds) -> None:
    assert parse_duration(text) == seconds


def test_budget_plan_shrinks_the_search_when_time_is_short() -> None:
    cfg = SearchConfig()
    final = final_units(cfg, "fixed", data_ratio=1.0) * 0.2  # 2 experts x 600 / 150 steps
    assert final == pytest.approx(1.6)
    tight, plan = plan_search(cfg, seconds=20, candidate_seconds=0.2)
    assert tight.n_iterations < cfg.n_iterations and tight.n_init < cfg.n_init
    assert plan["affordable_trainings"] == int(0.5 * (20 - final) / 0.2)
    assert "reduced" not in plan and tight.final_steps == cfg.final_steps
    roomy, _ = plan_search(cfg, seconds=10_000, candidate_seconds=0.2)
    assert roomy == cfg


def test_budget_prices_the_reference_networks_of_a_table() -> None:
    """Tables without warm starts also train one network of each expert's cell on every
    cluster (`sgem.final.reference`): k networks on all of train + validation, tracked too
    under a validation-chosen length; warm starts score theirs for free."""
    from sgem.final.length import PLANNING_FACTOR

    cfg = SearchConfig()  # 2 experts, 600 final steps, 150 candidate steps: 4 units each
    for length, factor in (("fixed", 1.0), ("validation", PLANNING_FACTOR)):
        extra = final_units(cfg, length, 1.25, references=True) - final_units(cfg, length, 1.25)
        assert extra == pytest.approx(2 * 4 * 1.25 * factor)
    warm = SearchConfig(champion_cells=0)
    assert final_units(warm, "validation-warm", 1.25, references=True) == final_units(
        warm, "validation-warm", 1.25
    )
    _, plain = plan_search(cfg, seconds=60, candidate_seconds=0.2, data_ratio=1.25)
    _, priced = plan_search(cfg, 60, 0.2, data_ratio=1.25, references=True)
    assert priced["final_retrain_seconds_estimate"] > plain["final_retrain_seconds_estimate"]
    assert priced["affordable_trainings"] < plain["affordable_trainings"]


def test_budget_plan_makes_the_final_stage_cheaper_when_it_does_not_fit() -> None:
    """The forecasting presets' final stage (warm starts + a champion cell) costs tens of
    candidate trainings; a short budget gives up the champion, then the warm networks' refit,
    then warm starts, then the validation-chosen length, then final steps, and says so."""
    from sgem.run.budget import FINAL_SHARE, MIN_STEP_FRACTION, apply_plan

    cfg = SearchConfig(n_experts=4, champion_cells=16, final_steps=500)
    ladder = [
        final_units(cfg, "validation-warm", 1.2),
        final_units(replace(cfg, champion_cells=0), "validation-warm", 1.2),
        final_units(replace(cfg, champion_cells=0), "validation-warm-norefit", 1.2),
        final_units(cfg, "validation-norefit", 1.2),
        final_units(cfg, "fixed", 1.2),
    ]
    assert ladder == sorted(ladder, reverse=True) and ladder[0] > ladder[1] + 16
    roomy, plan = plan_search(cfg, 10_000, 1.0, final_length="validation-warm", data_ratio=1.2)
    assert roomy.champion_cells == 16 and "reduced" not in plan and "final_length" not in plan
    steps = (
        (2 * ladder[1] + 1, "validation-warm"),
        (2 * ladder[2] + 1, "validation-warm-norefit"),
        (2 * ladder[3] + 1, "validation-norefit"),
        (30, "fixed"),
        (4, "fixed"),
    )
    for seconds, length in steps:
        tight, plan = plan_search(cfg, seconds, 1.0, final_length="validation-warm", data_ratio=1.2)
        assert tight.champion_cells == 0 and plan["final_length"] == length
        assert plan["reduced"][0].startswith("no champion cell")
        needs = plan["full_final_stage_needs_seconds"]
        assert needs == pytest.approx(ladder[0] / FINAL_SHARE, abs=0.1)
        assert apply_plan(cfg, plan) == tight  # a resume plans exactly this
        fits = plan["final_retrain_seconds_estimate"] <= FINAL_SHARE * seconds + 0.1
        assert fits or tight.final_steps == int(MIN_STEP_FRACTION * cfg.final_steps)
    assert tight.final_steps < cfg.final_steps  # 4 s: not even a fixed length fits


def test_the_final_stage_is_planned_again_for_the_time_the_search_left() -> None:
    """When the search ends, the final stage is priced again from the configured protocol
    for the seconds actually left: a search that left more time than planned gets back the
    champion cell and the refit the plan gave up, one that left less goes further down the
    ladder. The search's own (shortened) candidate training is kept either way."""
    import time
    from types import SimpleNamespace

    from sgem.data import make_toy_task
    from sgem.run.budget import apply_plan, replan_final

    task = make_toy_task(0)
    cfg = SimpleNamespace(final_length="validation-warm", final_epochs=None)
    configured = SearchConfig(n_experts=4, champion_cells=16, final_steps=500)
    ratio = (len(task.train) + len(task.val)) / len(task.train)
    t = 1.0
    _, plan = plan_search(configured, 60, t, final_length="validation-warm", data_ratio=ratio)
    searched = apply_plan(configured, plan)
    assert searched.champion_cells == 0 and plan["final_length"] != "validation-warm"
    plan["after_final_seconds_estimate"] = 5.0
    full = final_units(configured, "validation-warm", ratio) * t
    norefit = final_units(replace(configured, champion_cells=0), "validation-warm-norefit", ratio)
    for left, length, champions in (
        (full + 1, "validation-warm", 16),
        (norefit * t + 1, "validation-warm-norefit", 0),
        (-10, "fixed", 0),
    ):
        plan["_training_ends"] = time.perf_counter() + left + 5.0
        final_cfg, final_length = replan_final(
            plan, cfg, configured, searched, task, object(), references_done=True
        )
        assert final_length == length and final_cfg.champion_cells == champions
        assert final_cfg.train == searched.train and final_cfg.n_init == searched.n_init
        assert plan["final_stage_replanned"]["final_length"] == length
    assert final_cfg.final_steps < configured.final_steps  # nothing left: the shortest


def test_the_deadline_moves_with_what_the_searched_cells_cost() -> None:
    """The search's deadline keeps the final stage's reserve priced in the pilot's random
    cells times what the incumbents' cells were measured to cost against the initial
    design's: a search that settled on cheap cells searches longer (down to half the
    reserve), one on costly cells never shorter than planned; no ratio before enough is
    timed."""
    import time
    from types import SimpleNamespace

    from sgem.run.budget import (
        COST_RATIO_BOUNDS,
        deadline,
        moving_deadline,
        searched_cost_ratio,
    )
    from sgem.space.arch import Arch

    cheap, costly = Arch(("linear",) * 2, (0, 0)), Arch(("rbf",) * 2, (0, 0))
    other, untimed = Arch(("relu",) * 2, (0, 0)), Arch(("square",) * 2, (0, 0))

    def obs(arch, seconds, phase="init", loss=1.0):
        mask = np.array([True, False])
        return SimpleNamespace(
            arch=arch, seconds=seconds, phase=phase, mask=mask, losses=np.array([loss, 9.0])
        )

    design = [obs(other, 2.0), obs(other, 2.0), obs(cheap, 1.0, loss=0.5), obs(costly, 3.0)]
    assert searched_cost_ratio(design[:2], [cheap]) is None  # too few random cells timed
    # incumbents not trained yet: the best cell measured so far stands in
    assert searched_cost_ratio(design, [untimed]) == pytest.approx(0.5)
    assert searched_cost_ratio(design, [cheap, costly]) == pytest.approx(1.0)
    cheaper = [*design, obs(cheap, 2.0, "s-step")]  # cheap: 1.5 s, random cells: 2 s
    assert searched_cost_ratio(cheaper, [cheap]) == pytest.approx(0.75)
    assert (
        searched_cost_ratio(design + [obs(cheap, 0.01, "s-step")] * 9, [cheap])
        == (COST_RATIO_BOUNDS[0])
    )
    assert searched_cost_ratio(design, [costly]) == COST_RATIO_BOUNDS[1] == 1.0

    now = time.perf_counter()
    plan = {
        "candidate_seconds": 1.0,
        "final_retrain_seconds_estimate": 40.0,
        "finalisation_seconds_estimate": 10.0,
        "references_seconds_estimate": 7.0,
        "_training_ends": now + 100.0,
    }
    planned = deadline(plan, references_done=True)
    assert planned == pytest.approx(now + 50.0)
    reprice = moving_deadline(plan, references_done=True)
    store = SimpleNamespace(observations=cheaper)
    moved, margin = reprice(store, [cheap])
    assert plan["searched_cost_ratio"] == pytest.approx(0.75)
    assert moved == pytest.approx(now + 100.0 - 0.75 * 50.0)  # the reserve at 0.75
    assert margin == pytest.approx(0.25 * 0.75 * 50.0)
    # the classical references' estimate is not a network's: never scaled
    assert deadline(plan) == pytest.approx(moved - 7.0)
    assert moving_deadline(None) is None


def test_fit_a_regression_table(tmp_path) -> None:
    rng = np.random.default_rng(3)
    x = np.r_[rng.normal(-3, 1, (250, 2)), rng.normal(3, 1, (250, 2))]
    target = np.where(x[:, 0] < 0, 2 * x[:, 1], x[:, 1] ** 2) * 50 + 1000
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "price": target})
    path = tmp_path / "reg.csv"
    frame.to_csv(path, index=False)
    model = sgem.fit(path, target="price", out=tmp_path / "run", progress=False, config=TINY)
    assert not model.is_classifier and model.spec.space["head"] == "student_t"
    pred = model.predict(frame[["a", "b"]].to_numpy()[:20])
    assert pred.shape == (20,) and 500 < np.median(pred) < 1600  # original units
    q = model.predict_quantiles(frame[["a", "b"]].to_numpy()[:20])
    assert np.all(q[0.1] <= q[0.9])
    result = model.result
    assert result["test_nll"] is not None and result["test_crps"] is not None
    scores = model.evaluate(frame[["a", "b"]].to_numpy(), frame["price"].to_numpy())
    assert np.isfinite(scores["test_nll"])


def test_experts_auto_picks_k_on_the_holdout(table, tmp_path) -> None:
    out = tmp_path / "auto"
    model = sgem.fit(table, target="label", n_experts="auto", out=out, progress=False, config=TINY)
    report = model.result["experts_auto"]
    assert [r["n_experts"] for r in report["candidates"]] == [2, 3, 4]
    # the one-standard-error rule, paired on the same holdout rows
    within = [
        r["n_experts"]
        for r in report["candidates"]
        if r["paired_difference_to_best"] <= r["paired_difference_se"]
    ]
    assert report["chosen"] == min(within) and report["chosen_on"].startswith("the holdout")
    # the saved model: the chosen K's experts that own clusters, plus the global network
    # where the leaderboard routed clusters to it
    assert 1 <= model.spec.n_experts <= report["chosen"] + 1
    assert (out / "model" / "model.json").is_file() and (
        out / "experts-3" / "result.json"
    ).is_file()
    with pytest.raises(SgemUserError, match="'auto'"):
        sgem.fit(table, target="label", n_experts="many", out=tmp_path / "x", progress=False)
    # interrupted in K = 4's final stages: the same fit again continues it, as uninterrupted
    (out / "experts-4" / "result.json").unlink()
    (out / "result.json").unlink()
    trained = _completed(out / "experts-4" / "store.sqlite")
    with pytest.raises(SgemUserError, match=r"choice of K .*the same `sgem fit` command again"):
        resume_experiment(out, progress=False)
    again = sgem.fit(table, target="label", n_experts="auto", out=out, progress=False, config=TINY)
    assert _completed(out / "experts-4" / "store.sqlite") == trained  # none trained twice
    assert again.result["experts_auto"]["chosen"] == report["chosen"]
    untimed = [{k: v for k, v in r.items() if "seconds" not in k} for r in report["candidates"]]
    got = again.result["experts_auto"]["candidates"]
    assert [{k: v for k, v in r.items() if "seconds" not in k} for r in got] == untimed
    # the reused Ks count what they cost when they ran (their own clocks), not the instant
    # of reading them: the choice's account carries over the attempts
    assert [r["seconds"] for r in got[:2]] == [r["seconds"] for r in report["candidates"][:2]]
    assert again.result["wall_seconds"] >= sum(r["seconds"] for r in got)


def test_choice_of_k_counts_each_k_by_its_own_clock() -> None:
    from sgem.run.experts_choice import _choice_seconds, _run_seconds

    # a K finished in an earlier attempt (60 s on its clock) reused now in 0.2 s
    assert _run_seconds({"clock": {"wall_seconds": 60.04}}, 0.2) == 60.0
    assert _run_seconds({}, 0.2) == 0.2  # (no clock recorded: what was measured here)
    report = [{"seconds": 60.0}, {"seconds": 45.0}]
    # this attempt: 7 s in all, 5 s of them inside the two runs -> 2 s between them
    assert _choice_seconds(report, 7.0, 5.0) == 107.0
    assert _choice_seconds([], 0.0, 0.0) == 0.0


def _completed(store: Path) -> int:
    import sqlite3

    with sqlite3.connect(store) as db:
        query = "SELECT COUNT(*) FROM observations WHERE status = 'complete'"
        return db.execute(query).fetchone()[0]


def test_budget_plan_shortens_candidates_when_even_the_smallest_search_is_too_long() -> None:
    from sgem.run.budget import MIN_STEP_FRACTION, apply_plan

    cfg = SearchConfig(final_steps=150)  # one candidate training per expert
    tight, plan = plan_search(cfg, seconds=5, candidate_seconds=0.5)
    assert tight.n_iterations == 1 and tight.train.steps < cfg.train.steps
    assert tight.train.steps >= int(MIN_STEP_FRACTION * cfg.train.steps)
    assert apply_plan(cfg, plan) == tight


def _small_search(n_iterations: int) -> SearchConfig:
    """A search small enough to run many times in a test (20-step candidates)."""
    from sgem.train import TrainConfig

    return SearchConfig(
        n_iterations=n_iterations,
        n_init=8,
        pool_size=20,
        mc_masks=2,
        routing_steps=5,
        refit_budget=0,
        final_candidates=1,
        train=TrainConfig(steps=20),
    )


def test_a_search_past_its_deadline_says_so(caplog):
    """A time budget that the initial design already used up: the EM loop runs no
    iteration, the result records it and the user is told (not only result.json)."""
    import logging
    import time

    from sgem.data import make_toy_task
    from sgem.search import SGEM
    from sgem.space import TabularSpace

    cfg = _small_search(3)
    search = SGEM(TabularSpace(), cfg, seed=0, progress=False)
    with caplog.at_level(logging.WARNING, logger="sgem.search.sgem"):
        result = search.fit(make_toy_task(0), deadline=time.perf_counter())
    assert result.selection["stopped_at_deadline_after_iteration"] == 0
    assert "after 0 of 3 iterations" in caplog.text and "initial design alone" in caplog.text
    # the random start is no search result: the k-means split is the one finalist, each
    # region trained with the usual cells (incumbent, champions, random), then refits
    from sgem.search.geometry import geometry_partition

    geometry = geometry_partition(make_toy_task(0), cfg.n_experts, 0)
    assert np.array_equal(result.assignment, geometry)
    assert result.selection["random_start_skipped"]
    assert [row["geometry"] for row in result.selection["finalists"]] == [True]
    refits = [o for o in result.store.observations if o.phase == "refit"]
    assert refits and all(
        any(np.array_equal(o.mask, geometry == k) for k in range(cfg.n_experts)) for o in refits
    )


def test_a_budgeted_search_runs_on_to_its_cap_while_the_deadline_allows(caplog):
    """The planned count (config.n_iterations) is where a pilot expected the time to end; a
    search that is faster runs on to `iteration_cap`, and ending there is no cut."""
    import logging
    import time

    from sgem.data import make_toy_task
    from sgem.search import SGEM
    from sgem.space import TabularSpace

    cfg = _small_search(1)
    task = make_toy_task(0)
    search = SGEM(TabularSpace(), cfg, seed=0, progress=False)
    with caplog.at_level(logging.WARNING, logger="sgem.search.sgem"):
        result = search.fit(task, deadline=time.perf_counter() + 600, iteration_cap=3)
    assert result.selection["iterations_run"] == 3 and len(result.trace) == 3
    assert "stopped_at_deadline_after_iteration" not in result.selection
    assert "deadline" not in caplog.text
    # without a deadline the cap is not used: the configured count is the search
    plain = SGEM(TabularSpace(), cfg, seed=0, progress=False).fit(task, iteration_cap=3)
    assert plain.selection["iterations_run"] == 1
    # a step past the planned count must end a final-stage reserve before the deadline:
    # with a margin longer than the time left, the planned step runs and no other
    held = SGEM(TabularSpace(), cfg, seed=0, progress=False).fit(
        task, deadline=time.perf_counter() + 600, iteration_cap=3, extension_margin=900.0
    )
    assert held.selection["iterations_run"] == 1
    assert "stopped_at_deadline_after_iteration" not in held.selection  # the planned end


def test_a_repriced_deadline_is_asked_before_every_em_step() -> None:
    """`reprice` (a time budget's moving deadline) is asked before each EM step with the
    run's store and the incumbents, and what it answers is the deadline: a far one lets
    the search run on to its cap, one that has passed stops it."""
    import time

    from sgem.data import make_toy_task
    from sgem.search import SGEM
    from sgem.space import TabularSpace

    cfg, task = _small_search(1), make_toy_task(0)
    asked: list[tuple[int, int]] = []

    def far(store, incumbents):
        asked.append((len(store.observations), len(incumbents)))
        return time.perf_counter() + 600, 0.0

    result = SGEM(TabularSpace(), cfg, seed=0, progress=False).fit(
        task, deadline=time.perf_counter(), iteration_cap=3, reprice=far
    )
    assert result.selection["iterations_run"] == 3 and len(asked) == 3
    assert all(k == cfg.n_experts for _, k in asked) and asked[0][0] < asked[-1][0]
    ended = SGEM(TabularSpace(), cfg, seed=0, progress=False).fit(
        task,
        deadline=time.perf_counter() + 600,
        iteration_cap=3,
        reprice=lambda store, incumbents: (time.perf_counter() - 1.0, 0.0),
    )
    assert ended.selection["stopped_at_deadline_after_iteration"] == 0


def test_the_deadline_keeps_the_finalisation_its_trainings() -> None:
    """The search's deadline reserves the final stage and the finalisation's trainings (each
    finalist and the k-means split on every region, then each expert's refits), priced at
    the planned candidate length; a plan written before that was priced keeps 8."""
    from sgem.run.budget import deadline

    cfg = SearchConfig(n_experts=4, final_candidates=2, finalist_budget=1, refit_budget=4)
    _, plan = plan_search(cfg, seconds=3000, candidate_seconds=1.0)
    trainings = (2 + 1) * 4 * 2 + 4 * 4
    assert plan["finalisation_seconds_estimate"] == 1.25 * trainings
    plan["_training_ends"] = 1000.0
    reserve = plan["final_retrain_seconds_estimate"] + 1.25 * trainings
    assert deadline(plan) == pytest.approx(1000.0 - reserve)
    older = {k: v for k, v in plan.items() if k != "finalisation_seconds_estimate"}
    assert deadline(older) == pytest.approx(deadline(plan) + 1.25 * trainings - 16.0)
    tight, short = plan_search(cfg, seconds=5, candidate_seconds=0.5)
    fraction = tight.train.steps / cfg.train.steps  # shorter candidates: a cheaper finalisation
    smallest = 1.25 * (2 * 4 * 2 + 4 * 2) * 0.5 * fraction
    assert short["finalisation_seconds_estimate"] <= smallest + 0.1


def test_the_deadline_expects_an_exploration_step_to_train_more() -> None:
    """The next step's seconds for the deadline: the slowest seconds per training so far
    times the trainings it makes, an exploration step's masks and jump included."""
    from sgem.search.loop import StepCost

    cost = StepCost(SearchConfig(n_experts=4, explore_every=4, explore_groups=4))
    assert cost.expected(1) == 0.0  # nothing measured: the first step always runs
    cost.record(seconds=28.0, trained=14, explored=0)
    cost.record(seconds=14.0, trained=14, explored=0)
    assert cost.expected(3) == 28.0  # 2 s per training, the slowest seen
    assert cost.expected(4) == 2.0 * (14 + 4 * 5 + 4 * 4)  # masks and a jump besides
    cost.record(seconds=60.0, trained=14, explored=10)
    assert cost.expected(8) == 2.5 * 24  # what an exploration step was seen to train
    no_jumps = StepCost(SearchConfig(n_experts=2, explore_groups=3, jumps=False))
    no_jumps.record(seconds=4.0, trained=4, explored=0)
    assert no_jumps.expected(4) == 1.0 * (4 + 3 * 3)


def test_budget_prices_and_reduces_the_norefit_lengths() -> None:
    """Keeping the tracked networks (no refit) costs less than refitting them, and a short
    budget steps down from warm starts to scratch to a fixed length in that family too."""
    cfg = SearchConfig(n_experts=4, champion_cells=16, final_steps=500)
    for length in ("validation", "validation-warm"):
        assert final_units(cfg, f"{length}-norefit", 1.2) < final_units(cfg, length, 1.2)
    assert final_units(replace(cfg, champion_cells=0), "validation-warm-norefit", 1.2) > (
        final_units(cfg, "validation-norefit", 1.2)
    )
    seconds = final_units(cfg, "validation-norefit", 1.2) * 2 + 1  # scratch fits, warm not
    tight, plan = plan_search(cfg, seconds, 1.0, final_length="validation-warm-norefit")
    assert plan["final_length"] == "validation-norefit" and tight.champion_cells == 0
    _, plan = plan_search(cfg, 4, 1.0, final_length="validation-warm-norefit")
    assert plan["final_length"] == "fixed"


def test_the_cli_can_make_a_small_integer_target_a_regression(tmp_path) -> None:
    """A count 0..12 is inferred as 13 classes; --task regression keeps it a number."""
    from sgem.cli import _parser

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=1000), "count": rng.integers(0, 13, 1000)})
    frame.to_csv(tmp_path / "count.csv", index=False)
    assert fit_config(tmp_path / "count.csv", target="count")["task"]["kind"] == "classification"
    args = _parser().parse_args(["fit", str(tmp_path / "count.csv"), "--task", "regression"])
    cfg = fit_config(tmp_path / "count.csv", target="count", task_kind=args.task)
    assert cfg["task"]["kind"] == "regression" and cfg["space"]["head"] == "student_t"
    assert cfg["space"]["frame"] == "region"  # a table's experts: each in its region's frame
    own = fit_config(tmp_path / "count.csv", target="count", config={"space": {"frame": "global"}})
    assert own["space"]["frame"] == "global"  # a --config file may keep the whole split's
    with pytest.raises(SgemUserError, match="--task regression is for tables"):
        fit_config(tmp_path / "count.csv", kind="timeseries", task_kind="regression")


def test_a_large_table_trains_on_minibatches_unless_its_config_says_otherwise(tmp_path) -> None:
    """Above `MINIBATCH_TABLE_ROWS` rows a table's networks step on minibatches (full-batch
    steps on 200 000 rows left a 2-minute fit no search); a small table keeps the preset's
    full batch, and a --config file's batch_size wins."""
    from sgem.data.user_tasks import MINIBATCH_TABLE_ROWS, TABLE_MINIBATCH
    from sgem.search.config import SearchConfig

    rng = np.random.default_rng(0)
    n = MINIBATCH_TABLE_ROWS + 1
    frame = pd.DataFrame({"a": rng.normal(size=n), "y": rng.integers(0, 2, n)})
    frame.to_csv(tmp_path / "big.csv", index=False)
    frame.iloc[:1000].to_csv(tmp_path / "small.csv", index=False)
    big = fit_config(tmp_path / "big.csv", target="y")
    assert SearchConfig.from_dict(big["search"]).train.batch_size == TABLE_MINIBATCH
    small = fit_config(tmp_path / "small.csv", target="y")
    assert SearchConfig.from_dict(small["search"]).train.batch_size is None
    own = fit_config(
        tmp_path / "big.csv", target="y", config={"search": {"train": {"batch_size": 64}}}
    )
    assert own["search"]["train"]["batch_size"] == 64


def test_a_horizon_makes_a_file_series_whatever_its_value_column_is_called(tmp_path) -> None:
    """unique_id, ds, sales with --horizon: series (the message names --value-col), not a
    table that lacks --target nor, with --target sales, a silent regression."""
    frame = pd.DataFrame(
        {"unique_id": "a", "ds": pd.date_range("2020-01-01", periods=60), "sales": np.arange(60)}
    )
    frame.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(SgemUserError, match=r"--value-col"):
        sgem.fit(tmp_path / "s.csv", horizon=7, target="sales", out=tmp_path / "r", progress=False)
    cfg = fit_config(tmp_path / "s.csv", horizon=7, value_col="sales")
    assert cfg["task"]["name"] == "series" and cfg["task"]["value_col"] == "sales"


def test_a_40_row_table_fits_with_the_defaults(tmp_path) -> None:
    """M = 3 and a 35 % validation share below 200 rows: with M = 4 and 20 %, only 2 of 4
    clusters kept validation rows and every remedy the message named was refused."""
    from sgem.data.user_tasks import default_n_clusters, default_val_fraction

    assert (default_n_clusters(40), default_val_fraction(40)) == (3, 0.35)
    assert (default_n_clusters(600), default_val_fraction(600)) == (6, 0.2)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3))
    frame = pd.DataFrame(x, columns=list("abc")).assign(y=(x[:, 0] > 0).astype(int))
    model = sgem.fit(frame, target="y", out=tmp_path / "run", progress=False, config=TINY)
    assert model.predict(frame[list("abc")]).shape == (40,)
