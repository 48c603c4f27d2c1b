"""A run calibrates the model it saves: result.json and the card report coverage / ECE
before and after, regression scores come in the target's units, and a nonnegative target
gets no negative quantile."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_fit import TINY

import sgem
from sgem.moe.calibration import MIN_FLOOR


@pytest.fixture(scope="module")
def positive_regression(tmp_path_factory):
    """A regression table whose target is never below 0 and often near it."""
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-3, 1, (250, 2)), rng.normal(3, 1, (250, 2))]
    price = rng.exponential(1.0, 500) * (1 + (x[:, 0] > 0)) * np.exp(0.2 * x[:, 1])
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "price": price})
    folder = tmp_path_factory.mktemp("reg")
    frame.to_csv(folder / "reg.csv", index=False)
    model = sgem.fit(
        folder / "reg.csv", target="price", out=folder / "run", progress=False, config=TINY
    )
    return model, frame


def test_quantiles_of_a_nonnegative_target_never_go_below_zero(positive_regression) -> None:
    model, frame = positive_regression
    x = frame[["a", "b"]]
    raw = model.predict_quantiles(x, quantiles=(0.05, 0.5, 0.95), calibrated=False)
    assert raw[0.05].min() < 0  # the Student-t alone would go negative
    q = model.predict_quantiles(x, quantiles=(0.05, 0.5, 0.95))
    assert min(v.min() for v in q.values()) >= 0 and model.predict(x).min() >= 0
    assert np.all(q[0.05] <= q[0.5]) and np.all(q[0.5] <= q[0.95])
    assert model.calibration["support"] == {"lower": 0.0}


def test_a_regression_run_stores_calibration_and_scores_in_target_units(
    positive_regression,
) -> None:
    model, frame = positive_regression
    result = model.result
    cal = result["calibration"]
    assert cal["source"] == "each expert retrained on its region's training split only"
    assert set(cal["holdout"]["coverage_80"]) == {"raw", "calibrated"}
    assert "calibration" in result["timing"] and "intervals" in model.calibration
    # result.json, the card and evaluate() speak the target's units
    std = model.spec.info["target_standardisation"]["std"]
    assert result["test_crps"] == pytest.approx(result["test_crps_target_units"])
    assert result["test_mae"] > 0 and "standardised" in result["test_nll_units"]
    scores = model.evaluate(frame[["a", "b"]], frame["price"])
    assert 0 <= scores["test_coverage_80"] <= 1
    assert scores["test_rmse"] == pytest.approx(
        np.sqrt(np.mean((model.predict(frame[["a", "b"]]) - frame["price"]) ** 2)), rel=0.2
    )
    assert std > 0
    text = model.summary()
    assert "holdout: 20 % of the training file (no network or reference fitted or" in text
    assert "80 % interval coverage raw -> calibrated" in text


def test_a_classification_run_fits_a_temperature(tmp_path, monkeypatch) -> None:
    # the MoE's own temperature: no combination (which a tiny search's MoE could join
    # with weight 0, leaving nothing for the temperature to change)
    monkeypatch.setattr("sgem.leaderboard.combining.combine", lambda *a, **k: (None, None))
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-1, 1, (200, 2)), rng.normal(1, 1, (200, 2))]
    label = np.where(x[:, 0] + x[:, 1] + rng.normal(0, 1, 400) > 0, "yes", "no")
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "label": label})
    frame.to_csv(tmp_path / "c.csv", index=False)
    model = sgem.fit(
        tmp_path / "c.csv", target="label", out=tmp_path / "run", progress=False, config=TINY
    )
    t = model.temperature
    assert t is not None and t > 0 and t != 1.0
    p, raw = (
        model.predict_proba(frame[["a", "b"]]),
        model.predict_proba(frame[["a", "b"]], calibrated=False),
    )
    assert not np.allclose(p, raw) and np.array_equal(p.argmax(1), raw.argmax(1))
    report = model.result["calibration"]
    assert set(report["holdout"]["ece_15"]) == {"raw", "calibrated"}
    assert set(report["holdout"]["nll"]) == {"raw", "temperature_only", "calibrated"}
    floor = model.calibration["floor"]  # every probability at least floor / C
    assert floor >= MIN_FLOOR and p.min() >= floor / 2 * (1 - 1e-6)
    assert "the networks' holdout NLL raw" in model.summary()
    assert "ECE (15 bins)" in model.summary()
    scores = model.evaluate(frame[["a", "b"]], frame["label"])
    assert 0 <= scores["test_ece_15"] <= 1
    truth = (frame["label"] == model.classes[1]).to_numpy().astype(int)  # what users get
    assert scores["test_nll_calibrated"] == pytest.approx(-np.log(p[np.arange(400), truth]).mean())


def test_evaluate_scores_what_predict_gives(positive_regression, tmp_path) -> None:
    """MAE, RMSE and coverage of the predictions a user gets (a combination's included),
    rows without a target left out with a note, and the quantiles `sgem predict` is asked."""
    from sgem.run.predict_io import predict_file

    model, frame = positive_regression
    x, y = frame[["a", "b"]], frame["price"].to_numpy()
    point, q = model.predict(x), model.predict_quantiles(x, (0.1, 0.9))
    scores = model.evaluate(x, y)
    assert scores["test_mae"] == pytest.approx(np.mean(np.abs(point - y)), rel=1e-6)
    assert scores["test_mae"] <= scores["test_rmse"] * (1 + 1e-9)
    assert scores["test_coverage_80"] == pytest.approx(np.mean((y >= q[0.1]) & (y <= q[0.9])))
    holey = y.copy()
    holey[:100] = np.nan
    with pytest.warns(UserWarning, match="left out 100 of 500 rows"):
        part = model.evaluate(x, holey)
    expect = np.mean((y[100:] >= q[0.1][100:]) & (y[100:] <= q[0.9][100:]))
    assert part["test_coverage_80"] == pytest.approx(expect)
    frame.drop(columns="price").to_csv(tmp_path / "new.csv", index=False)
    out = predict_file(model, tmp_path / "new.csv", quantiles=(0.05, 0.95))
    assert {"q0.05", "q0.95"} <= set(out.columns) and "q0.1" not in out.columns
    with pytest.raises(sgem.SgemUserError, match="strictly between 0 and 1"):
        model.predict_quantiles(x, (0.5, 1.5))
    # the leaderboard's RMSE in the target's units, as the user's own would be
    board, report = model.leaderboard(), model.result["leaderboard"]
    std = model.spec.info["target_standardisation"]["std"]
    raw = report["rows"][0]["holdout"]["rmse"]
    assert board.set_index("model").loc[report["rows"][0]["model"], "holdout_rmse"] == (
        pytest.approx(raw * std)
    )
