"""`model.explain(x)` / `sgem explain`: the explained cluster and expert are the ones predict
routes, the chosen cluster is the nearest centroid, the fit's per-cluster validation NLLs
are shown, and permutation importance finds the informative column, not the noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import TINY_SEARCH

import sgem
from sgem.cli import main
from sgem.errors import SgemUserError
from sgem.final.moe_fit import train_final_moe
from sgem.moe.artifact import save_final_moe
from sgem.run.predict_io import predict_table
from sgem.space import Arch, TabularSpace, TimeSeriesSpace
from sgem.train import TrainConfig, Trainer


def _table(n: int, seed: int) -> pd.DataFrame:
    """Two clouds, each split by `b` at its own centre; `noise` and `color` carry nothing."""
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(-3, 1, (n // 2, 2)), rng.normal(3, 1, (n // 2, 2))]
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "noise": rng.normal(size=n)})
    frame["color"] = rng.choice(["r", "g", "b"], n)
    frame["label"] = np.where(x[:, 1] > np.where(x[:, 0] < 0, -3.0, 3.0), "p", "n")
    return frame


@pytest.fixture(scope="module")
def table_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("explain") / "run"
    sgem.fit(
        _table(600, 0),
        target="label",
        out=out,
        progress=False,
        config={"search": TINY_SEARCH},
        n_clusters=4,
        executor="inline",
    )
    return out


def _nearest_is_chosen(frame: pd.DataFrame) -> None:
    dist = frame[[c for c in frame.columns if c.startswith("distance_c")]].to_numpy()
    assert np.array_equal(dist.argmin(1), frame["cluster"].to_numpy())
    assert (frame["margin"] >= 0).all()


def test_explained_routing_is_predicts_and_the_nearest_centroid(table_run) -> None:
    model = sgem.load(table_run)
    new = _table(200, 1)
    frame = model.explain(new)
    predicted = predict_table(model, new)
    assert np.array_equal(frame["cluster"], predicted["cluster"])
    assert np.array_equal(frame["expert"], predicted["expert"])
    _nearest_is_chosen(frame)
    board = model.spec.info["leaderboard"]
    per_cluster = board["per_cluster"]  # stored at save time, one entry per cluster
    assert sorted(per_cluster) == [str(c) for c in range(model.spec.n_clusters)]
    for _, r in frame.iterrows():
        stored = per_cluster[str(r["cluster"])]
        assert r["expert_val_nll"] == stored["expert_nll"] and r["val_n"] == stored["n"]
        assert r["rerouted"] == (r["cluster"] in board["fallback_clusters"])
    # the stored gains agree with the leaderboard's own per-cluster evidence
    for c, ev in board["evidence"].items():
        if c != "overall" and "nll_gain" in ev:
            s = per_cluster[c]
            assert s["fallback_nll"] - s["expert_nll"] == pytest.approx(ev["nll_gain"], abs=2e-5)


def test_a_rerouted_cluster_is_marked(table_run) -> None:
    model = sgem.load(table_run)
    board = model.spec.info["leaderboard"]
    model.spec.info["leaderboard"] = {**board, "fallback_clusters": [1]}
    frame = model.explain(_table(100, 2))
    assert frame["rerouted"].tolist() == (frame["cluster"] == 1).tolist()


def test_importance_of_noise_is_near_zero_beside_the_informative_column(table_run) -> None:
    model = sgem.load(table_run)
    new = _table(400, 3)
    imp = model.explain_importance(new, new["label"], n_repeats=3, seed=0)
    assert set(imp["column"]) == {"a", "b", "noise", "color"}  # input columns, not one-hot
    top = imp.loc[imp["rows"] == imp["rows"].max(), "expert"].min()  # (two may tie)
    busiest = imp[imp["expert"] == top].set_index("column")["importance"]
    assert busiest["b"] > 0.3, imp
    assert abs(busiest["noise"]) < 0.1 * busiest["b"] and abs(busiest["color"]) < 0.1 * busiest["b"]
    again = model.explain_importance(new, new["label"], n_repeats=3, seed=0)
    pd.testing.assert_frame_equal(imp, again)  # a fixed seed gives the same table
    with pytest.raises(SgemUserError, match="not the model's classes"):
        model.explain_importance(new, np.full(len(new), "zebra"))


def test_cli_explains_writes_csv_and_refuses_bad_input(table_run, tmp_path, capsys) -> None:
    new = _table(60, 4)
    new.to_csv(tmp_path / "new.csv", index=False)
    out = tmp_path / "why.csv"
    args = ["explain", str(table_run), str(tmp_path / "new.csv"), "--out", str(out)]
    assert main([*args, "--importance", "--rows", "3"]) == 0
    text = capsys.readouterr().out
    assert "per cluster" in text and "row 2: cluster" in text and "row 3:" not in text
    assert "permutation importance" in text
    written = pd.read_csv(out)
    assert len(written) == 60 and {"cluster", "expert", "expert_val_nll"} <= set(written)
    assert (tmp_path / "why.importance.csv").is_file()
    new.drop(columns="label").to_csv(tmp_path / "unlabelled.csv", index=False)
    new.drop(columns="b").to_csv(tmp_path / "no_b.csv", index=False)
    for bad, message in (
        ("unlabelled.csv", "needs the true targets"),
        ("no_b.csv", "['b'] not in the table"),
        ("absent.csv", "does not exist"),
    ):
        extra = ["--importance"] if bad == "unlabelled.csv" else []
        assert main(["explain", str(table_run), str(tmp_path / bad), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err


def _series(seed: int, n: int, length: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    period = 12 + 12 * seed
    return [
        10 + 3 * np.sin(2 * np.pi * t / period) + rng.normal(0, 0.3 * (i + 1), length)
        for i in range(n)
    ]


def test_series_are_explained_as_forecast_routes_them(tmp_path) -> None:
    domains = {"a": _series(0, 3, 200), "b": [100 * s for s in _series(1, 3, 200)]}
    task = sgem.make_timeseries_task(
        domains, n_windows=120, n_clusters=3, context=24, horizon=6, seed=0
    )
    space = TimeSeriesSpace(op_names=["linear_trend", "skip"], n_nodes=2, channels=4)
    archs = [Arch(("linear_trend", "skip"), (0, 1)), Arch(("skip", "linear_trend"), (0, 0))]
    trainer = Trainer(task, space, TrainConfig(steps=5, batch_size=32))
    assignment = np.arange(task.n_clusters) % 2
    moe, report = train_final_moe(task, trainer, assignment, archs, steps=5, seed=1)
    save_final_moe(tmp_path / "m", task, space, moe, trainer.n_out, metrics=report.to_json())
    model = sgem.load(tmp_path / "m")
    series = [*domains["a"], *domains["b"]]
    frame = model.explain(series, ids=[f"s{i}" for i in range(6)])
    fc = model.forecast(series)
    assert frame["unique_id"].tolist() == [f"s{i}" for i in range(6)]
    assert np.array_equal(frame["cluster"], fc.cluster)
    assert np.array_equal(frame["expert"], fc.expert)
    _nearest_is_chosen(frame)
    assert frame["expert_val_nll"].isna().all()  # saved without a leaderboard
    long = pd.DataFrame(
        [
            {"unique_id": f"s{i}", "ds": t, "y": v}
            for i, s in enumerate(series)
            for t, v in enumerate(s)
        ]
    )
    long.to_csv(tmp_path / "series.csv", index=False)
    assert main(["explain", str(tmp_path / "m"), str(tmp_path / "series.csv")]) == 0
    with pytest.raises(SgemUserError, match="for table models"):
        model.explain_importance(series, np.zeros((6, 6)))


def test_a_learnable_gate_shows_its_probabilities(tmp_path) -> None:
    from sgem.moe.artifact import save_learnable_moe
    from sgem.moe.learnable_gate import train_learnable_gate_moe

    task = sgem.make_toy_task(seed=0, n_per_cloud=100, n_test_per_cloud=50, n_clusters=4)
    space = TabularSpace(n_nodes=2)
    archs = [Arch(("linear", "rbf"), (0, 0)), Arch(("rbf", "identity"), (0, 1))]
    trainer = Trainer(task, space, TrainConfig(steps=10))
    moe, report = train_learnable_gate_moe(task, trainer, archs, seed=0, steps=10, gate_width=8)
    save_learnable_moe(
        tmp_path / "g",
        task,
        space,
        moe,
        archs,
        trainer.n_out,
        gate_width=8,
        metrics=report.to_json(),
    )
    model = sgem.load(tmp_path / "g")
    frame = model.explain(task.test.x)
    gate = frame[["gate_e0", "gate_e1"]].to_numpy()
    assert np.allclose(gate.sum(1), 1.0, atol=1e-5)
    assert np.array_equal(gate.argmax(1), frame["expert"])
    assert np.array_equal(frame["cluster"], model.route(task.test.x).cluster)
    _nearest_is_chosen(frame)


def test_images_are_explained_in_the_stored_embedding(tmp_path) -> None:
    from sgem.space import DartsSpace

    rng = np.random.default_rng(0)
    dark = rng.integers(0, 60, size=(40, 8, 8, 3), dtype=np.uint8)
    light = rng.integers(180, 255, size=(40, 8, 8, 3), dtype=np.uint8)
    x = np.concatenate([dark, light])
    task = sgem.make_image_task(x, np.tile([0, 1], 40), np.repeat([0, 1], 40), n_clusters=3)
    space = DartsSpace(op_names=["skip", "max_pool_3x3"], n_cell_nodes=1, init_channels=4)
    archs = [Arch(("skip", "max_pool_3x3"), (0, 0)), Arch(("max_pool_3x3", "skip"), (0, 0))]
    trainer = Trainer(task, space, TrainConfig(steps=2, batch_size=16))
    moe, report = train_final_moe(task, trainer, np.arange(3) % 2, archs, steps=2, seed=1)
    save_final_moe(tmp_path / "i", task, space, moe, trainer.n_out, metrics=report.to_json())
    model = sgem.load(tmp_path / "i")
    frame = model.explain(x[::7])
    assert np.array_equal(frame["cluster"], model.route(x[::7]).cluster)
    _nearest_is_chosen(frame)
    np.savez(tmp_path / "images.npz", x=x[:5])
    assert main(["explain", str(tmp_path / "i"), str(tmp_path / "images.npz"), "--rows", "2"]) == 0
