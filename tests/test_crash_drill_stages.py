"""The crash drill's label of where a kill landed (sgem.run.crash_drill.interrupted_stage):
seed rounds follow the references only in a budgeted run; a table's and a forecaster's
references before the search are stages of their own."""

from __future__ import annotations

from sgem.run.crash_drill import interrupted_stage


def test_a_kill_after_the_references_is_in_the_seed_rounds_only_under_a_budget():
    before = {"search": 1.0, "final_stage": 1.0}
    after = {**before, "references": 0.5}
    assert interrupted_stage(before, after, saved=False, budgeted=True) == "seed_rounds"
    assert interrupted_stage(before, after, saved=False, budgeted=False) == "leaderboard"
    rounds = {**after, "seed_rounds": 2.0}
    assert interrupted_stage(before, rounds, saved=False, budgeted=True) == "leaderboard"
    assert interrupted_stage(before, before, saved=False) == "search"
    assert interrupted_stage(before, after, saved=True) == "figures"


def test_the_references_before_the_search_are_named_for_their_task():
    table = {"scikit_learn_references": 3.0}
    assert interrupted_stage({}, {}, saved=False, kind="table") == "scikit_learn_references"
    assert interrupted_stage({}, table, saved=False, kind="table") == "planning"
    planned = {"planning": 0.2}
    assert interrupted_stage({}, planned, saved=False, kind="series") == "classical_references"
    refs = {**planned, "classical_references": 4.0}
    assert interrupted_stage({}, refs, saved=False, kind="series") == "search"
    assert interrupted_stage(table, {**table, **planned}, saved=False, kind="table") == "search"
    assert interrupted_stage({}, planned, saved=False) == "search"  # (toy, images: no such stage)
