"""Issue 17: every bad input gets a clear `SgemUserError` (or, where the fix is to accept it,
the right behaviour). One case per probe of the probe battery, plus neighbours.

Each error case asserts the type and a message fragment that names the problem (the field or
argument, the value, what is allowed). Everything here is small: the module runs in seconds.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import yaml

import sgem
from sgem import SearchConfig, SurrogateConfig, TrainConfig
from sgem.data import ClusteredTask, Split, build_task
from sgem.data.tsf import TSFData, TSFFormatError, read_tsf, write_tsf
from sgem.errors import SgemUserError

# -- configs ------------------------------------------------------------------------------

SEARCH_BAD = [
    # (kwargs, message fragment)
    ({"gumbel_temperature": 0}, r"gumbel_temperature = 0 .*> 0"),
    ({"gumbel_temperature": -0.5}, r"gumbel_temperature = -0\.5"),
    ({"gumbel_temperature": math.nan}, r"gumbel_temperature = nan .*finite"),
    ({"routing_lr": 0.0}, r"routing_lr = 0\.0 .*> 0"),
    ({"routing_lr": math.inf}, r"routing_lr = inf .*finite"),
    ({"explore": "no"}, r"explore = 'no' \(str\).*true or false"),
    ({"jumps": 1}, r"jumps = 1 \(int\).*true or false"),
    ({"measure_incumbents": None}, r"measure_incumbents = None"),
    ({"n_iterations": "2"}, r"n_iterations = '2' \(str\).*integer >= 1.*without quotes"),
    ({"n_iterations": None}, r"n_iterations = None.*remove the key to use the default \(20\)"),
    ({"n_iterations": 2.5}, r"n_iterations = 2\.5 \(float\).*integer >= 1.*whole number"),
    ({"n_iterations": 2.0}, r"n_iterations = 2\.0 \(float\).*write 2"),
    ({"n_iterations": True}, r"n_iterations = True \(bool\)"),
    ({"n_experts": 0}, r"n_experts = 0 .*integer >= 1"),
    ({"n_init": -3}, r"n_init = -3"),
    ({"init_min_mask": 0}, r"init_min_mask = 0"),
    ({"pool_size": 0}, r"pool_size = 0"),
    ({"mc_masks": 0}, r"mc_masks = 0"),
    ({"explore_groups": 0}, r"explore_groups = 0"),
    ({"final_steps": 0}, r"final_steps = 0"),
    ({"refit_budget": -1}, r"refit_budget = -1 .*integer >= 0"),
    ({"routing_steps": -1}, r"routing_steps = -1 .*integer >= 0"),
    ({"lb_weight": -0.1}, r"lb_weight = -0\.1 .*>= 0"),
    ({"lb_kind": "cluster"}, r"lb_kind = 'cluster'.*\['clusters', 'samples'\]"),
    ({"train": None}, r"search\.train must be a mapping of TrainConfig fields, got None"),
    ({"surrogate": "big"}, r"search\.surrogate must be a mapping"),
]

SURROGATE_BAD = [
    ({"hidden": 0}, r"SurrogateConfig\.hidden = 0 .*integer >= 1"),
    ({"hidden": "64"}, r"hidden = '64' \(str\)"),
    ({"gcn_layers": -1}, r"gcn_layers = -1 .*>= 0"),
    ({"mc_samples": 0}, r"mc_samples = 0 .*integer >= 1"),
    ({"dropout": 1.0}, r"dropout = 1\.0 .*in \[0, 1\)"),
    ({"dropout": -0.1}, r"dropout = -0\.1"),
    ({"lr": 0}, r"SurrogateConfig\.lr = 0 .*> 0"),
    ({"weight_decay": -1e-4}, r"weight_decay = -0\.0001 .*>= 0"),
    ({"epochs_first": 0}, r"epochs_first = 0"),
    ({"epochs_refit": 0}, r"epochs_refit = 0"),
    ({"clip_quantile": 0.0}, r"clip_quantile = 0\.0 .*in \(0, 1\]"),
    ({"clip_quantile": 1.5}, r"clip_quantile = 1\.5"),
]

TRAIN_BAD = [
    ({"steps": 0}, r"TrainConfig\.steps = 0 .*integer >= 1"),
    ({"steps": "100"}, r"steps = '100' \(str\)"),
    ({"lr": -1.0}, r"TrainConfig\.lr = -1\.0 .*> 0"),
    ({"lr": "3e-3"}, r"lr = '3e-3'.*write 3\.0e-3 or 0\.003"),
    ({"weight_decay": math.nan}, r"weight_decay = nan"),
    ({"optimizer": "adamw"}, r"optimizer = 'adamw'.*\['adam', 'sgd'\]"),
    ({"optimizer": None}, r"optimizer = None"),
    ({"schedule": "linear"}, r"schedule = 'linear'.*\['constant', 'cosine'\]"),
    ({"momentum": 1.0}, r"momentum = 1\.0 .*in \[0, 1\)"),
    ({"nesterov": "yes"}, r"nesterov = 'yes'.*true or false"),
    ({"amp": None}, r"amp = None"),
    ({"channels_last": 0}, r"channels_last = 0 \(int\)"),
    ({"batch_size": 0}, r"batch_size = 0 .*integer >= 1 or null"),
    ({"epochs": 1.5}, r"epochs = 1\.5"),
    ({"grad_clip": 0.0}, r"grad_clip = 0\.0 .*> 0 or null"),
    ({"eval_batch_size": 2.0}, r"eval_batch_size = 2\.0"),
]


@pytest.mark.parametrize(("kwargs", "fragment"), SEARCH_BAD, ids=lambda v: str(v)[:40])
def test_search_config_refuses(kwargs, fragment):
    with pytest.raises(SgemUserError, match=fragment):
        SearchConfig(**kwargs)
    with pytest.raises(SgemUserError, match=fragment):  # the YAML path says the same
        SearchConfig.from_dict(kwargs)


@pytest.mark.parametrize(("kwargs", "fragment"), SURROGATE_BAD, ids=lambda v: str(v)[:40])
def test_surrogate_config_refuses(kwargs, fragment):
    with pytest.raises(SgemUserError, match=fragment):
        SurrogateConfig(**kwargs)
    with pytest.raises(SgemUserError, match=fragment + r".*config section 'search\.surrogate'"):
        SearchConfig.from_dict({"surrogate": kwargs})


@pytest.mark.parametrize(("kwargs", "fragment"), TRAIN_BAD, ids=lambda v: str(v)[:40])
def test_train_config_refuses(kwargs, fragment):
    with pytest.raises(SgemUserError, match=fragment):
        TrainConfig(**kwargs)
    with pytest.raises(SgemUserError, match=fragment + r".*config section 'search\.train'"):
        SearchConfig.from_dict({"train": kwargs})


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (
            {"n_iteration": 2},
            r"unknown key\(s\) \['n_iteration'\] in search; known keys: .*n_iterations",
        ),
        ({"train": {"stepz": 1}}, r"\['stepz'\] in search\.train; known keys: \['steps'"),
        (
            {"surrogate": {"layers": 2}},
            r"\['layers'\] in search\.surrogate; known keys: .*gcn_layers",
        ),
        ([("n_iterations", 2)], r"search must be a mapping"),
    ],
)
def test_from_dict_refuses_unknown_keys(data, fragment):
    with pytest.raises(SgemUserError, match=fragment):
        SearchConfig.from_dict(data)


def test_yaml_slips_are_named():
    """What a hand-written YAML file really produces: a quoted "no" is a string (not false),
    an exponent without a dot is a string in YAML 1.1."""
    cfg = yaml.safe_load('explore: "no"\ntrain:\n  lr: 3e-3\n')
    assert cfg["explore"] == "no" and cfg["train"]["lr"] == "3e-3"
    with pytest.raises(SgemUserError, match=r"explore = 'no'"):
        SearchConfig.from_dict(cfg)
    del cfg["explore"]
    with pytest.raises(SgemUserError, match=r"3\.0e-3"):
        SearchConfig.from_dict(cfg)
    ok = yaml.safe_load("explore: no\ntrain:\n  lr: 3.0e-3\n")
    assert SearchConfig.from_dict(ok) == SearchConfig(explore=False, train=TrainConfig(lr=3e-3))


def test_valid_configs_are_accepted():
    """Zero where zero means something, numpy scalars, nested mappings, and the round trip."""
    cfg = SearchConfig(
        refit_budget=0,
        routing_steps=0,
        acquisitions_per_expert=0,
        finalist_budget=0,
        lb_weight=0,
        n_iterations=np.int64(3),
        gumbel_temperature=np.float32(0.25),
        explore=np.bool_(False),
        train={"steps": 5, "batch_size": None, "grad_clip": 1},
        surrogate={"gcn_layers": 0, "dropout": 0.0},
    )
    assert isinstance(cfg.train, TrainConfig) and cfg.train.steps == 5
    assert isinstance(cfg.surrogate, SurrogateConfig) and cfg.surrogate.gcn_layers == 0
    assert SearchConfig.from_dict(cfg.to_dict()) == cfg
    # numpy scalars become plain Python values: the config serialises to YAML and JSON
    assert type(cfg.n_iterations) is int and type(cfg.gumbel_temperature) is float
    assert type(cfg.explore) is bool
    assert SearchConfig.from_dict(yaml.safe_load(yaml.safe_dump(cfg.to_dict()))) == cfg
    assert TrainConfig.from_dict({"lr": 1}).lr == 1
    assert SurrogateConfig.from_dict({"mc_samples": 1}).mc_samples == 1


def test_presets_and_config_files_still_load():
    import sgem.run.pipeline as p

    for name in p.PRESETS:
        cfg = SearchConfig.from_dict(p.load_config(name)["search"])
        assert SearchConfig.from_dict(cfg.to_dict()) == cfg
    from pathlib import Path

    for path in sorted(Path(__file__).parents[1].glob("configs/*.yaml")):
        section = (yaml.safe_load(path.read_text()) or {}).get("search", {})
        base = "images-paper" if "paper" in path.name else "toy"
        SearchConfig.from_dict(p.merge(p.load_config(base)["search"], section))


def test_config_errors_are_value_errors():
    """SgemUserError is a ValueError: existing `except ValueError` code keeps working."""
    with pytest.raises(ValueError):
        SearchConfig(n_experts=0)


# -- .tsf files ---------------------------------------------------------------------------


def small_tsf() -> TSFData:
    return TSFData(
        series=[np.array([1.0, 2.5, 3.0]), np.array([4.0, np.nan])],
        attributes=[{"series_name": "a"}, {"series_name": "b"}],
        attribute_types={"series_name": "string"},
        frequency="daily",
        missing=True,
    )


def test_tsf_with_a_utf8_byte_order_mark_is_read(tmp_path):
    path = write_tsf(small_tsf(), tmp_path / "plain.tsf")
    bom = tmp_path / "bom.tsf"
    bom.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert read_tsf(bom) == small_tsf()
    # also when the file starts with a comment, and with Windows line ends
    text = "# from Excel\r\n" + path.read_text().replace("\n", "\r\n")
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    data = read_tsf(bom)
    assert data.comments == [" from Excel"] and data.series[0].tolist() == [1.0, 2.5, 3.0]


def test_tsf_2d_series_is_refused(tmp_path):
    with pytest.raises(
        SgemUserError, match=r"series 1 must be 1-D .*got shape \(3, 2\).*values\.T"
    ):
        TSFData(
            series=[np.arange(3.0), np.zeros((3, 2))],
            attributes=[{"n": "a"}, {"n": "b"}],
            attribute_types={"n": "string"},
        )
    data = small_tsf()
    data.series[0] = np.zeros((2, 2))  # reassigned after construction: write_tsf checks too
    with pytest.raises(SgemUserError, match=r"series 0 must be 1-D"):
        write_tsf(data, tmp_path / "x.tsf")
    assert not (tmp_path / "x.tsf").exists()


def test_tsf_non_numeric_series_is_refused():
    with pytest.raises(SgemUserError, match=r"series 0 could not be read as numbers"):
        TSFData(series=[["a", "b"]], attributes=[{"n": "a"}], attribute_types={"n": "string"})


def test_tsf_format_error_is_a_user_error(tmp_path):
    path = tmp_path / "bad.tsf"
    path.write_text("@relation x\n@attribute n string\n@data\na:1,zz\n")
    with pytest.raises(TSFFormatError) as info:
        read_tsf(path)
    assert isinstance(info.value, SgemUserError)


# -- build_task ---------------------------------------------------------------------------


def blobs(n: int = 120, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = (x[:, 0] > 0).astype(np.int64)
    return x, y


def build(x=None, y=None, **kw):
    bx, by = blobs()
    kw.setdefault("test", blobs(20, 1))
    if "clusters" not in kw:
        kw.setdefault("n_clusters", 3)
    return build_task(bx if x is None else x, by if y is None else y, **kw)


def own_ids(n: int = 120) -> np.ndarray:
    return np.arange(n) % 3


def own_test(ids=None):
    xt, yt = blobs(21, 1)
    return (xt, yt, None, np.arange(21) % 3 if ids is None else ids)


BUILD_BAD = [
    # (name, thunk, fragment)
    (
        "float_cluster_ids",
        lambda: build(clusters=own_ids() + 0.5, test=own_test()),
        r"clusters must be whole numbers .*e\.g\. \[0\.5, 1\.5, 2\.5\]",
    ),
    (
        "nan_cluster_ids",
        lambda: build(clusters=np.where(own_ids() == 0, np.nan, own_ids()), test=own_test()),
        r"clusters must be whole numbers",
    ),
    (
        "string_cluster_ids",
        lambda: build(clusters=np.array(["a", "b", "c"] * 40), test=own_test()),
        r"clusters must be integer cluster ids, got dtype <U1.*np\.unique",
    ),
    (
        "negative_cluster_ids",
        lambda: build(clusters=own_ids() - 1, test=own_test()),
        r"clusters must be >= 0 .*found -1",
    ),
    (
        "short_clusters",
        lambda: build(clusters=own_ids(100), test=own_test()),
        r"clusters must hold one cluster id per sample, shape \(120,\), got shape \(100,\)",
    ),
    (
        "long_source",
        lambda: build(source=np.zeros(121, dtype=int)),
        r"source must hold one source \(domain\) id per sample, shape \(120,\), got .*\(121,\)",
    ),
    (
        "2d_source",
        lambda: build(source=np.zeros((120, 2), dtype=int)),
        r"source must hold one .*got shape \(120, 2\)",
    ),
    (
        "short_test_clusters",
        lambda: build(clusters=own_ids(), test=own_test(np.arange(5) % 3)),
        r"test clusters must hold one cluster id per sample, shape \(21,\)",
    ),
    (
        "huge_finite_x",
        lambda: build(x=np.where(np.arange(240).reshape(120, 2) == 7, 1e300, blobs()[0])),
        r"x contains values too large \(\|value\| > 3\.4e\+38.*1 sample\(s\) \(rows 3\), in 1 "
        r"feature column\(s\) \(1\)",
    ),
    ("empty_x", lambda: build(x=np.zeros((0, 2)), y=np.zeros(0, int)), r"x is empty"),
    ("empty_test", lambda: build(test=(np.zeros((0, 2)), np.zeros(0, int))), r"test x is empty"),
    (
        "1d_x",
        lambda: build(x=blobs()[0][:, 0]),
        r"x must have shape \(n_samples, n_features\).*reshape",
    ),
    (
        "single_class",
        lambda: build(y=np.full(120, 4)),
        r"classification needs at least 2 classes, but y holds only class 4 \(all 120 samples\)",
    ),
    (
        "fewer_samples_than_clusters",
        lambda: build_task(*blobs(10), n_clusters=12, test=blobs(5, 1)),
        r"cannot form 12 clusters from 8 training samples \(10 samples, 2 go to validation\)"
        r".*use fewer clusters or more data \(about 15 samples",
    ),
    (
        "too_few_samples_for_the_fewest_clusters",
        lambda: build_task(*blobs(3), n_clusters=3, test=blobs(5, 1)),
        r"use more data \(about 4 samples at least; 3 clusters is the fewest\)",
    ),
    (
        "nan_in_features",
        lambda: build(
            x=np.where(np.isin(np.arange(240).reshape(120, 2), [3, 9, 41]), np.nan, blobs()[0])
        ),
        r"x contains NaN or inf in 3 sample\(s\) \(rows 1, 4, 20\), in 1 feature column\(s\) \(1\)",
    ),
    (
        "inf_in_test_features",
        lambda: build(test=(np.full((20, 2), -np.inf), blobs(20, 1)[1])),
        r"test x contains NaN or inf in 20 sample\(s\) \(rows 0, 1, 2, 3, 4, \.\.\.\), "
        r"in 2 feature",
    ),
    (
        "test_feature_count",
        lambda: build(test=(np.zeros((20, 3)), blobs(20, 1)[1])),
        r"test x has \(3,\) features per sample but x has \(2,\)",
    ),
    (
        "test_length_mismatch",
        lambda: build(test=(np.zeros((20, 2)), np.zeros(19, int))),
        r"test x and test y disagree on the number of samples: 20 vs 19",
    ),
    ("test_not_a_tuple", lambda: build(test=np.zeros((20, 2))), r"test must be a tuple \(x, y\)"),
    (
        "test_and_test_fraction",
        lambda: build(test_fraction=0.2),
        r"either a test set \(test=\.\.\.\) or a test_fraction \(got 0\.2\), not both",
    ),
    (
        "column_labels",
        lambda: build(y=blobs()[1].reshape(-1, 1)),
        r"labels must be one integer per sample.*\(120, 1\) \(use y\.ravel\(\)\)",
    ),
    (
        "integral_float_labels",
        lambda: build(y=blobs()[1].astype(float)),
        r"labels must be integers, got dtype float64; they are whole numbers: "
        r"pass y\.astype\(int\)",
    ),
    (
        "string_labels",
        lambda: build(y=np.array(["cat", "dog"] * 60)),
        r"labels must be integers, got dtype <U3; map them to 0\.\.C-1",
    ),
    (
        "text_features",
        lambda: build(x=np.array([["a", "b"]] * 120)),
        r"x must hold real numbers, got dtype <U1.*one-hot",
    ),
    (
        "n_clusters_float",
        lambda: build(n_clusters=4.0),
        r"n_clusters must be an integer >= 3 \(got 4\.0, a float\)",
    ),
    (
        "n_clusters_bool",
        lambda: build(n_clusters=True),
        r"n_clusters must be an integer >= 3 \(got True, a bool\)",
    ),
    (
        "n_classes_str",
        lambda: build(n_classes="2"),
        r"n_classes must be an integer >= 2 or None, got '2'",
    ),
    (
        "val_fraction_str",
        lambda: build(val_fraction="0.2"),
        r"val_fraction must be a number in \(0, 1\), got '0\.2'",
    ),
    ("val_fraction_one", lambda: build(val_fraction=1.0), r"val_fraction must be in \(0, 1\)"),
    (
        "unknown_loss",
        lambda: build(loss="mse"),
        r"loss must be one of \['cross_entropy', 'student_t'\], got 'mse'",
    ),
    ("seed_float", lambda: build(seed=1.5), r"seed must be an integer, got 1\.5"),
    (
        "no_validation_sample",
        lambda: build_task(*blobs(4), n_clusters=3, val_fraction=0.1, test=blobs(5, 1)),
        r"4 samples leave no validation sample \(val_fraction=0\.1",
    ),
    (
        "nan_regression_target",
        lambda: build(
            y=np.where(np.arange(120) % 50 == 7, np.nan, 1.0),
            loss="student_t",
            test=(np.zeros((20, 2)), np.zeros(20)),
        ),
        r"y: targets contain NaN or inf in 3 sample\(s\) \(rows 7, 57, 107\)",
    ),
    (
        "huge_regression_target",
        lambda: build(
            y=np.full(120, 1e39), loss="student_t", test=(np.zeros((20, 2)), np.zeros(20))
        ),
        r"y: targets contain values too large",
    ),
    (
        "ragged_x",
        lambda: build(x=[[1.0, 2.0], [3.0]]),
        r"x must be array-like with one row per sample",
    ),
]


@pytest.mark.parametrize(("name", "thunk", "fragment"), BUILD_BAD, ids=[c[0] for c in BUILD_BAD])
def test_build_task_refuses(name, thunk, fragment):
    with pytest.raises(SgemUserError) as info:
        thunk()
    assert re.search(fragment, str(info.value)), str(info.value)


def test_huge_values_are_not_called_nan():
    x, y = blobs()
    x[3, 1] = 1e300
    with pytest.raises(SgemUserError) as info:
        build_task(x, y, n_clusters=3, test=blobs(20, 1))
    assert "NaN" not in str(info.value) and "too large" in str(info.value)


def test_large_values_within_float32_are_accepted():
    x, y = blobs()
    x[:, 1] *= 1e30
    task = build_task(x, y, n_clusters=3, test=blobs(20, 1))
    assert np.isfinite(task.train.x).all()


def test_integral_float_cluster_ids_are_accepted():
    as_int = build(clusters=own_ids(), test=own_test())
    as_float = build(clusters=own_ids().astype(np.float64), test=own_test(np.arange(21.0) % 3))
    assert as_float.n_clusters == as_int.n_clusters == 3
    for split in ("train", "val", "test"):
        got = getattr(as_float, split).cluster
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, getattr(as_int, split).cluster)


def test_cluster_task_refuses_float_cluster_ids():
    xs = np.zeros((6, 2), dtype=np.float32)
    y = np.zeros(6, dtype=np.int64)
    good = Split(xs, y, np.arange(6) % 3)
    floats = Split(xs, y, (np.arange(6) % 3).astype(np.float64))
    with pytest.raises(
        SgemUserError, match=r"val: cluster ids must be integers, got dtype float64"
    ):
        ClusteredTask("t", good, floats, good, 3, n_classes=2)
    with pytest.raises(SgemUserError, match=r"test: x must hold real numbers, got dtype <U1"):
        ClusteredTask(
            "t", good, good, Split(np.full((6, 2), "a"), y, np.arange(6) % 3), 3, n_classes=2
        )
    huge = Split(np.full((6, 2), 1e300), y, np.arange(6) % 3)
    with pytest.raises(SgemUserError, match=r"train: x contains values too large"):
        ClusteredTask("t", huge, good, good, 3, n_classes=2)
    empty = Split(np.zeros((0, 2), np.float32), np.zeros(0, np.int64), [])  # [] is float
    task = ClusteredTask("t", good, good, empty, 3, n_classes=2)
    assert task.test.cluster.dtype == np.int64


# -- one cluster policy for the three builders ---------------------------------------------


def outlier_data(n_blobs: int, n_outliers: int):
    """Tight blobs plus a few far outliers that k-means gives a cluster of their own."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])[:n_blobs]
    parts = [c + rng.normal(size=(30, 2)) for c in centres]
    parts.append(100.0 + 0.01 * rng.normal(size=(n_outliers, 2)))
    x = np.concatenate(parts)
    return x, np.arange(len(x)) % 2


def test_cluster_without_validation_samples_is_merged():
    x, y = outlier_data(3, 2)
    # seed 2: both outliers land in the training split, so their cluster has no validation
    task = build_task(x, y, n_clusters=4, test_fraction=0.2, seed=2)
    assert task.n_clusters == 3
    assert task.meta["n_clusters_requested"] == 4 and task.meta["merged_clusters"] == 1
    assert task.centroids.shape == (3, 2)
    assert (task.cluster_sizes > 0).all() and (task.val_cluster_sizes > 0).all()
    # seed 0: the outliers reach validation, nothing is merged
    kept = build_task(x, y, n_clusters=4, test_fraction=0.2, seed=0)
    assert kept.n_clusters == 4 and kept.meta["merged_clusters"] == 0


def test_too_few_clusters_left_after_merging():
    """The fix offered is one a user can take: never fewer than 3 clusters, and a larger
    validation share than the one in use (it suggested 0.3 to a small table at 0.35)."""
    x, y = outlier_data(2, 1)
    with pytest.raises(SgemUserError, match=r"only 2 of the 3 k-means clusters kept training") as e:
        build_task(x, y, n_clusters=3, test_fraction=0.2, seed=0)
    assert "fewer clusters" not in str(e.value)
    assert "{val_fraction: 0.35}" in str(e.value) and "3 clusters is the fewest" in str(e.value)


def test_toy_task_is_unchanged_by_the_merge_policy():
    """The default toy task never merges; its clusters are the k-means labels (seed 0 here;
    seeds 0-9 were checked against the previous code, byte-identical)."""
    task = sgem.make_toy_task(0)
    assert task.n_clusters == 20 and task.meta["merged_clusters"] == 0
    assert task.meta["n_clusters_requested"] == 20
