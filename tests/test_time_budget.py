"""A time budget is kept: the fence stops every training loop, the clock carries spent
seconds across a resume, a budget too small is refused naming the minimum, and the run
says how it used its budget. Also: no saved model keeps an expert without a cluster."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import TINY_SEARCH

import sgem
from sgem.errors import SgemUserError
from sgem.run.budget_clock import BudgetClock
from sgem.run.kept_references import CLASSICAL_FILE, TABLE_FILE
from sgem.train.time_fence import fence, fence_passed, training_fence

#: the classical members a budget plan times and plans one by one
COSTLY = ("AutoETS", "AutoTheta")


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-3, 1, (300, 2)), rng.normal(3, 1, (300, 2))]
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1]})
    frame["label"] = np.where(x[:, 1] > np.where(x[:, 0] < 0, -3.0, 3.0), "p", "n")
    path = tmp_path / "train.csv"
    frame.to_csv(path, index=False)
    return path


def test_the_fence_stops_a_training_loop_at_its_next_step() -> None:
    from sgem.data import make_toy_task
    from sgem.space import TabularSpace
    from sgem.train import TrainConfig, Trainer

    task = make_toy_task(0)
    trainer = Trainer(task, TabularSpace(), TrainConfig(steps=100_000))
    arch = TabularSpace().sample(np.random.default_rng(0))
    start = time.perf_counter()
    with training_fence(time.time() + 0.3):
        assert fence() is not None and not fence_passed()
        trainer.fit(arch, torch.as_tensor(task.train.x), torch.as_tensor(task.train.y), seed=0)
    assert time.perf_counter() - start < 3.0  # 100k steps would take minutes
    assert fence() is None  # lifted after the block


def test_the_fence_ends_validation_tracking_where_it_stands() -> None:
    from sgem.final.length import track_validation

    calls = []
    with training_fence(time.time() - 1.0):  # already passed
        best, _, done, curve = track_validation(calls.append, lambda: 1.0, 1000, 50)
    assert done == 1 and len(calls) == 1 and curve == [(1, 1.0)] and best == 1


def test_the_fence_reaches_worker_processes_through_the_environment() -> None:
    import os

    from sgem.train.time_fence import ENV

    with training_fence(123.5):
        assert float(os.environ[ENV]) == 123.5
    assert ENV not in os.environ


def test_a_resumed_clock_continues_with_what_is_left(tmp_path) -> None:
    file = tmp_path / "budget_clock.json"
    first = BudgetClock(file, budget=100.0)
    with first.timed("search"):
        first.started -= 30.0  # as if the search had run for 30 s
    first.close()
    saved = json.loads(file.read_text())
    assert saved["spent_seconds"] >= 30.0 and saved["stages"]["search"] >= 0.0
    resumed = BudgetClock(file, budget=100.0, resume=True)
    assert 69.0 < resumed.left() <= 70.0
    assert resumed.report()["spent_before_resume_seconds"] >= 30.0
    assert "left of 100 s" in resumed.line()
    fresh = BudgetClock(file, budget=100.0, resume=False)  # a new run starts from zero
    assert fresh.left() > 99.0


def test_a_torn_clock_file_costs_the_account_not_the_run(tmp_path) -> None:
    file = tmp_path / "budget_clock.json"
    file.write_text('{"spent_sec')
    assert BudgetClock(file, budget=10.0, resume=True).left() > 9.0


def test_a_fit_keeps_its_budget_even_when_the_plan_is_wrong(table, tmp_path, monkeypatch) -> None:
    """The pilot claims trainings are 1000x cheaper than they are, so the plan schedules far
    more search and final training than the budget holds; the fence still ends the fit
    within budget + 5 s, and the result says the budget ran out."""
    import sgem.run.budget

    monkeypatch.setattr(sgem.run.budget, "pilot_seconds", lambda *a, **k: 1e-4)
    budget = 12.0
    config = {
        "search": {
            **TINY_SEARCH,
            "n_iterations": 500,
            "final_steps": 200_000,
            "train": {"steps": 400},
        }
    }
    start = time.perf_counter()
    model = sgem.fit(
        table,
        target="label",
        out=tmp_path / "run",
        progress=False,
        config=config,
        time_budget=budget,
        n_clusters=4,
        executor="inline",
    )
    wall = time.perf_counter() - start
    assert wall <= budget + 5.0
    tb = model.result["time_budget"]
    assert tb["stopped_early"] or tb["final_stage_cut_at_fence"]
    assert "budget ran out" in tb["why_it_ended"]
    clock = model.result["clock"]
    assert clock["budget_seconds"] == budget and "final_stage" in clock["stage_seconds"]
    assert model.predict(pd.DataFrame({"a": [1.0], "b": [2.0]})).shape == (1,)


def test_a_budget_too_small_is_refused_naming_the_minimum(
    table, tmp_path, monkeypatch, caplog
) -> None:
    """With nothing fitted to fall back on (here a table whose scikit-learn members failed),
    a budget without room for the smallest search is refused, naming the minimum."""
    import sgem.run.budget
    import sgem.run.pipeline

    monkeypatch.setattr(sgem.run.budget, "pilot_seconds", lambda *a, **k: 5.0)
    monkeypatch.setattr(sgem.run.pipeline, "table_references", lambda *a, **k: None)
    with pytest.raises(SgemUserError, match=r"too small .* give --time-budget \d+s or more"):
        sgem.fit(
            table,
            target="label",
            out=tmp_path / "run",
            progress=False,
            time_budget=20,
            executor="inline",
        )
    assert "AutoETS" not in caplog.text  # a table has no classical references to warn of


@pytest.mark.parametrize("pilot", ["slow", "cut"])
def test_a_table_whose_search_has_no_room_still_ends_with_its_references(
    table, tmp_path, monkeypatch, caplog, pilot
) -> None:
    """The scikit-learn references are fitted first; where reading, them and the pilot leave
    less than the smallest search (a 600 000-row CSV in 2 minutes was refused after 113 s,
    gradient boosting already fitted), the search is cut short instead, within the budget,
    and the saved model predicts, leaning on the references, the warning says so; also
    where timing one candidate ran past its share of the budget (`cut`)."""
    import sgem.run.budget
    from sgem.run.pilot import PilotCut

    def cut(*a, **k):
        raise PilotCut(3.0)

    monkeypatch.setattr(
        sgem.run.budget, "pilot_seconds", cut if pilot == "cut" else lambda *a, **k: 5.0
    )
    budget = 20.0
    start = time.perf_counter()
    with caplog.at_level("WARNING"):
        model = sgem.fit(
            table,
            target="label",
            out=tmp_path / "run",
            progress=False,
            time_budget=budget,
            executor="inline",
        )
    assert time.perf_counter() - start <= budget + 5.0
    assert "less than its smallest run" in caplog.text and "leans on the references" in caplog.text
    names = set(model.leaderboard()["model"])
    assert {"logistic regression", "gradient boosting"} <= names, names
    assert model.predict(pd.DataFrame({"a": [1.0], "b": [2.0]})).shape == (1,)
    assert (tmp_path / "run" / TABLE_FILE).exists()  # kept for a resume


def test_a_fit_done_early_says_why(table, tmp_path) -> None:
    config = {"search": {**TINY_SEARCH, "n_iterations": 1, "final_steps": 20}}
    model = sgem.fit(
        table,
        target="label",
        out=tmp_path / "run",
        progress=False,
        config=config,
        time_budget=120,
        n_clusters=4,
        executor="inline",
    )
    why = model.result["time_budget"]["why_it_ended"]
    assert why.startswith("done early") and "search.n_iterations" in why
    # the plan's one iteration ran fast: the search ran on to twice the configured count
    assert model.result["time_budget"]["iteration_cap"] == 2
    assert model.result["selection"]["iterations_run"] == 2 and "all 2 EM" in why
    # the final stage was planned again for what the search left, and kept its length
    again = model.result["time_budget"]["final_stage_replanned"]
    assert again["seconds_left"] > 0 and again["reduced"] == []


def test_an_expert_without_a_cluster_is_dropped_before_saving(tmp_path) -> None:
    from sgem.data import make_toy_task
    from sgem.final import FinalProtocol, run_final
    from sgem.methods import drop_empty_experts
    from sgem.search.sgem import SearchResult
    from sgem.space import TabularSpace
    from sgem.train import TrainConfig, Trainer

    task = make_toy_task(0)
    space = TabularSpace()
    trainer = Trainer(task, space, TrainConfig(steps=20))
    rng = np.random.default_rng(0)
    archs = [space.sample(rng) for _ in range(3)]
    assignment = np.where(np.arange(task.n_clusters) % 2 == 0, 0, 2)  # expert 1 owns nothing
    final = run_final(task, trainer, assignment, archs, FinalProtocol(20), seed=0)
    found = SearchResult(
        assignment=assignment,
        architectures=archs,
        routing=np.eye(3)[assignment],
        trace=[],
        store=None,  # type: ignore[arg-type]
        oracle_match=None,
        n_trained=0,
        seconds=0.0,
        region_val_losses=[0.1, None, 0.3],
    )
    found, final = drop_empty_experts(found, final)
    assert sorted(set(final.assignment.tolist())) == [0, 1]
    assert [a.key for a in final.architectures] == [archs[0].key, archs[2].key]
    assert found.region_val_losses == [0.1, 0.3]
    assert found.selection["dropped_empty_experts"] == [1]
    assert len(final.report.per_expert_test_accuracy) == 2
    path = final.save(tmp_path / "model", task, space)
    model = sgem.load(path)
    assert model.spec.n_experts == 2
    x = task.test.x[:50]
    assert np.array_equal(
        model.predict(x),
        final.moe(torch.as_tensor(x), torch.as_tensor(task.test.cluster[:50])).argmax(1).numpy(),
    )


def test_a_budgeted_fit_killed_and_resumed_continues_with_what_is_left(table, tmp_path) -> None:
    """SIGKILL a budgeted `sgem fit` once its clock has recorded some seconds, resume it:
    the resumed run starts its budget from the seconds already spent, and ends within
    budget + 5 s in all."""
    import os
    import shutil
    import signal
    import subprocess

    import yaml

    from sgem.run.pipeline import resume_experiment

    out = tmp_path / "run"
    budget = 40.0
    config = tmp_path / "long.yaml"  # more iterations than the budget holds: it runs to the end
    config.write_text(yaml.safe_dump({"search": {**TINY_SEARCH, "n_iterations": 500}}))
    cmd = [
        shutil.which("sgem") or "sgem",
        "fit",
        str(table),
        "--target",
        "label",
        "--time-budget",
        f"{budget:g}s",
        "--out",
        str(out),
        "--executor",
        "inline",
        "--clusters",
        "4",
        "--quiet",
        "--config",
        str(config),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    clock = out / "budget_clock.json"
    deadline = time.time() + 60
    spent = 0.0
    while time.time() < deadline and proc.poll() is None:
        if clock.exists():
            try:
                spent = json.loads(clock.read_text())["spent_seconds"]
            except (ValueError, KeyError):
                spent = 0.0
            if spent >= 8.0:
                break
        time.sleep(0.2)
    assert proc.poll() is None, "the fit ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    start = time.perf_counter()
    result = resume_experiment(out, progress=False, executor="inline")
    resumed = time.perf_counter() - start
    before = result["clock"]["spent_before_resume_seconds"]
    assert before >= 8.0
    assert before + resumed <= budget + 5.0
    assert sgem.load(out).predict(pd.DataFrame({"a": [1.0], "b": [2.0]})).shape == (1,)


def test_a_forecaster_whose_references_eat_the_budget_still_ends_with_a_forecast(
    tmp_path, monkeypatch
) -> None:
    """AutoETS / AutoTheta come first and take most of the budget (here they are made to
    run past the budget's fence): the search that follows is cut short, the fit still ends
    within budget + 5 s, and the saved model forecasts every series (the combination leans
    on the classical members; seasonal naive runs past the fence)."""
    from test_series_combination import trend_frame
    from test_series_gaps import TINY

    import sgem.leaderboard.series_members as series_members
    import sgem.run.budget

    budget = 25.0
    monkeypatch.setattr(sgem.run.budget, "pilot_seconds", lambda *a, **k: 0.05)
    # timed as fitting the budget on every series (so they run first, on all of them),
    # they then run until the fence
    monkeypatch.setattr(
        series_members, "classical_seconds", lambda task, **k: dict.fromkeys(COSTLY, 0.25 * budget)
    )
    real = series_members._classical

    def slow(ref, *args, **kwargs):
        # each series' fit is slow: the fits run until their stop rule (the budget's fence)
        # ends them, as real fits do, checking it between series
        until = time.perf_counter() + 0.9 * budget
        while not ref.cheap and time.perf_counter() < until and not kwargs["stop"]():
            time.sleep(0.05)
        return real(ref, *args, **kwargs)

    monkeypatch.setattr(series_members, "_classical", slow)
    frame = trend_frame()
    start = time.perf_counter()
    model = sgem.fit(
        frame,
        horizon=4,
        context=8,
        out=tmp_path / "run",
        progress=False,
        config=TINY,
        time_budget=budget,
        executor="inline",
    )
    assert time.perf_counter() - start <= budget + 5.0
    plan = json.loads((tmp_path / "run" / "budget_plan.json").read_text())
    assert plan["references_on_a_subset"] is False, plan  # (the scenario: every series)
    series = [g["y"].to_numpy() for _, g in frame.groupby("unique_id", sort=False)]
    fc = model.forecast(series, quantiles=(0.1, 0.5, 0.9))
    assert fc.loc.shape == (40, 4) and np.isfinite(fc.loc).all()


@pytest.mark.parametrize("references_fit_first", [True, False])
def test_a_forecaster_whose_validation_fits_hit_the_fence_is_still_combined(
    tmp_path, monkeypatch, references_fit_first
) -> None:
    """The budget's fence passes while the MoE's validation fits train (a 2-minute fit on
    six 120k-hour electricity series): the MoE cannot be compared on validation, but the
    classical references fitted before the search still are on the holdout, and the saved
    model is their combination with it, or the MoE where it beats them there (it was the
    searched MoE, unchecked). Where the budget
    had no room for them (120 daily weather series in 2 minutes), seasonal naive (free)
    is still there to compare with (the MoE was saved unchecked)."""
    from test_series_combination import fit_trends
    from test_series_gaps import TINY

    import sgem.leaderboard.contest as contest
    import sgem.leaderboard.series_members as series_members
    import sgem.run.budget
    from sgem.train.time_fence import set_fence

    monkeypatch.setattr(sgem.run.budget, "pilot_seconds", lambda *a, **k: 0.05)
    if not references_fit_first:  # their estimate leaves them no room in the budget
        monkeypatch.setattr(
            series_members, "classical_seconds", lambda task, **k: dict.fromkeys(COSTLY, 500.0)
        )
    real = contest.validation_outputs

    def cut(*args, **kwargs):
        out = real(*args, **kwargs)
        set_fence(time.time() - 1.0)  # the fits ran into the fence
        return out

    monkeypatch.setattr(contest, "validation_outputs", cut)
    monkeypatch.setattr(contest, "retrains", lambda *a, **k: True)
    model = fit_trends(tmp_path / "run", TINY, time_budget=60, executor="inline")
    board = model.result["leaderboard"]
    assert "during the MoE's validation fits" in board["rule"], board
    models = [r["model"] for r in board["rows"]]
    assert "sgem MoE (searched)" in models and "seasonal naive" in models
    if references_fit_first:  # compared on the holdout: combined, or beaten by the MoE there
        crps = {r["model"]: (r.get("holdout") or {}).get("crps") for r in board["rows"]}
        assert crps["AutoETS"] is not None and crps["AutoTheta"] is not None
        if model.combination is None:
            assert crps["sgem MoE (searched)"] < min(crps["AutoETS"], crps["AutoTheta"])
        else:
            assert {"AutoETS", "AutoTheta"} & set(model.combination.names)
    else:  # compared with seasonal naive, which greedy selection weighs against the MoE
        assert {"AutoETS", "AutoTheta"} <= set(models)  # each row says it was skipped
        assert model.combination is None or model.combination.names == ["seasonal naive"]
    # references fitted before the search are kept for a resume, as they were scored
    kept = tmp_path / "run" / CLASSICAL_FILE
    if references_fit_first:
        assert kept.exists()
        from safetensors import safe_open

        with safe_open(str(kept), framework="np") as f:
            entries = json.loads(f.metadata()["references"])
        notes = {r["model"]: r.get("note", "") for r in board["rows"]}
        assert {e["method"] for e in entries} == {"seasonal naive", "AutoETS", "AutoTheta"}
        assert all(notes[e["method"]] == e["note"] for e in entries)


def test_classical_members_too_slow_for_a_subset_are_skipped_before_the_search(
    tmp_path, monkeypatch
) -> None:
    """Where AutoETS / AutoTheta would take so long that the budget's subset share reaches
    fewer held-out windows than they need to be scored, they are not fitted at all (3000
    daily series of up to 4000 days: 12 s of a 2-minute fit spent on fits then discarded,
    and the fit ended past its budget): their rows say why, seasonal naive stays."""
    from test_series_combination import fit_trends
    from test_series_gaps import TINY

    import sgem.leaderboard.series_members as series_members
    import sgem.run.budget

    monkeypatch.setattr(sgem.run.budget, "pilot_seconds", lambda *a, **k: 0.05)
    monkeypatch.setattr(
        series_members, "classical_seconds", lambda task, **k: dict.fromkeys(COSTLY, 5e4)
    )
    fitted, real = [], series_members._classical

    def record(ref, *args, **kwargs):
        fitted.append(ref.name)
        return real(ref, *args, **kwargs)

    monkeypatch.setattr(series_members, "_classical", record)
    model = fit_trends(tmp_path / "run", TINY, time_budget=30, executor="inline")
    assert set(fitted) == {"SeasonalNaive"}
    rows = {r["model"]: r for r in model.result["leaderboard"]["rows"]}
    for name in ("AutoETS", "AutoTheta"):
        assert "fewer than the 30 needed to score it" in rows[name]["note"], rows[name]
    assert rows["seasonal naive"].get("holdout")
    assert model.result["time_budget"]["costly_references_skipped"]


def test_timing_the_classical_members_stops_once_two_fits_put_them_past_enough(
    monkeypatch,
) -> None:
    import sgem.leaderboard.series_members as series_members

    calls = []
    monkeypatch.setattr(series_members, "statsforecast_missing", lambda: None)
    monkeypatch.setattr(
        series_members, "_classical", lambda ref, task, parts, horizon, index: calls.append(1)
    )
    monkeypatch.setattr(series_members, "_origins", lambda task, part: (None, np.arange(50), None))

    class Task:
        val = test = type("Split", (), {"y": np.zeros((50, 4)), "__len__": lambda s: 50})()

    series_members.classical_seconds(Task(), sample=12)
    assert len(calls) == 2 + 2 * 12  # warm-up, then every sample
    calls.clear()
    series_members.classical_seconds(Task(), sample=12, enough=0.0)
    assert len(calls) == 2 + 2 * 2  # warm-up, then two samples: already past `enough`


def test_the_tail_grows_with_the_held_out_values_the_leaderboard_scores() -> None:
    """The fence leaves the leaderboard's scoring its time: 2 s + 1 % of the budget, plus
    its held-out values (validation and holdout samples times their steps)."""
    from sgem.run.budget import SCORING_SECONDS_PER_VALUE, held_out_values, tail_seconds

    class Part:
        def __init__(self, n, steps):
            self.y = np.zeros((n, steps) if steps else n)

        def __len__(self):
            return len(self.y)

    class Task:
        def __init__(self, steps):
            self.val, self.test = Part(3000, steps), Part(3000, steps)

    assert tail_seconds(120) == pytest.approx(3.2)
    assert held_out_values(Task(14)) == 84_000 and held_out_values(Task(0)) == 6000
    assert tail_seconds(120, Task(14)) == pytest.approx(3.2 + 84_000 * SCORING_SECONDS_PER_VALUE)
    assert tail_seconds(120, Task(0)) < 4.0  # a table's labels: next to nothing
