"""The typed run config, the packaged presets and the named random streams."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from sgem.errors import SgemUserError
from sgem.presets import PRESET_NAMES, load_preset
from sgem.random_streams import (
    Stream,
    expert_seed,
    gate_expert_seed,
    mixture_rng,
    mixture_test_rng,
    series_window_rng,
    stream_rng,
)
from sgem.run.runconfig import (
    RunConfig,
    config_fingerprint,
    load_config,
    load_run_config,
    merge,
    preset,
)
from sgem.search.config import SearchConfig

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_every_preset_round_trips_key_for_key(name):
    """The typed config writes each preset's mapping back exactly (same keys, same order,
    same values): a run directory's config.yaml and the store's fingerprint stay as they
    were, so an existing run directory is still the same run."""
    mapping = preset(name)
    cfg = RunConfig.from_dict(mapping)
    back = cfg.to_dict()
    assert back == mapping
    assert list(back) == list(mapping)
    assert yaml.safe_dump(back, sort_keys=False) == yaml.safe_dump(mapping, sort_keys=False)
    assert config_fingerprint(back) == config_fingerprint(mapping) == cfg.fingerprint
    seeded = cfg.with_seed(3).to_dict()
    assert list(seeded) == [*mapping, "seed"] and seeded["seed"] == 3
    # what `sgem run NAME --seed 3` writes: the preset, then the seed
    assert seeded == {**load_config(name), "seed": 3}
    assert load_run_config(name, seed=3) == cfg.with_seed(3)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_preset_file_is_the_source(name):
    """A preset is its YAML file, with the search section completed by the defaults."""
    raw = load_preset(name)
    full = preset(name)
    assert {k: v for k, v in full.items() if k != "search"} == {
        k: v for k, v in raw.items() if k != "search"
    }
    assert full["search"] == SearchConfig.from_dict(raw["search"]).to_dict()
    assert list(full["search"]) == list(SearchConfig().to_dict())


def test_pipeline_presets_are_the_packaged_ones():
    from sgem.run.pipeline import PRESETS

    assert list(PRESETS) == list(PRESET_NAMES)
    for name in PRESET_NAMES:
        assert PRESETS[name] == preset(name)


def test_typed_fields_and_frozen():
    cfg = load_run_config("ts-offline", seed=2)
    assert cfg.seed == 2 and cfg.torch_threads == 1 and cfg.device == "cpu"
    assert isinstance(cfg.search, SearchConfig) and cfg.search.n_experts == 4
    assert cfg.final_epochs is None and cfg.crps_samples == 100 and cfg.time_budget is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 3  # type: ignore[misc]
    toy = RunConfig.from_dict(preset("toy"))
    assert toy.seed is None and "device" not in toy.to_dict()


def test_a_config_built_in_python_writes_every_field():
    cfg = RunConfig(task={"name": "toy"}, space=preset("toy")["space"], search=SearchConfig())
    d = cfg.to_dict()
    assert list(d) == [
        "task",
        "space",
        "search",
        "torch_threads",
        "seed",
        "device",
        "final_epochs",
        "final_length",
        "crps_samples",
        "time_budget",
        "forecast_budget",
        "combine",
        "experts_at_most_clusters",
    ]
    assert RunConfig.from_dict(d) == cfg


@pytest.mark.parametrize(
    "change, message",
    [
        ({"seed": -1}, "seed"),
        ({"seed": True}, "seed"),
        ({"torch_threads": 0}, "torch_threads"),
        ({"time_budget": 0}, "time_budget"),
        ({"time_budget": "soon"}, "time_budget"),
        ({"forecast_budget": 0}, "forecast_budget"),
        ({"forecast_budget": "5m"}, "forecast_budget"),
        ({"forecast_budget": True}, "forecast_budget"),
        ({"crps_samples": 0}, "crps_samples"),
        ({"final_epochs": 1.5}, "final_epochs"),
        ({"device": 3}, "device"),
        ({"colour": "red"}, "unknown run config key"),
        ({"search": {"n_experts": 0}}, "n_experts"),
        ({"search": {"n_expert": 2}}, "n_expert"),
        ({"space": {"kind": "nope", "ops": []}}, "space kind"),
        ({"task": {"n_clusters": 3}}, "task"),
    ],
)
def test_bad_run_configs_are_refused_with_the_key(change, message):
    mapping = preset("toy") | {"seed": 0} | change
    with pytest.raises(SgemUserError, match=message):
        RunConfig.from_dict(mapping)


def test_missing_sections_are_refused():
    mapping = preset("toy")
    del mapping["space"]
    with pytest.raises(SgemUserError, match="lacks"):
        RunConfig.from_dict(mapping)


def test_example_configs_override_their_presets():
    for file, name in [
        ("toy-smoke.yaml", "toy"),
        ("toy-ablation-plain.yaml", "toy"),
        ("ts-smoke.yaml", "ts-offline"),
    ]:
        cfg = load_run_config(name, CONFIGS / file, seed=0)
        assert cfg.to_dict()["seed"] == 0
    smoke = load_run_config("ts-offline", CONFIGS / "ts-smoke.yaml")
    assert smoke.task["n_windows"] == 400 and smoke.crps_samples == 20
    assert smoke.search.train.steps == 10 and smoke.search.train.lr == 3e-3  # kept
    with pytest.raises(SgemUserError, match="unknown config key"):
        merge(preset("toy"), {"search": {"n_expert": 2}})


def test_named_streams_are_the_old_literals():
    """The streams' values are what the code used before they were named (results depend
    on them): changing one is a change of every result drawn from it."""
    assert {s.name: int(s) for s in Stream} == {
        "BEST_SINGLE_SEARCH": 1,
        "BASELINE_PARTITION": 2,
        "RANDOM_MOE": 3,
        "NAS_MOE_PARTITION": 4,
        "NAS_MOE_SEARCH": 5,
        "ORACLE_SEARCH": 6,
        "ARCH_SPREAD": 11,
        "USER_TASK_SPLIT": 31,
        "BUDGET_PILOT": 77,
        "MIXTURE_LAYOUT": 7,
        "SERIES_SPLIT": 7919,
        "TOY_TEST": 1_000_003,
        "EMBEDDING_FILTERS": 0x5EED,
    }
    for stream in Stream:
        a = stream_rng(5, stream).random(4)
        b = np.random.default_rng([5, int(stream)]).random(4)
        assert np.array_equal(a, b)
    assert np.array_equal(
        series_window_rng(1, 2).random(3), np.random.default_rng([1, 2]).random(3)
    )
    assert np.array_equal(mixture_rng(3, 8).random(3), np.random.default_rng([3, 8]).random(3))
    assert np.array_equal(
        mixture_test_rng(3, 8).random(3), np.random.default_rng([3, 8, 1_000_003]).random(3)
    )
    for seed, k in ((0, 0), (0, 3), (7, 2), (123, 9)):
        assert expert_seed(seed, k) == gate_expert_seed(seed, k) == seed * 101 + k


def test_final_length_is_checked_and_forecasting_presets_choose_it_on_validation() -> None:
    assert load_run_config("ts-offline").final_length == "validation-warm-twins"
    assert load_run_config("ts-paper").final_length == "validation-warm"
    assert load_run_config("toy").final_length == "fixed"
    data = load_run_config("toy").to_dict() | {"final_length": "early"}
    with pytest.raises(SgemUserError, match="final_length must be one of"):
        RunConfig.from_dict(data)


def test_the_forecast_budget_is_no_limit_unless_given() -> None:
    data = load_run_config("toy").to_dict()
    assert RunConfig.from_dict(data).forecast_allowance is None
    assert RunConfig.from_dict(data | {"time_budget": 60}).forecast_allowance is None
    own = data | {"time_budget": 60, "forecast_budget": 600}
    assert RunConfig.from_dict(own).forecast_allowance == 600.0
    assert RunConfig.from_dict(data | {"forecast_budget": 5}).forecast_allowance == 5.0
    lifted = RunConfig.from_dict(data | {"time_budget": 60, "forecast_budget": float("inf")})
    assert lifted.forecast_allowance is None
    assert RunConfig.from_dict(lifted.to_dict()) == lifted


def test_combine_is_a_boolean_and_round_trips() -> None:
    data = load_run_config("toy").to_dict()
    assert "combine" not in data and RunConfig.from_dict(data).combine  # on unless said
    off = RunConfig.from_dict(data | {"combine": False})
    assert off.to_dict()["combine"] is False
    with pytest.raises(SgemUserError, match="combine must be true or false"):
        RunConfig.from_dict(data | {"combine": "no"})


def test_a_config_file_sets_optional_keys_a_preset_leaves_out(tmp_path) -> None:
    """The toy preset has no `device` or `final_length` key; a --config file may still set
    them (the preset's omission means the default, not "not settable"); typos are refused."""
    from sgem.run.runconfig import load_config

    path = tmp_path / "c.yaml"
    path.write_text("device: cpu\nfinal_length: validation\n")
    cfg = load_config("toy", path)
    assert cfg["device"] == "cpu" and cfg["final_length"] == "validation"
    path.write_text("devcie: cpu\n")
    with pytest.raises(SgemUserError, match=r"unknown config key 'devcie'; known: .*'device'"):
        load_config("toy", path)
    path.write_text("search:\n  device: cpu\n")  # optional keys are top-level only
    with pytest.raises(SgemUserError, match=r"unknown config key 'search\.device'"):
        load_config("toy", path)
