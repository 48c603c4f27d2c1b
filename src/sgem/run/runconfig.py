"""The run config: what one run is (task, space, search, seed, ...), typed and validated once.

A run config travels in two forms:

* the plain mapping (`run:` in a run directory's config.yaml, a preset, `sgem fit`'s
  config): the run's identity. The store's fingerprint and the "same run?" checks of a run
  directory are taken on it, exactly as it was given, so a run directory written by an
  older sgem stays the same run;
* `RunConfig`, the frozen, typed view the code reads (`RunConfig.from_dict` checks every
  section once, with `SgemUserError`s naming the key; `to_dict` gives the mapping back,
  key for key and in the same order, which the tests check for every preset).

Presets are YAML files in `sgem/presets/` (their only source); `load_config(name, file)`
merges a user's YAML overrides into one (unknown keys are errors). `build_task_from_config`
turns a `task` section into a `ClusteredTask`; `sgem.space.registry.build_space` turns a
`space` section into a search space.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..data.images import build_image_task, downsample
from ..data.task import ClusteredTask
from ..data.timeseries import make_timeseries_task
from ..data.toy import make_toy_task
from ..data.user_tasks import BUILDERS
from ..errors import SgemUserError
from ..final.protocol import FINAL_LENGTHS
from ..presets import PRESET_NAMES, load_preset
from ..search.config import SearchConfig
from ..space.registry import build_space

#: The top-level keys of a run config; `task`, `space`, `search` and `torch_threads` are
#: always there (every preset has them), the others only where a preset or a user set them.
REQUIRED = ("task", "space", "search", "torch_threads")
OPTIONAL = (
    "final_epochs",
    "final_length",
    "crps_samples",
    "device",
    "seed",
    "time_budget",
    "forecast_budget",
    "combine",
    "experts_at_most_clusters",
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class RunConfig:
    """One run, typed. `task` and `space` stay mappings (each task builder and space kind
    has its own keys; `build_task_from_config` and `build_space` check them); `search` is a
    `SearchConfig`. `seed` is None only in a preset, before a run gets its seed."""

    task: dict[str, Any]
    space: dict[str, Any]
    search: SearchConfig
    torch_threads: int = 1
    seed: int | None = None
    device: str = "cpu"
    final_epochs: int | None = None  # final retrain in epochs (None: search.final_steps)
    # how long the final experts train: the configured length, or one chosen on validation
    # (early-stopped on the expert's region, then retrained on train + validation for as
    # many passes, `sgem.final.length`; AutoGluon's refit_full habit)
    final_length: str = "fixed"
    crps_samples: int = 100  # forecasting tasks: samples of the sample-based CRPS
    time_budget: float | None = None  # seconds for the whole run (None: no budget)
    #: seconds a saved forecaster's AutoETS / AutoTheta may take to refit on every series at
    #: forecast time (None or .inf: no limit; `sgem.leaderboard.forecast_cost`)
    forecast_budget: float | None = None
    #: whether the saved model may be a combination with the references
    #: (`sgem.leaderboard.combining`); False saves the MoE with selective routing (for ONNX)
    combine: bool = True
    #: K may shrink to the clusters the data gives (`sgem fit` without --experts: a file of
    #: six long series gives M = 3); otherwise K > M is refused before any training
    experts_at_most_clusters: bool = False
    #: the top-level keys the config was read with, in their order: `to_dict` writes those
    #: (plus any field set to a non-default value since), so the mapping round-trips exactly
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.task, Mapping) or not isinstance(self.task.get("name"), str):
            raise SgemUserError(
                f"the run config's task section must be a mapping with a 'name', got {self.task!r}"
            )
        if not isinstance(self.space, Mapping):
            raise SgemUserError(
                f"the run config's space section must be a mapping, got {self.space!r}"
            )
        object.__setattr__(self, "task", copy.deepcopy(dict(self.task)))
        object.__setattr__(self, "space", copy.deepcopy(dict(self.space)))
        if not isinstance(self.search, SearchConfig):
            if not isinstance(self.search, Mapping):
                raise SgemUserError(
                    f"the run config's search section must be a mapping, got {self.search!r}"
                )
            object.__setattr__(self, "search", SearchConfig.from_dict(dict(self.search)))
        seed = self.seed
        if seed is not None and (not _is_int(seed) or seed < 0):
            raise SgemUserError(f"the seed must be an integer >= 0, got {seed!r}")
        build_space(self.space)  # a bad space fails here, before any data is read
        threads = self.torch_threads
        if not _is_int(threads) or threads < 1:
            raise SgemUserError(f"torch_threads must be an integer >= 1, got {threads!r}")
        budget = self.time_budget
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int | float) or budget <= 0
        ):
            raise SgemUserError(f"time_budget must be a number of seconds > 0, got {budget!r}")
        allowed = self.forecast_budget
        if allowed is not None and (
            isinstance(allowed, bool) or not isinstance(allowed, int | float) or not allowed > 0
        ):
            raise SgemUserError(
                f"forecast_budget must be a number of seconds > 0 (.inf: no limit), got {allowed!r}"
            )
        if not isinstance(self.device, str):
            raise SgemUserError(f"device must be a string (cpu, cuda, auto), got {self.device!r}")
        epochs = self.final_epochs
        if epochs is not None and (not _is_int(epochs) or epochs < 0):
            raise SgemUserError(f"final_epochs must be an integer >= 0 or null, got {epochs!r}")
        if self.final_length not in FINAL_LENGTHS:
            raise SgemUserError(
                f"final_length must be one of {list(FINAL_LENGTHS)}, got {self.final_length!r}"
            )
        for flag in ("combine", "experts_at_most_clusters"):
            if not isinstance(getattr(self, flag), bool):
                raise SgemUserError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        if not _is_int(self.crps_samples) or self.crps_samples < 1:
            raise SgemUserError(f"crps_samples must be an integer >= 1, got {self.crps_samples!r}")

    @property
    def forecast_allowance(self) -> float | None:
        """The seconds a saved forecaster's refitted members may take to forecast every
        series: `forecast_budget` (None or .inf: no limit). Not the time budget by default:
        on the shared weather series a 5-minute fit with both members left out forecast at
        MASE 3.53 against 1.06 with them (`benchmarks/results/forecast_budget_weather.json`)."""
        allowed = self.forecast_budget
        return None if allowed is None or allowed == float("inf") else float(allowed)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """The typed view of a run config mapping; every section is checked here."""
        if not isinstance(data, Mapping):
            raise SgemUserError(f"a run config must be a mapping, got {type(data).__name__}")
        known = (*REQUIRED, *OPTIONAL)
        unknown = [k for k in data if k not in known]
        if unknown:
            raise SgemUserError(f"unknown run config key(s) {unknown}; known: {sorted(known)}")
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise SgemUserError(f"the run config lacks {missing}")
        return cls(**dict(data), keys=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        """The plain mapping (a run directory's `run:`): exactly the keys it was read with,
        in their order; a config built in Python writes every field."""
        values = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "keys"
        }
        values["search"] = self.search.to_dict()
        order = list(self.keys) if self.keys is not None else list(values)
        defaults = RunConfig.__dataclass_fields__
        for name in OPTIONAL:  # set after reading (e.g. with_seed): written as well
            if name not in order and values[name] != defaults[name].default:
                order.append(name)
        return {k: copy.deepcopy(values[k]) for k in order}

    def with_seed(self, seed: int) -> RunConfig:
        """This config for one seed (`seed` becomes the last key, as `sgem run` writes it)."""
        keys = None if self.keys is None else (*(k for k in self.keys if k != "seed"), "seed")
        return dataclasses.replace(self, seed=seed, keys=keys)

    @property
    def fingerprint(self) -> str:
        return config_fingerprint(self.to_dict())


def config_fingerprint(run_cfg: Mapping[str, Any]) -> str:
    """A stable hash of a run config mapping: the store refuses to continue another run's work."""
    text = json.dumps(run_cfg, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- presets and config files ----------------------------------------------------------------
def preset(name: str) -> dict[str, Any]:
    """A fresh copy of a built-in preset's run config mapping (`sgem/presets/NAME.yaml`).

    A preset file lists the search settings that differ from `SearchConfig`'s defaults; the
    mapping holds the whole `search` section (`SearchConfig.to_dict()`, every field in
    declaration order), so every search setting can be overridden by a --config file."""
    if name not in PRESET_NAMES:
        raise SgemUserError(f"unknown preset {name!r}; available: {sorted(PRESET_NAMES)}")
    cfg = load_preset(name)
    cfg["search"] = SearchConfig.from_dict(cfg["search"]).to_dict()
    return cfg


def merge(base: dict, override: dict, path: str = "") -> dict:
    """Recursively override `base` with `override`, refusing keys `base` does not have; at
    the top, a run config's optional keys (`OPTIONAL`: device, final_length, ...) may be set
    even where the preset leaves them at their defaults."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if key not in out and not (path == "" and key in OPTIONAL):
            known = sorted({*out, *OPTIONAL}) if path == "" else sorted(out)
            raise SgemUserError(f"unknown config key {path + key!r}; known: {known}")
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value, f"{path}{key}.")
        else:
            out[key] = value
    return out


def read_config_file(path: str | os.PathLike) -> dict:
    """A user's YAML config overrides: a mapping, read safely, with clear errors."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError as exc:
        raise SgemUserError(f"--config file {path} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SgemUserError(f"--config file {path} cannot be read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise SgemUserError(f"--config file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SgemUserError(f"--config file {path} must hold a mapping of config keys")
    return data


def load_config(name: str, config_file: str | os.PathLike | None = None) -> dict[str, Any]:
    """A preset's run config mapping with a user's YAML overrides merged in."""
    cfg = preset(name)
    if config_file is not None:
        cfg = merge(cfg, read_config_file(config_file))
    return cfg


def load_run_config(
    name: str, config_file: str | os.PathLike | None = None, seed: int | None = None
) -> RunConfig:
    """`load_config` as a validated `RunConfig` (for `seed`, when given)."""
    cfg = RunConfig.from_dict(load_config(name, config_file))
    return cfg if seed is None else cfg.with_seed(seed)


# -- config -> objects ---------------------------------------------------------------------
def build_task_from_config(cfg: Mapping[str, Any], seed: int) -> ClusteredTask:
    """The `ClusteredTask` of a run config's `task` section (name "toy", "timeseries" or
    "images", or a user-data builder of `sgem.data.user_tasks.BUILDERS`; an image task is
    clustered at full resolution, then average-pooled to `image_size`, see
    `sgem.data.images.build_image_task` and `downsample`)."""
    params = dict(cfg)
    name = params.pop("name")
    if name in BUILDERS:
        return BUILDERS[name](params, seed)
    if name == "toy":
        return make_toy_task(seed=seed, **params)
    if name == "timeseries":
        source = params.pop("source")
        directory = params.pop("directory")
        domains = params.pop("domains")
        if source == "offline":
            return make_timeseries_task(
                directory, offline=True, names=domains, seed=seed, name="timeseries", **params
            )
        if source == "monash":
            directory = directory or os.environ.get("SGEM_MONASH_DIR")
            if not directory:
                raise SgemUserError(
                    "the Monash time-series task needs the directory holding the .tsf files: "
                    "set task.directory in a --config YAML file, or $SGEM_MONASH_DIR"
                )
            return make_timeseries_task(
                directory, names=domains, seed=seed, name="timeseries", **params
            )
        if source == "files":  # task.domains: .tsf paths, one domain each (named by the stem)
            return make_timeseries_task(
                directory, names=domains, seed=seed, name="timeseries", **params
            )
        raise SgemUserError(
            f"unknown time-series source {source!r}; expected 'offline' (the shared stand-ins), "
            "'monash' (the real files in task.directory) or 'files' (task.domains: .tsf paths)"
        )
    if name == "images":
        return downsample(build_image_task(params, seed), params.get("image_size"))
    raise SgemUserError(
        f"unknown task {name!r}; available: {sorted(['images', 'timeseries', 'toy', *BUILDERS])}"
    )


def build_task(cfg: RunConfig) -> ClusteredTask:
    """The task of a run config, for its seed."""
    if cfg.seed is None:
        raise SgemUserError("the run config has no seed; give one (RunConfig.with_seed)")
    return build_task_from_config(cfg.task, cfg.seed)


__all__ = [
    "PRESET_NAMES",
    "RunConfig",
    "build_space",
    "build_task",
    "build_task_from_config",
    "config_fingerprint",
    "load_config",
    "load_run_config",
    "merge",
    "preset",
    "read_config_file",
]
