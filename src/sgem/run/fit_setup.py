"""The run config `sgem fit` runs for a user's file: what the file holds (`infer_kind`) and
the matching preset's space and search with the data-derived defaults and the user's
overrides (`fit_config`). Only headers are read here; the data is read by the run."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Literal

from ..errors import SgemUserError

KINDS = ("tabular", "timeseries", "images")
_PRESET_OF = {"tabular": "toy", "timeseries": "ts-offline", "images": "images-offline"}
_TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".gz", ".parquet", ".pq")


def infer_kind(path: Path, id_col: str = "unique_id", time_col: str = "ds", value_col: str = "y"):
    """'images' for a folder, 'timeseries' for .tsf or a table with the series columns (or
    only the time and value columns: one series), 'tabular' for any other table or NPZ."""
    if path.is_dir():
        return "images"
    suffix = path.suffix.lower()
    if suffix in (".tsf", ".zip"):
        return "timeseries"
    if suffix == ".npz":
        import numpy as np

        with np.load(path, allow_pickle=False) as data:
            x = data.get("x")
        return "images" if x is not None and x.dtype == np.uint8 and x.ndim >= 3 else "tabular"
    if suffix in _TABLE_SUFFIXES:
        from ..data.files import read_frame

        columns = set(read_frame(path, header_only=True).columns)
        one_series = columns == {time_col, value_col}
        return "timeseries" if {id_col, time_col, value_col} <= columns or one_series else "tabular"
    raise SgemUserError(
        f"cannot tell what {path.name} holds; give a CSV/Parquet/NPZ table, a .tsf file or a "
        "folder of images (or --kind)"
    )


def fit_config(
    data: str | os.PathLike,
    *,
    kind: str | None = None,
    target: str | None = None,
    features: list[str] | None = None,
    horizon: int | None = None,
    context: int | None = None,
    season: int | None = None,
    image_size: int | None = 32,
    n_clusters: int | None = None,
    n_experts: int | None = None,
    time_budget: str | float | None = None,
    forecast_budget: str | float | None = None,
    seed: int = 0,
    config: str | os.PathLike | dict | None = None,
    id_col: str = "unique_id",
    time_col: str = "ds",
    value_col: str = "y",
    missing: str = "impute",
    task_kind: Literal["classification", "regression"] | None = None,
    combine: bool = True,
    device: str | None = None,
) -> dict[str, Any]:
    """The full run config `sgem fit` runs for `data` (nothing is read but the header).

    `combine=False` (CLI --no-combination) saves the MoE (with selective routing) even where
    a combination with the references scores better: what ONNX export can serve.
    `missing` ("impute" or "error", CLI --missing) goes into the task section of every kind;
    `task_kind` ("classification" / "regression") overrides a table's inferred kind;
    `device` (cpu, cuda, cuda:N, auto; CLI --device) where the networks train;
    `forecast_budget` (CLI --forecast-budget; default and "none": no limit) what a saved
    forecaster's AutoETS / AutoTheta may take to refit on every series;
    `season` (CLI --season) a series file's seasonal period where its dates do not say it
    (the M3 "other" series carry quarterly dates but no season: 1)."""
    from ..data.table_missing import check_policy
    from ..data.user_tasks import MINIBATCH_TABLE_ROWS, TABLE_MINIBATCH, table_facts
    from .budget import parse_duration
    from .pipeline import merge, preset, read_config_file

    if not isinstance(data, str | os.PathLike):
        raise SgemUserError(
            f"fit_config reads a file path, not a {type(data).__name__}; sgem.fit(data, ...) "
            "takes a DataFrame or (X, y) as well and writes it into the run directory"
        )
    missing = check_policy(missing)
    path = Path(data).expanduser()
    if not path.exists():
        raise SgemUserError(f"{path} does not exist")
    if kind is None and (horizon is not None or context is not None or season is not None):
        kind = "timeseries"  # a horizon is asked only of series: never a table's regression
    kind = kind or infer_kind(path, id_col, time_col, value_col)
    if kind not in KINDS:
        raise SgemUserError(f"unknown --kind {kind!r}; choose one of {list(KINDS)}")
    for flag, value in (("--season", season), ("--forecast-budget", forecast_budget)):
        if value is not None and kind != "timeseries":
            raise SgemUserError(f"{flag} is for series; this is {kind} data (leave {flag} out)")
    if task_kind is not None and kind != "tabular":
        raise SgemUserError(
            f"--task {task_kind} is for tables; this is {kind} data (leave --task out)"
        )
    base = preset(_PRESET_OF[kind])
    task: dict[str, Any] = {
        "path": str(path.resolve()),
        "n_clusters": n_clusters,
        "missing": missing,
    }
    if kind == "tabular":
        if not target and path.suffix.lower() != ".npz":
            raise SgemUserError(
                "a table needs the column to predict: --target COLUMN (to forecast series, "
                "give --horizon H)"
            )
        stat = path.stat()
        table_kind, rows = table_facts(
            str(path.resolve()),
            (stat.st_mtime_ns, stat.st_size),
            target,
            None if features is None else tuple(features),
            task_kind,
            missing,
        )
        if rows > MINIBATCH_TABLE_ROWS:  # (a config file's batch_size still wins)
            base["search"].setdefault("train", {})["batch_size"] = TABLE_MINIBATCH
        task.update(
            name="table", target=target, features=features, kind=table_kind, val_fraction=None
        )  # (None: from the table's size, `sgem.data.user_tasks.default_val_fraction`)
        if table_kind == "regression":
            base["space"]["head"] = "student_t"
        base["space"]["frame"] = "region"  # each expert in its region's coordinates
    elif kind == "timeseries":
        task.update(
            name="series",
            horizon=horizon,
            context=context,
            season=season,
            n_windows=None,
            id_col=_series_id(path, id_col),
            time_col=time_col,
            value_col=value_col,
        )
    else:
        task.update(name="image_folder", image_size=image_size)
        base["space"]["in_channels"] = 3
    run = {k: v for k, v in base.items() if k != "task"}
    run["task"] = task
    if n_experts is not None:
        run["search"]["n_experts"] = n_experts
    run["time_budget"] = None if time_budget is None else parse_duration(time_budget)
    if forecast_budget is not None:
        unlimited = str(forecast_budget).strip().lower() in ("none", "inf")
        run["forecast_budget"] = float("inf") if unlimited else parse_duration(forecast_budget)
    if not combine:
        run["combine"] = False
    if device is not None:  # (else the preset's, or the config file's)
        run["device"] = device
    override = None
    if config is not None:
        override = config if isinstance(config, dict) else read_config_file(config)
    if n_experts is None and "n_experts" not in ((override or {}).get("search") or {}):
        run["experts_at_most_clusters"] = True  # the preset's K, not the user's
    if override is not None:
        run = merge(run, copy.deepcopy(override))
    run["seed"] = seed
    return run


def _series_id(path: Path, id_col: str) -> str | None:
    """The id column of a series table, or None where the table has none: one series (its
    time and value columns are checked when it is read)."""
    if path.suffix.lower() not in _TABLE_SUFFIXES:
        return id_col
    from ..data.files import read_frame

    return id_col if id_col in read_frame(path, header_only=True).columns else None


__all__ = ["KINDS", "fit_config", "infer_kind"]
