"""The saved model: save -> load in a fresh process -> the run's own scores, route, predict,
forecast; bad model directories and bad inputs are refused with clear messages; loading
never executes anything from the directory."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import sgem
from sgem.errors import SgemUserError
from sgem.final.moe_fit import train_final_moe
from sgem.moe.artifact import MODEL_JSON, save_final_moe
from sgem.space import Arch, DartsSpace, TabularSpace, TimeSeriesSpace
from sgem.train import TrainConfig, Trainer


def _fit_and_save(task, space, archs, path: Path, steps: int = 30, **train) -> dict:
    trainer = Trainer(task, space, TrainConfig(steps=steps, **train))
    assignment = np.arange(task.n_clusters) % len(archs)
    moe, report = train_final_moe(task, trainer, assignment, archs, steps=steps, seed=1)
    metrics = report.to_json()
    save_final_moe(path, task, space, moe, trainer.n_out, metrics=metrics, info={"seed": 1})
    return metrics


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    task = sgem.make_toy_task(seed=0, n_per_cloud=200, n_test_per_cloud=100, n_clusters=6)
    space = TabularSpace(n_nodes=2)
    archs = [Arch(("linear", "rbf"), (0, 0)), Arch(("rbf", "identity"), (0, 1))]
    path = tmp_path_factory.mktemp("toy") / "model"
    metrics = _fit_and_save(task, space, archs, path)
    return task, path, metrics


def _series(seed: int, n: int, length: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    return [
        10 + 3 * np.sin(2 * np.pi * t / (12 + 12 * seed)) + rng.normal(0, 0.3, length) * (i + 1)
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def forecaster(tmp_path_factory):
    domains = {"a": _series(0, 4, 300), "b": [100 * s for s in _series(1, 4, 300)]}
    task = sgem.make_timeseries_task(
        domains, n_windows=240, n_clusters=4, context=24, horizon=6, seed=0
    )
    space = TimeSeriesSpace(
        op_names=["moving_average", "linear_trend", "skip"], n_nodes=2, channels=4
    )
    archs = [Arch(("linear_trend", "skip"), (0, 1)), Arch(("moving_average", "skip"), (0, 0))]
    path = tmp_path_factory.mktemp("ts") / "model"
    metrics = _fit_and_save(task, space, archs, path, steps=10, batch_size=32)
    return task, path, metrics, domains


def test_reload_in_a_fresh_process_reproduces_the_scores(toy) -> None:
    _, path, metrics = toy
    script = (
        "import json, sys, sgem\n"
        "t = sgem.make_toy_task(seed=0, n_per_cloud=200, n_test_per_cloud=100, n_clusters=6)\n"
        f"m = sgem.load({str(path)!r})\n"
        "print(json.dumps([m.evaluate(t.test), m.evaluate(t.test.x, t.test.y)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    split_scores, raw_scores = json.loads(out.stdout)
    for scores in (split_scores, raw_scores):
        assert scores["test_accuracy"] == metrics["test_accuracy"]
        assert scores["test_nll"] == metrics["test_nll"]
        assert scores["per_expert_test_accuracy"] == metrics["per_expert_test_accuracy"]


def test_route_predict_and_summary(toy) -> None:
    task, path, _ = toy
    model = sgem.load(path)
    routing = model.route(task.test.x)
    assert np.array_equal(routing.cluster, task.test.cluster)
    assert np.array_equal(routing.expert, model.assignment[task.test.cluster])
    proba = model.predict_proba(task.test.x[:7])
    assert proba.shape == (7, 4) and np.allclose(proba.sum(1), 1.0, atol=1e-5)
    assert np.array_equal(model.predict(task.test.x[:7]), proba.argmax(1))
    text = str(model)
    assert "expert 0" in text and "expert 1" in text and "test_accuracy" in text
    # a single sample as a 1-D feature vector works too
    assert model.predict(task.test.x[0]).shape == (1,)


def test_model_dir_copied_elsewhere_loads(toy, tmp_path) -> None:
    import shutil

    _, path, metrics = toy
    copy = tmp_path / "elsewhere" / "m"
    shutil.copytree(path, copy)
    doc = (copy / MODEL_JSON).read_text()
    assert str(path) not in doc  # no absolute paths inside
    assert sgem.load(copy).spec.metrics["test_nll"] == metrics["test_nll"]


def test_forecast_in_original_units(forecaster) -> None:
    task, path, metrics, domains = forecaster
    model = sgem.load(path)
    assert model.evaluate(task.test)["test_nll"] == metrics["test_nll"]
    series = [domains["a"][0], domains["b"][0], domains["b"][1][:50]]
    fc = model.forecast(series, quantiles=(0.1, 0.5, 0.9))
    assert fc.loc.shape == (3, 6)
    # the "b" domain is 100x the "a" domain: forecasts come back in each series' units
    assert 5 < np.median(fc.point[0]) < 20 and 500 < np.median(fc.point[1]) < 2000
    assert np.all(fc.quantiles[0.1] <= fc.quantiles[0.5] + 1e-9)
    assert np.all(fc.quantiles[0.5] <= fc.quantiles[0.9] + 1e-9)
    assert np.allclose(fc.quantiles[0.5], fc.point)
    frame = fc.to_frame(ids=["a0", "b0", "b1"])
    assert len(frame) == 18 and {"unique_id", "forecast", "q0.1", "expert"} <= set(frame)
    # a scaled series is routed to the same cluster (descriptors are scale-free)
    assert model.route([series[0] * 7.0]).cluster[0] == model.route([series[0]]).cluster[0]


def test_image_model_routes_new_images(tmp_path) -> None:
    rng = np.random.default_rng(0)
    dark = rng.integers(0, 60, size=(60, 8, 8, 3), dtype=np.uint8)
    light = rng.integers(180, 255, size=(60, 8, 8, 3), dtype=np.uint8)
    x = np.concatenate([dark, light])
    y = np.tile([0, 1], 60)
    task = sgem.make_image_task(x, y, np.repeat([0, 1], 60), n_clusters=4, seed=0)
    space = DartsSpace(op_names=["skip", "max_pool_3x3"], n_cell_nodes=1, init_channels=4)
    archs = [Arch(("skip", "max_pool_3x3"), (0, 0)), Arch(("max_pool_3x3", "skip"), (0, 0))]
    metrics = _fit_and_save(task, space, archs, tmp_path / "m", steps=5, batch_size=16)
    model = sgem.load(tmp_path / "m")
    assert model.evaluate(task.test)["test_accuracy"] == metrics["test_accuracy"]
    routing = model.route(x)
    all_clusters = np.concatenate([task.train.cluster, task.val.cluster, task.test.cluster])
    assert sorted(routing.cluster.tolist()) == sorted(all_clusters.tolist())
    with pytest.raises(SgemUserError, match=r"shape \(n, 8, 8, 3\)"):
        model.predict(np.zeros((2, 16, 16, 3), dtype=np.uint8))
    with pytest.raises(SgemUserError, match="uint8"):
        model.predict(np.zeros((2, 8, 8, 3), dtype=np.float32))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.zeros((3, 5)), r"shape \(n_samples, 2\)"),
        (np.array([[0.0, np.nan]]), "NaN or inf"),
        (np.zeros((0, 2)), "no samples"),
    ],
)
def test_bad_tabular_inputs(toy, bad, message) -> None:
    model = sgem.load(toy[1])
    with pytest.raises(SgemUserError, match=message):
        model.predict(bad)


def test_bad_forecast_inputs(forecaster) -> None:
    model = sgem.load(forecaster[1])
    # a short history is padded and a gap filled: both are forecast (tests/test_series_gaps.py)
    assert np.isfinite(model.forecast([np.ones(10), np.r_[np.ones(30), np.nan]]).loc).all()
    with pytest.raises(SgemUserError, match="no value"):
        model.forecast([np.full(30, np.nan)])
    with pytest.raises(SgemUserError, match="classification"):
        model.predict_proba([np.ones(30)])


def _copy(path: Path, tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / "copy"
    shutil.copytree(path, dst)
    return dst


def test_newer_format_refused(toy, tmp_path) -> None:
    path = _copy(toy[1], tmp_path)
    doc = json.loads((path / MODEL_JSON).read_text())
    doc["format_version"] = 99
    (path / MODEL_JSON).write_text(json.dumps(doc))
    with pytest.raises(SgemUserError, match="newer than this sgem reads"):
        sgem.load(path)


def test_tampered_weights_refused(toy, tmp_path) -> None:
    path = _copy(toy[1], tmp_path)
    data = bytearray((path / "experts.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (path / "experts.safetensors").write_bytes(bytes(data))
    with pytest.raises(SgemUserError, match="checksum"):
        sgem.load(path)


def test_architecture_that_does_not_fit_the_weights_refused(toy, tmp_path) -> None:
    path = _copy(toy[1], tmp_path)
    doc = json.loads((path / MODEL_JSON).read_text())
    doc["experts"][0]["architecture"] = {"ops": ["square", "shift"], "inputs": [0, 1]}
    (path / MODEL_JSON).write_text(json.dumps(doc))
    with pytest.raises(SgemUserError, match="do not fit its architecture"):
        sgem.load(path)


def test_missing_files_refused(toy, tmp_path) -> None:
    path = _copy(toy[1], tmp_path)
    (path / "preprocessing.safetensors").unlink()
    with pytest.raises(SgemUserError, match="incomplete"):
        sgem.load(path)
    with pytest.raises(SgemUserError, match="holds no saved model"):
        sgem.load(tmp_path / "nothing")


class _Boom:
    def __reduce__(self):
        return (Path.touch, (Path(_Boom.marker),))


def test_loading_never_unpickles(toy, tmp_path) -> None:
    """Pickles planted where a careless loader would look are never read."""
    path = _copy(toy[1], tmp_path)
    marker = tmp_path / "pwned"
    _Boom.marker = str(marker)
    payload = pickle.dumps(_Boom())
    for name in ("model.pkl", "experts.pt", "model.pt", "pytorch_model.bin", "preprocess.pkl"):
        (path / name).write_bytes(payload)
    before = torch.load  # a careless loader would reach for torch.load / pickle.load

    def refuse(*args, **kwargs):
        raise AssertionError("the loader called torch.load/pickle.load")

    torch.load = refuse
    original_pickle_load, pickle.load = pickle.load, refuse
    try:
        model = sgem.load(path)
        model.predict(np.zeros((1, 2)))
    finally:
        torch.load = before
        pickle.load = original_pickle_load
    assert not marker.exists()


def test_run_directory_holds_a_model_and_cli_predicts(toy_smoke_run, tmp_path) -> None:
    from helpers import TOY_SMOKE_SEED, copy_run

    from sgem.cli import main

    run, result = copy_run(toy_smoke_run[0], tmp_path / "run"), toy_smoke_run[1]
    assert result["model"] == "model" and (run / "model" / MODEL_JSON).is_file()
    model = sgem.load(run)
    task = sgem.make_toy_task(seed=TOY_SMOKE_SEED)
    scores = model.evaluate(task.test)
    saved = model.spec.metrics  # the saved model's: the leaderboard may reroute clusters
    assert scores["test_accuracy"] == saved["test_accuracy"]
    assert scores["test_nll"] == saved["test_nll"]
    if not result["leaderboard"].get("fallback_clusters"):  # saved = the searched MoE
        assert saved["test_nll"] == result["test_nll"]
    points = tmp_path / "points.csv"
    points.write_text("x0,x1\n-6.0,1.0\n2.0,1.0\n3.0,0.0\n")
    assert main(["predict", str(run), str(points), "--out", str(tmp_path / "p.csv")]) == 0
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0].startswith("row,prediction,p_0") and len(lines) == 4
    assert main(["show", str(run)]) == 0
    assert (run / "model" / "cells.png").is_file()
    assert main(["predict", str(run), str(tmp_path / "missing.csv"), "--out", "x.csv"]) == 2


def test_learnable_gate_moe_saved_and_reloaded(toy, tmp_path) -> None:
    from sgem.moe.artifact import save_learnable_moe
    from sgem.moe.learnable_gate import train_learnable_gate_moe

    task = toy[0]
    space = TabularSpace(n_nodes=2)
    archs = [Arch(("linear", "rbf"), (0, 0)), Arch(("rbf", "identity"), (0, 1))]
    trainer = Trainer(task, space, TrainConfig(steps=30))
    moe, report = train_learnable_gate_moe(task, trainer, archs, seed=0, steps=30, gate_width=8)
    save_learnable_moe(
        tmp_path / "m",
        task,
        space,
        moe,
        archs,
        trainer.n_out,
        gate_width=8,
        metrics=report.to_json(),
    )
    model = sgem.load(tmp_path / "m")
    assert model.learnable_gate and model.spec.gate == "learnable"
    scores = model.evaluate(task.test)
    assert abs(scores["test_accuracy"] - report.test_accuracy) < 1e-6
    assert abs(scores["test_nll"] - report.test_nll) < 1e-6
    routing = model.route(task.test.x)
    assert set(routing.expert.tolist()) <= {0, 1}
    assert np.array_equal(routing.cluster, task.test.cluster)
