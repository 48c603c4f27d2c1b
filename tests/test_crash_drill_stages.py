"""The crash drill's label of where a kill landed (sgem.run.crash_drill.interrupted_stage):
seed rounds follow the references only in a budgeted run."""

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
