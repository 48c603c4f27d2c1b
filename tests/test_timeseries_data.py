"""Forecasting windows from several domains and the clustered time-series task."""

from __future__ import annotations

import numpy as np
import pytest

import sgem.data.timeseries as ts
from sgem.data.timeseries import (
    DESCRIPTOR_NAMES,
    MONASH_FILES,
    OFFLINE_FILES,
    assign_windows,
    load_domains,
    make_timeseries_task,
    make_windows,
    unscale,
    window_descriptors,
)
from sgem.data.tsf import TSFData, write_tsf

CONTEXT, HORIZON = 96, 24


@pytest.fixture(scope="module")
def domains(shared_timeseries_dir):
    return load_domains(offline=True)


@pytest.fixture(scope="module")
def windows(domains):
    return make_windows(domains, CONTEXT, HORIZON, n_windows=1000, seed=3)


@pytest.fixture(scope="module")
def task(domains):
    return make_timeseries_task(domains, n_windows=800, n_clusters=8, seed=0)


# -- loading ------------------------------------------------------------------------------


def test_offline_domains(domains):
    assert list(domains) == list(MONASH_FILES) == list(OFFLINE_FILES)
    assert len(domains["tourism_monthly"]) == 366


def test_missing_monash_file_names_it_and_the_archive(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_domains(tmp_path, names=["weather"])
    message = str(info.value)
    assert "weather_dataset.tsf" in message and str(tmp_path) in message
    assert "Monash Time Series Forecasting Archive" in message
    assert "forecastingdata.org" in message and "Zenodo" in message


def test_load_by_path_and_unknown_name(tmp_path):
    data = TSFData([np.arange(200.0)], [{"series_name": "x"}], {"series_name": "string"})
    path = write_tsf(data, tmp_path / "mine.tsf")
    loaded = load_domains(names=[str(path)])
    assert list(loaded) == ["mine"] and loaded["mine"] == data
    assert list(load_domains(tmp_path, names=["mine.tsf"])) == ["mine"]
    with pytest.raises(ValueError, match="unknown domain 'traffic'"):
        load_domains(tmp_path, names=["traffic"])
    with pytest.raises(ValueError, match="give the directory"):
        load_domains()


# -- windows ------------------------------------------------------------------------------


def test_window_shapes_balance_and_no_missing(windows):
    n = len(windows)
    assert n == 1000
    assert windows.context.shape == (n, CONTEXT) and windows.target.shape == (n, HORIZON)
    assert np.isfinite(windows.context).all() and np.isfinite(windows.target).all()
    assert np.bincount(windows.source).tolist() == [250, 250, 250, 250]
    assert windows.domain_names == tuple(MONASH_FILES)


def test_scaling_and_unscaling(windows, domains):
    floored = windows.floored
    mean_abs = np.abs(windows.context).mean(axis=1)
    np.testing.assert_allclose(mean_abs[~floored], 1.0, rtol=1e-9)
    # a floored scale is larger than the context's level: the context reads below 1
    assert (mean_abs[floored] < 1.0).all()
    assert floored.mean() < 0.05
    # unscaling gives back the raw series values at the recorded position
    raw_ctx = unscale(windows.context, windows.scale)
    raw_tgt = unscale(windows.target, windows.scale)
    names = windows.domain_names
    for i in range(0, len(windows), 37):
        series = domains[names[windows.source[i]]].series[windows.series[i]]
        at = windows.start[i]
        np.testing.assert_allclose(raw_ctx[i], series[at : at + CONTEXT], rtol=1e-12)
        np.testing.assert_allclose(
            raw_tgt[i], series[at + CONTEXT : at + CONTEXT + HORIZON], rtol=1e-12
        )


def test_scale_never_sees_the_target():
    rng = np.random.default_rng(0)
    head = rng.uniform(1.0, 3.0, CONTEXT)
    small = np.concatenate([head, np.full(HORIZON, 2.0)])
    huge = np.concatenate([head, np.full(HORIZON, 1e9)])
    a = make_windows({"d": [small]}, CONTEXT, HORIZON, n_windows=1)
    b = make_windows({"d": [huge]}, CONTEXT, HORIZON, n_windows=1)
    assert a.scale[0] == b.scale[0] == pytest.approx(np.abs(head).mean())
    np.testing.assert_array_equal(a.context, b.context)
    assert b.target.min() > 1e8


def test_all_zero_context_keeps_raw_units():
    series = np.concatenate([np.zeros(CONTEXT), np.full(HORIZON, 5.0)])
    w = make_windows({"rain": [series]}, CONTEXT, HORIZON, n_windows=1)
    assert w.scale[0] == 1.0 and (w.target == 5.0).all() and (w.context == 0).all()
    assert w.floored[0]


def test_near_zero_context_is_floored_by_the_series_history():
    """A dry spell with one drizzle after a wet history: scale = 0.2 x history mean |x|."""
    wet = np.full(200, 4.0)
    dry = np.zeros(CONTEXT)
    dry[10] = 0.2
    series = np.concatenate([wet, dry, np.full(HORIZON, 100.0)])
    w = make_windows({"rain": [series]}, CONTEXT, HORIZON, n_windows=201, seed=0)
    last = np.flatnonzero(w.start == 200)[0]
    history = np.abs(series[: 200 + CONTEXT]).mean()
    assert w.scale[last] == pytest.approx(0.2 * history) and w.floored[last]
    assert w.target[last].max() == pytest.approx(100.0 / (0.2 * history))
    # without the floor the old behaviour: divided by the context's tiny mean
    unfloored = make_windows({"rain": [series]}, CONTEXT, HORIZON, 201, 0, floor_fraction=0.0)
    assert unfloored.target[last].max() == pytest.approx(100.0 / (0.2 / CONTEXT))
    with pytest.raises(ValueError, match="floor_fraction"):
        make_windows({"rain": [series]}, CONTEXT, HORIZON, 1, floor_fraction=-1.0)


def test_scaled_weather_targets_stay_bounded(domains):
    """Rainfall's dry contexts used to blow targets up to |y| ~ 5000; the floor bounds them."""
    weather = {"weather": domains["weather"]}
    w = make_windows(weather, CONTEXT, HORIZON, n_windows=12000, seed=0)
    assert np.abs(w.target).max() < 600 and np.quantile(np.abs(w.target), 0.999) < 100
    old = make_windows(weather, CONTEXT, HORIZON, n_windows=12000, seed=0, floor_fraction=0.0)
    assert np.abs(old.target).max() > 2000  # the failure the floor fixes is in this data


def test_weather_yields_windows_despite_missing_months(domains):
    weather = domains["weather"]
    assert sum(np.isnan(s).sum() for s in weather.series) > 1000  # the gaps are there
    w = make_windows({"weather": weather}, CONTEXT, HORIZON, n_windows=400, seed=1)
    assert len(w) == 400 and np.isfinite(w.context).all() and np.isfinite(w.target).all()
    for i in range(len(w)):
        s = weather.series[w.series[i]][w.start[i] : w.start[i] + CONTEXT + HORIZON]
        assert np.isfinite(s).all()


def test_short_series_skipped_and_too_few_windows():
    long = np.arange(1.0, 131.0)  # 130 values: 11 windows of 120
    short = np.arange(1.0, 100.0)
    w = make_windows({"d": [short, long, short]}, CONTEXT, HORIZON, n_windows=11)
    assert (w.series == 1).all() and sorted(w.start.tolist()) == list(range(11))
    with pytest.raises(ValueError, match=r"domain 'd' has 11 windows .* fewer than the 12"):
        make_windows({"d": [short, long]}, CONTEXT, HORIZON, n_windows=12)
    gappy = long.copy()
    gappy[60] = np.nan  # every window of 120 within 130 values contains position 60
    with pytest.raises(ValueError, match="has 0 windows"):
        make_windows({"d": [gappy]}, CONTEXT, HORIZON, n_windows=1)


def test_unbalanced_count_floors_per_domain(domains):
    three = {k: domains[k] for k in ("electricity_hourly", "weather", "tourism_monthly")}
    w = make_windows(three, CONTEXT, HORIZON, n_windows=301, seed=0)
    assert np.bincount(w.source).tolist() == [100, 100, 100]


def test_windows_are_reproducible(domains):
    a = make_windows(domains, CONTEXT, HORIZON, n_windows=200, seed=5)
    b = make_windows(domains, CONTEXT, HORIZON, n_windows=200, seed=5)
    np.testing.assert_array_equal(a.context, b.context)
    np.testing.assert_array_equal(a.start, b.start)


# -- descriptors --------------------------------------------------------------------------


def test_descriptors(windows):
    d = window_descriptors(windows.context)
    assert d.shape == (len(windows), len(DESCRIPTOR_NAMES)) and np.isfinite(d).all()
    col = {n: i for i, n in enumerate(DESCRIPTOR_NAMES)}
    t = np.arange(CONTEXT)
    rng = np.random.default_rng(0)
    x = np.stack(
        [
            1.0 + np.sin(2 * np.pi * t / 24),  # daily cycle in hourly data
            rng.normal(size=CONTEXT),  # white noise
            np.ones(CONTEXT),  # constant
            np.linspace(0.0, 2.0, CONTEXT),  # trend
        ]
    )
    d = window_descriptors(x)
    assert np.isfinite(d).all()
    sine, noise, const, trend = d
    assert sine[col["acf_24"]] > 0.7 and sine[col["acf_12"]] < -0.7
    assert sine[col["dominant_power"]] > 0.9 and sine[col["spectral_entropy"]] < 0.1
    assert noise[col["spectral_entropy"]] > 0.8 and abs(noise[col["acf_24"]]) < 0.4
    assert const[col["std"]] == 0 and const[col["acf_1"]] == 0
    assert const[col["spectral_entropy"]] == 0
    assert trend[col["slope"]] == pytest.approx(2.0) and trend[col["acf_1"]] > 0.9


# -- the task -----------------------------------------------------------------------------


def test_task_shapes_and_contract(task):
    assert task.loss == "student_t" and task.n_classes is None
    assert task.input_shape == (CONTEXT,)
    assert len(task.train) + len(task.val) + len(task.test) == 800
    assert len(task.val) == len(task.test) == 120
    for split in (task.train, task.val, task.test):
        assert split.x.dtype == np.float32 and split.y.dtype == np.float32
        assert split.y.shape == (len(split), HORIZON)
        assert split.source is not None and np.isfinite(split.x).all()
        # the split is stratified: every domain equally represented
        assert len(set(np.bincount(split.source).tolist())) == 1
    m = task.n_clusters
    assert m + task.meta["merged_clusters"] == 8
    assert (task.cluster_sizes > 0).all() and (task.val_cluster_sizes > 0).all()
    purity = np.asarray(task.meta["purity_per_cluster"])
    assert purity.shape == (m,) and ((purity >= 0) & (purity <= 1)).all()
    assert 0.25 <= task.meta["mean_purity"] <= 1.0
    assert task.oracle_partition.shape == (m,)
    assert set(task.oracle_partition.tolist()) <= {0, 1, 2, 3}
    assert task.meta["domain_names"] == list(MONASH_FILES)
    for name in ("train", "val", "test"):
        split = getattr(task, name)
        scale = task.meta["scale"][name]
        assert scale.shape == (len(split),) and (scale > 0).all()
        np.testing.assert_array_equal(task.meta["windows"][name].source, split.source)
    # assigning the task's own windows reproduces its clusters
    np.testing.assert_array_equal(assign_windows(task, task.test.x), task.test.cluster)
    np.testing.assert_array_equal(assign_windows(task, task.train.x), task.train.cluster)


def test_clustering_is_fitted_on_training_windows_only(domains, task, monkeypatch):
    """Replacing every test window by noise changes nothing but the test assignments."""
    original = ts.make_windows

    def with_altered_test(*args, **kwargs):
        win = original(*args, **kwargs)
        _, _, test_idx = ts._split_indices(win.source, (0.70, 0.15, 0.15), 0)
        noise = np.random.default_rng(99).normal(0.0, 50.0, (len(test_idx), CONTEXT))
        win.context[test_idx] = noise
        return win

    monkeypatch.setattr(ts, "make_windows", with_altered_test)
    altered = make_timeseries_task(domains, n_windows=800, n_clusters=8, seed=0)
    assert not np.allclose(altered.test.x, task.test.x)
    for key in ("descriptor_centroids", "descriptor_mean", "descriptor_std"):
        np.testing.assert_array_equal(altered.meta[key], task.meta[key])
    np.testing.assert_array_equal(altered.train.cluster, task.train.cluster)
    np.testing.assert_array_equal(altered.val.cluster, task.val.cluster)
    np.testing.assert_array_equal(altered.train.x, task.train.x)


def test_clusters_without_validation_windows_are_merged(domains):
    task = make_timeseries_task(domains, n_windows=400, n_clusters=40, seed=0)
    merged = task.meta["merged_clusters"]
    assert merged > 0 and task.n_clusters == 40 - merged
    assert task.meta["n_clusters_requested"] == 40
    assert (task.val_cluster_sizes > 0).all() and (task.cluster_sizes > 0).all()
    assert task.meta["descriptor_centroids"].shape[0] == task.n_clusters


def test_task_from_a_directory_and_bad_split(tmp_path, domains):
    for name in ("weather", "tourism_monthly"):
        write_tsf(domains[name], tmp_path / MONASH_FILES[name])
    task = make_timeseries_task(
        tmp_path, names=["weather", "tourism_monthly"], n_windows=400, n_clusters=4, seed=1
    )
    assert task.meta["domain_names"] == ["weather", "tourism_monthly"]
    with pytest.raises(ValueError, match="split must be three positive fractions"):
        make_timeseries_task(domains, n_windows=400, split=(0.8, 0.2, 0.0))


def test_too_few_clusters_left_after_merging(domains):
    two = {k: domains[k] for k in ("weather", "tourism_monthly")}
    too_few = r"only 2 of the 5 k-means clusters kept training and validation windows"
    with pytest.raises(ValueError, match=too_few):
        make_timeseries_task(two, n_windows=10, n_clusters=5)
