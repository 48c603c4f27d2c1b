"""ONNX export: onnxruntime gives what `predict_proba` / `predict_quantiles` / `forecast`
give (calibration included) within 1e-4, per kind; what cannot be exported is refused with
a message that says why."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from test_fit import TINY

import sgem
from sgem.errors import SgemUserError
from sgem.export import export_onnx, read_metadata
from sgem.export.feeds import OnnxRunner, onnx_feeds, parity
from sgem.export.graph_parts import StudentTQuantiles
from sgem.final.moe_fit import train_final_moe
from sgem.moe.artifact import save_final_moe, save_learnable_moe
from sgem.moe.calibration import IntervalCalibration
from sgem.moe.learnable_gate import train_learnable_gate_moe
from sgem.space import Arch, TabularSpace, TimeSeriesSpace
from sgem.train import TrainConfig, Trainer

pytest.importorskip("onnxruntime")
TOL = 1e-4


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # table-contract notes on purposely odd rows
        return fn(*args, **kwargs)


def _save(task, space, archs, path, steps, info, **train) -> Path:
    trainer = Trainer(task, space, TrainConfig(steps=steps, **train))
    assignment = np.arange(task.n_clusters) % len(archs)
    moe, report = train_final_moe(task, trainer, assignment, archs, steps=steps, seed=1)
    save_final_moe(path, task, space, moe, trainer.n_out, metrics=report.to_json(), info=info)
    return path


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    task = sgem.make_toy_task(seed=0, n_per_cloud=100, n_test_per_cloud=50, n_clusters=6)
    archs = [Arch(("linear", "rbf"), (0, 0)), Arch(("rbf", "square"), (0, 1))]
    info = {"seed": 1, "calibration": {"temperature": 0.7, "floor": 0.01}}
    path = _save(
        task, TabularSpace(n_nodes=2), archs, tmp_path_factory.mktemp("toy") / "m", 30, info
    )
    return task, sgem.load(path)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """A classifier and a regressor fitted on tables with a categorical column and missing
    values (imputation, indicators, a fitted temperature / conformal intervals)."""
    folder = tmp_path_factory.mktemp("tables")
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-3, 1, (250, 2)), rng.normal(3, 1, (250, 2))]
    frame = pd.DataFrame(
        {"a": x[:, 0], "b": 100 * x[:, 1], "kind": rng.choice(["u", "v", "w"], 500)}
    )
    frame["label"] = np.where(x[:, 0] + x[:, 1] + (frame["kind"] == "u") > 0, "yes", "no")
    frame["price"] = rng.exponential(1.0, 500) * (1 + (x[:, 0] > 0)) * np.exp(0.2 * x[:, 1])
    frame.loc[::17, "a"] = np.nan
    frame.loc[::13, "kind"] = None
    models = {}
    with pytest.MonkeyPatch.context() as patch:  # the MoE itself is exported: no combination
        # (a tiny search's MoE loses to gradient boosting on the holdout, and a combination
        # is refused by the export: see the refusal test below)
        patch.setattr("sgem.leaderboard.combining.combine", lambda *a, **k: (None, None))
        for target, drop in (("label", "price"), ("price", "label")):
            frame.drop(columns=drop).to_csv(folder / f"{target}.csv", index=False)
            models[target] = _quiet(
                sgem.fit,
                folder / f"{target}.csv",
                target=target,
                out=folder / target,
                progress=False,
                config=TINY,
            )
    new = frame.drop(columns=["label", "price"]).head(40).copy()
    new.loc[1, "kind"] = "never seen"
    new.loc[2, "b"] = np.nan  # missing where training had none
    return models, new


def _series(seed: int, n: int, length: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    return [
        10 + 3 * np.sin(2 * np.pi * t / (12 + 12 * seed)) + rng.normal(0, 0.3, length) * (i + 1)
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def forecaster(tmp_path_factory):
    domains = {"a": _series(0, 4, 200), "b": [100 * s - 900 for s in _series(1, 4, 200)]}
    task = sgem.make_timeseries_task(domains, n_windows=160, n_clusters=4, context=24, horizon=6)
    ops = ["moving_average", "linear_trend", "gru", "patch_attention", "dilated_conv", "skip"]
    space = TimeSeriesSpace(op_names=ops, n_nodes=2, channels=4)
    archs = [
        Arch(("moving_average", "patch_attention"), (0, 1)),
        Arch(("gru", "dilated_conv"), (0, 0)),
        Arch(("linear_trend", "skip"), (0, 1)),
    ]
    path = _save(task, space, archs, tmp_path_factory.mktemp("ts") / "m", 5, {}, batch_size=32)
    model = sgem.load(path)
    val = task.val  # a conformal calibration as the final stage stores it
    out = model.outputs(val.x, val.cluster).double().numpy()
    cal = IntervalCalibration.fit(
        val.y, out[..., 0], out[..., 1], out[..., 2], val.cluster, min_count=5
    )
    model.spec.info["calibration"] = {"intervals": cal.to_json()}
    series = [*domains["a"], *domains["b"]]
    series[0] = series[0].copy()
    series[0][[-3, -2, -9]] = np.nan  # gaps inside the context and at its end
    series[1] = series[1][-10:]  # shorter than the context
    series[2] = np.r_[np.full(30, np.nan), series[2][30:]]
    return model, series


def _check(model, path, x, quantiles=(0.1, 0.5, 0.9)):
    diffs = _quiet(parity, model, path, x, quantiles)
    assert diffs["cluster"] == 0 and diffs["expert"] == 0, diffs
    assert max(diffs.values()) <= TOL, diffs
    return diffs


def test_toy_classifier_parity_one_row_and_many(toy, tmp_path) -> None:
    task, model = toy
    info = export_onnx(model, tmp_path / "toy.onnx")
    assert info.kind == "classifier" and set(info.inputs) == {"x"}
    _check(model, tmp_path / "toy.onnx", task.test.x)
    _check(model, tmp_path / "toy.onnx", task.test.x[:1])
    raw = OnnxRunner(tmp_path / "toy.onnx").run({"x": task.test.x[:5].astype(np.float64)})
    assert np.allclose(raw["probabilities"].sum(1), 1, atol=1e-6)


def test_tables_with_categories_and_missing_values(tables, tmp_path) -> None:
    models, new = tables
    for target, kind in (("label", "classifier"), ("price", "regressor")):
        path = tmp_path / f"{target}.onnx"
        info = export_onnx(models[target], path, quantiles=(0.05, 0.5, 0.95))
        assert info.kind == kind and set(info.inputs) == {"x", "categories"}
        feeds = _quiet(onnx_feeds, models[target], new)
        assert feeds["categories"][1, 0] == "never seen" and feeds["categories"][0, 0] == ""
        _check(models[target], path, new, (0.05, 0.5, 0.95))
        _check(models[target], path, new.iloc[[5]], (0.05, 0.5, 0.95))
    meta = read_metadata(tmp_path / "label.onnx")
    assert '"kind": ["u", "v", "w"]' in meta["sgem.categorical_columns"]


def _fit_combined(frame: pd.DataFrame, target: str, tmp_path: Path):
    """A tiny fit of `frame` saved as a combination in which the members carry weight."""
    frame.to_csv(tmp_path / "table.csv", index=False)
    fit = {"target": target, "out": tmp_path / "run", "progress": False, "config": TINY}
    model = _quiet(sgem.fit, tmp_path / "table.csv", **fit)
    mix = model.combination
    assert mix is not None and len(mix.members) >= 1 and mix.weights[1:].sum() > 0
    return model


def test_a_classifier_saved_as_a_combination_exports_with_its_members(tmp_path) -> None:
    """Three classes, a categorical column and missing values: the saved combination
    (the MoE beside logistic regression and gradient boosting) is what the graph gives."""
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (600, 3))
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": 10 * x[:, 2]})
    frame["kind"] = rng.choice(["u", "v"], 600)
    score = x[:, 0] + np.sin(3 * x[:, 1]) + (frame["kind"] == "u")
    frame["label"] = np.select([score < -0.3, score < 0.8], ["lo", "mid"], "hi")
    frame.loc[::11, "b"] = np.nan
    frame.loc[::7, "kind"] = None
    model = _fit_combined(frame, "label", tmp_path)
    info = export_onnx(model, tmp_path / "mix.onnx")
    assert info.kind == "classifier" and "gradient boosting" in info.describe()
    assert read_metadata(tmp_path / "mix.onnx")["sgem.model"].startswith("a combination: the")
    new = frame.drop(columns="label").head(60).copy()
    new.loc[3, "kind"] = "never seen"
    _check(model, tmp_path / "mix.onnx", new)
    _check(model, tmp_path / "mix.onnx", new.iloc[[7]])


def test_a_regression_saved_as_a_combination_exports_with_its_members(tmp_path) -> None:
    """The mixture of the MoE's Student-t and its members' Normals: quantiles by bisection
    of the mixture's CDF in the graph, the point its mean, as `predict` gives them."""
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (500, 3))
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "kind": rng.choice(["u", "v"], 500)})
    frame["price"] = 50 + 20 * x[:, 0] + 10 * np.sin(3 * x[:, 1]) + rng.normal(0, 5, 500)
    frame.loc[::9, "a"] = np.nan
    model = _fit_combined(frame, "price", tmp_path)
    assert not model.is_classifier
    info = export_onnx(model, tmp_path / "mix.onnx", quantiles=(0.05, 0.5, 0.95))
    assert info.kind == "regressor" and info.outputs["point"].startswith("float64")
    new = frame.drop(columns="price").head(50)
    _check(model, tmp_path / "mix.onnx", new, (0.05, 0.5, 0.95))
    _check(model, tmp_path / "mix.onnx", new.iloc[[9]], (0.05, 0.5, 0.95))
    model.combination.point = "median"  # (a combination can save its median as the point)
    export_onnx(model, tmp_path / "median.onnx", quantiles=(0.5,))
    _check(model, tmp_path / "median.onnx", new, (0.5,))


def test_the_student_t_cdf_matches_scipy() -> None:
    from sgem.export.mixture_parts import StudentTCdf

    rng = np.random.default_rng(0)
    x = rng.standard_t(2.5, 20000) * rng.choice([0.3, 3, 30, 200], 20000)
    df = np.exp(rng.uniform(np.log(2.01), np.log(1e4), 20000))
    df[:500] = 1000.0  # the df that stands for a member's Normal
    cdf = StudentTCdf()
    whole = cdf.integral(torch.full((20000,), np.pi / 2, dtype=torch.float64), torch.as_tensor(df))
    got = cdf(torch.as_tensor(x), torch.as_tensor(df), whole).numpy()
    assert np.abs(got - stats.t.cdf(x, df)).max() < 5e-8


def test_forecaster_parity_with_gaps_short_and_negative_series(forecaster, tmp_path) -> None:
    model, series = forecaster
    export_onnx(model, tmp_path / "ts.onnx", quantiles=(0.1, 0.25, 0.5, 0.9))
    diffs = _check(model, tmp_path / "ts.onnx", series, (0.1, 0.25, 0.5, 0.9))
    assert diffs["quantiles"] > 0  # floats in two runtimes: close, not bit-identical
    _check(model, tmp_path / "ts.onnx", series[:1], (0.1, 0.25, 0.5, 0.9))
    short = [s[-10:] for s in series[3:6]]  # every row shorter than the context
    _check(model, tmp_path / "ts.onnx", short, (0.1, 0.25, 0.5, 0.9))
    out = OnnxRunner(tmp_path / "ts.onnx").run(onnx_feeds(model, series))
    assert out["quantiles"].shape == (len(series), 4, 6)


def test_learnable_gate_classifier(toy, tmp_path) -> None:
    task, _ = toy
    space = TabularSpace(n_nodes=2)
    archs = [Arch(("linear", "rbf"), (0, 0)), Arch(("rbf", "square"), (0, 1))]
    trainer = Trainer(task, space, TrainConfig(steps=20))
    moe, _ = train_learnable_gate_moe(task, trainer, archs, seed=0, gate_width=4)
    path = save_learnable_moe(tmp_path / "m", task, space, moe, archs, trainer.n_out, 4)
    model = sgem.load(path)
    export_onnx(model, tmp_path / "gate.onnx")
    _check(model, tmp_path / "gate.onnx", task.test.x)


def test_student_t_table_matches_scipy() -> None:
    df = np.r_[2.0001, 2.5, 3.7, 10.0, 55.5, 1e4]
    qs = (0.01, 0.1, 0.5, 0.9, 0.99)
    table = StudentTQuantiles(qs, None, 1)
    got = table(
        torch.zeros(6, dtype=torch.float64),
        torch.ones(6, dtype=torch.float64),
        torch.as_tensor(df),
        torch.zeros(6, dtype=torch.long),
    ).numpy()
    want = np.stack([stats.t.ppf(q, df) for q in qs])
    assert np.max(np.abs(got - want)) < 1e-6


def test_refusals_say_what_and_why(toy, forecaster, tmp_path, monkeypatch) -> None:
    from types import SimpleNamespace

    from sgem.moe.model import SgemModel
    from sgem.moe.preprocess import ImagePreprocessor

    _, model = toy
    with pytest.raises(SgemUserError, match="strictly between 0 and 1"):
        export_onnx(model, tmp_path / "a.onnx", quantiles=(0.5, 1.0))
    series = forecaster[0]
    series.combination = SimpleNamespace(names=["AutoETS"])
    try:
        with pytest.raises(SgemUserError, match=r"combination .*AutoETS.*refit on each series"):
            export_onnx(series, tmp_path / "a.onnx")
    finally:
        series.combination = None
    monkeypatch.setattr(SgemModel, "learnable_gate", property(lambda self: True))
    with pytest.raises(
        SgemUserError, match="learnable-gate model is exported only as a classifier"
    ):
        export_onnx(forecaster[0], tmp_path / "a.onnx")
    monkeypatch.undo()
    image = object.__new__(ImagePreprocessor)
    monkeypatch.setattr(model, "preprocessor", image)
    with pytest.raises(SgemUserError, match="image models cannot be exported"):
        export_onnx(model, tmp_path / "a.onnx")
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(SgemUserError, match=r"pip install 'sgem\[export\]'"):
        export_onnx(model, tmp_path / "a.onnx")
    assert not (tmp_path / "a.onnx").exists()


def test_cli_export(toy, tmp_path, capsys) -> None:
    from sgem.cli import main

    _, model = toy
    out = tmp_path / "cli" / "toy.onnx"
    assert main(["export", model.path, "--format", "onnx", "--out", str(out)]) == 0
    assert out.is_file() and "probabilities" in capsys.readouterr().out
    assert main(["export", str(tmp_path / "nothing"), "--out", str(out)]) == 2


def test_an_averaged_expert_exports_with_parity(forecaster, tmp_path) -> None:
    """An expert that averages networks (`sgem.moe.averaged`: twins, a table's fold
    networks) is one module to the graph: the exported forecaster matches `forecast`."""
    import copy

    from sgem.moe.averaged import AveragedExpert

    model, series = forecaster
    averaged = copy.deepcopy(model)
    first = averaged.moe.experts[0]
    other = copy.deepcopy(first)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.randn_like(p))
    averaged.moe.experts[0] = AveragedExpert([first, other], "student_t").eval()
    export_onnx(averaged, tmp_path / "avg.onnx", quantiles=(0.1, 0.5, 0.9))
    _check(averaged, tmp_path / "avg.onnx", series)
    out = OnnxRunner(tmp_path / "avg.onnx").run(onnx_feeds(averaged, series))
    assert (out["expert"] == 0).any()  # the averaged expert forecast some of the series


@pytest.mark.parametrize("n_classes", [2, 3])
def test_member_probabilities_match_the_portable_models(n_classes) -> None:
    """Each scikit-learn member as tensor ops (`MemberProbabilities`) gives what the saved
    member gives (`PortableModel.predict_proba`), on rows with missing values too."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression

    from sgem.export.member_parts import MemberProbabilities
    from sgem.moe.portable import PortableModel, export

    rng = np.random.default_rng(n_classes)
    x = rng.normal(0, 1, (400, 4))
    y = (x[:, 0] + np.sin(2 * x[:, 1]) > 0).astype(int) + (n_classes == 3) * (x[:, 2] > 1)
    holey = x.copy()
    holey[::9, 1] = np.nan
    logistic = export(LogisticRegression(max_iter=500).fit(x, y))
    one_vs_rest = ({**logistic[0], "multiclass": "ovr"}, logistic[1])  # (older scikit-learn's)
    trees = export(HistGradientBoostingClassifier(max_iter=30, random_state=0).fit(holey, y))
    new = rng.normal(0, 1.5, (200, 4))
    for state, feed in ((logistic, new), (one_vs_rest, new), (trees, holey[:200])):
        member = PortableModel.from_state(*state)
        want = np.maximum(member.predict_proba(feed), 1e-12)
        want /= want.sum(1, keepdims=True)
        got = MemberProbabilities(member, n_classes)(torch.as_tensor(feed)).numpy()
        assert np.abs(got - want).max() < 1e-12, state[0]["kind"]


def test_the_graph_names_its_network_as_the_leaderboard_does() -> None:
    """Where selective routing sent every cluster to the global network, the graph's
    `sgem.model` says so (it used to say "the MoE" whatever the routing)."""
    from types import SimpleNamespace

    from sgem.export.onnx_export import _holds

    mix = SimpleNamespace(names=["ridge regression"], weights=[0.84, 0.16])

    def model(fallback: list[int], combination) -> SimpleNamespace:
        info = {"leaderboard": {"fallback_clusters": fallback}}
        return SimpleNamespace(
            spec=SimpleNamespace(info=info, n_clusters=3), combination=combination
        )

    assert _holds(model([0, 1, 2], mix)) == (
        "a combination: the global network 0.84, ridge regression 0.16"
    )
    assert _holds(model([1], mix)).startswith("a combination: the MoE 0.84")
    assert _holds(model([0, 1, 2], None)) == "the global network alone"
    assert _holds(model([], None)) == "the MoE alone"
