"""The mixed-structure benchmark's recovery score: one-to-one vs separated."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sgem.bench.structure_recovery import recovery

STRUCTURE = np.repeat([0, 1, 2], 20)
HOLDOUT = ("choice_nll", "test_nll")


def test_one_to_one_is_recovered_and_separated() -> None:
    got = recovery(STRUCTURE, (STRUCTURE + 1) % 3)  # expert names do not matter
    assert got["recovered"] and got["separated"] and got["recovery"] == 1.0


def test_a_structure_on_two_experts_is_separated_not_recovered() -> None:
    expert = STRUCTURE.copy()
    expert[30:40] = 3  # half of structure 1 on a fourth expert of its own
    got = recovery(STRUCTURE, expert)
    assert not got["recovered"] and got["separated"]
    assert got["per_structure"] == [1.0, 0.5, 1.0]


def test_two_structures_on_one_expert_are_neither() -> None:
    got = recovery(STRUCTURE, np.minimum(STRUCTURE, 1))
    assert not got["recovered"] and not got["separated"]


def test_a_few_strays_are_tolerated_up_to_ten_percent() -> None:
    expert = STRUCTURE.copy()
    expert[[0, 20]] = 2  # 1 of 20 points of structures 0 and 1 on structure 2's expert
    got = recovery(STRUCTURE, expert)
    assert got["recovered"] and got["separated"]  # expert 2 holds 20 of 22 (0.91) of its own
    expert[[1, 21]] = 2  # now 20 of 24 (0.83): expert 2 mixes
    assert not recovery(STRUCTURE, expert)["separated"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=60, max_size=60), st.permutations(range(4)))
def test_renaming_experts_changes_nothing(expert, names) -> None:
    expert = np.asarray(expert)
    a, b = recovery(STRUCTURE, expert), recovery(STRUCTURE, np.asarray(names)[expert])
    # (per_structure may differ where several matchings tie on the matched total)
    assert [a[k] for k in ("recovery", "recovered", "separated")] == [
        b[k] for k in ("recovery", "recovered", "separated")
    ]


def test_each_k_scores_every_k_a_growing_fit_kept(tmp_path) -> None:
    """`each_k` scores every K whose model a growing fit left on the same test file (the
    first K's only where it was chosen), with that K's holdout NLL."""
    import json

    import pandas as pd
    from helpers import TINY_SEARCH

    import sgem
    from sgem.bench.structure_recovery import each_k, saved_fit

    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-4, 1, (300, 2)), rng.normal(4, 1, (300, 2))]
    frame = pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "structure": np.repeat([0, 1], 300)})
    frame["label"] = np.where(x[:, 0] > x[:, 1], "p", "n")
    frame.drop(columns="structure").iloc[::2].to_csv(tmp_path / "train.csv", index=False)
    frame.iloc[1::2].to_csv(tmp_path / "test.csv", index=False)
    out = tmp_path / "run"
    config = {"search": {**TINY_SEARCH, "n_iterations": 1}}
    options = {"progress": False, "config": config, "executor": "inline", "n_clusters": 6}
    sgem.fit(tmp_path / "train.csv", target="label", out=out, time_budget=120, **options)
    chosen = json.loads((out / "result.json").read_text())["experts_auto"]["chosen"]
    got = each_k(out, tmp_path / "test.csv")
    mine = got[str(chosen)]
    assert mine == {**saved_fit(out, tmp_path / "test.csv"), **{k: mine[k] for k in HOLDOUT}}
    assert mine["choice_nll"] > 0 and set(got) <= {"2", "3"}  # (K=4 > 6 // 2 never runs)
    assert all(0 <= v["accuracy"] <= 1 and v["K"] <= int(k) for k, v in got.items())


def test_own_probabilities_score_the_saved_network_as_calibrated(tmp_path) -> None:
    """`own_probabilities` scores the saved model's network outputs three ways; the
    calibrated kind is what `predict_proba` gives where no combination was saved."""
    import pandas as pd
    from helpers import TINY_SEARCH

    import sgem
    from sgem.bench.probabilities import own_probabilities

    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (600, 2))
    frame = pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1]})
    frame["label"] = np.where(x[:, 0] + 0.5 * rng.normal(size=600) > 0, "p", "n")
    frame.iloc[:400].to_csv(tmp_path / "train.csv", index=False)
    frame.iloc[400:].to_csv(tmp_path / "test.csv", index=False)
    out = tmp_path / "run"
    config = {"search": {**TINY_SEARCH, "n_iterations": 1}}
    model = sgem.fit(
        tmp_path / "train.csv",
        target="label",
        out=out,
        progress=False,
        config=config,
        n_clusters=4,
        combine=False,
    )
    got = own_probabilities(out, tmp_path / "test.csv", "label")
    assert set(got) >= {"raw", "temperature_only", "calibrated", "accuracy", "floor"}
    assert isinstance(got["temperature_only"], dict) and got["temperature_only_t"] > 0
    probs = model.predict_proba(frame.iloc[400:][["x1", "x2"]])
    y = (frame.iloc[400:]["label"].to_numpy() == model.classes[1]).astype(int)
    expect = -np.log(probs[np.arange(200), y]).mean()
    assert got["calibrated"]["nll"] == round(float(expect), 4)
    assert got["saved_model_nll"] == got["calibrated"]["nll"]
