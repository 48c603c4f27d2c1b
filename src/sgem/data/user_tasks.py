"""`ClusteredTask`s from the user's own files (what `sgem fit` searches over).

Each builder reads a file with `sgem.data.files`, splits, clusters with the same builders
the benchmarks use, and records in `task.meta` what a saved model needs to treat new data
the same way (feature encoding and standardisation, class labels, context and horizon).
Every builder is a pure function of its config section and the seed, so `sgem resume`
rebuilds the identical task.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from ..random_streams import Stream, stream_rng
from .build import build_task
from .task import ClusteredTask

#: below this many rows a table gets the smallest M (3) and a larger validation share
SMALL_TABLE_ROWS = 200
#: a table of more rows than this trains its networks on minibatches of `TABLE_MINIBATCH`
#: rows, not on every row at each step (the preset's full batch, which suits small tables).
#: Why: on a 200 000-row table of 39 columns one candidate's full-batch training took 9.5 s,
#: and a 2-minute fit had no time for even the smallest search
MINIBATCH_TABLE_ROWS = 25_000
TABLE_MINIBATCH = 4096


@functools.lru_cache(maxsize=4)
def table_facts(
    path: str,
    stamp: tuple[int, int],
    target: str | None,
    features: tuple[str, ...] | None,
    kind: Literal["classification", "regression"] | None,
    missing: str,
) -> tuple[str, int]:
    """(a table's task kind, its rows), read once per file version (`stamp`: modification
    time and size): a fit that chooses K on validation asks for every K's config, and a
    540 000-row CSV took 10 s to read each time; the parse is kept for the task's read."""
    import warnings

    from .files import read_table
    from .table_contract import TableWarning
    from .table_reuse import drop_kept

    with warnings.catch_warnings():  # its notes come once, when the task is built
        warnings.simplefilter("ignore", TableWarning)
        try:
            table = read_table(
                path, target=target, features=None if features is None else list(features),
                kind=kind, missing=missing, keep_parsed=True,  # (the task's read takes it)
            )  # fmt: skip
        except BaseException:  # (refused: no task read follows to take the parse)
            drop_kept()
            raise
    return table.task_kind, len(table.x)


def default_n_clusters(n_samples: int) -> int:
    """M from the data size: about 100 training samples per cluster, between 4 and 30 (3
    below `SMALL_TABLE_ROWS`: a 40-row table left only 2 of 4 clusters with validation rows)."""
    return int(np.clip(n_samples // 100, 3 if n_samples < SMALL_TABLE_ROWS else 4, 30))


def default_val_fraction(n_samples: int) -> float:
    """The validation share of a table's learning rows: 0.2, and 0.35 below
    `SMALL_TABLE_ROWS`, so that each cluster keeps validation rows."""
    return 0.2 if n_samples >= SMALL_TABLE_ROWS else 0.35


def table_task(cfg: dict[str, Any], seed: int) -> ClusteredTask:
    """Classification or regression on a CSV / Parquet / NPZ table: features encoded
    (one-hot for categories), standardised per feature with the train + validation
    statistics (never the test rows'; 0 / 1 columns stay 0 / 1), clustered by k-means.
    Regression targets are standardised too and modelled by a Student-t (the space's
    `head: student_t`).
    Missing feature values are imputed with statistics of the train + validation rows too
    (`cfg["missing"]`, default "impute"; "error" refuses them; `sgem.data.table_missing`)."""
    from .files import read_table

    def split(n: int) -> tuple[np.ndarray, np.ndarray]:  # (test rows, train + validation rows)
        perm = stream_rng(seed, Stream.USER_TASK_SPLIT).permutation(n)
        n_test = round(float(cfg.get("test_fraction", 0.2)) * n)
        return perm[:n_test], perm[n_test:]

    data = read_table(
        cfg["path"],
        target=cfg.get("target"),
        features=cfg.get("features"),
        kind=cfg.get("kind"),
        missing=cfg.get("missing") or "impute",
        learn_rows=lambda n: split(n)[1],
    )
    regression = data.task_kind == "regression"
    n = len(data.x)
    n_clusters = int(cfg.get("n_clusters") or default_n_clusters(n))
    test, rest = split(n)
    mean = data.x[rest].astype(np.float64).mean(0)
    std = data.x[rest].astype(np.float64).std(0)
    std = np.where(std > 1e-12, std, 1.0)
    # 0 / 1 columns (one-hot categories, booleans, missing indicators) stay 0 / 1: standardised,
    # a category on 1 row in 600 read 24, and a cell with a square op predicted 434 for 101
    binary = np.isin(data.x[rest], (0.0, 1.0)).all(0)
    mean, std = np.where(binary, 0.0, mean), np.where(binary, 1.0, std)

    def scaled(idx: np.ndarray) -> np.ndarray:
        return ((data.x[idx] - mean) / std).astype(np.float32)

    y = data.y
    target_scale = None
    if regression:  # standardised targets, (n, 1): one Student-t per row
        y_rest = data.y[rest].astype(np.float64)
        target_scale = {"mean": float(y_rest.mean()), "std": float(y_rest.std() or 1.0)}
        y = ((data.y.astype(np.float64) - target_scale["mean"]) / target_scale["std"])[:, None]
    task = build_task(
        scaled(rest),
        y[rest],
        n_clusters=n_clusters,
        test=(scaled(test), y[test]),
        val_fraction=float(cfg.get("val_fraction") or default_val_fraction(n)),
        loss="student_t" if regression else "cross_entropy",
        n_classes=None if regression else len(data.classes or []),
        seed=seed,
        name="table",
    )
    meta = {
        **task.meta,
        "standardisation": {"mean": mean, "std": std},
        "feature_names": list(data.feature_names),
        "classes": [_plain(c) for c in data.classes or []],
        "encoding": data.encoding,
        "target": data.target,
        "target_standardisation": target_scale,
    }
    return replace(task, meta=meta)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def series_task(cfg: dict[str, Any], seed: int) -> ClusteredTask:
    """Forecasting on long-format series or a .tsf file: windows of `context` -> `horizon`
    values from every series, clustered on their descriptors (one domain: the file).

    Gaps are filled and short series left-padded (`sgem.data.series_plan.plan_series`;
    `cfg["missing"] = "error"` refuses gaps instead); a window whose target holds a filled
    value is never cut, and every series with a window has one in the training split.
    `task.meta["series_report"]` says what was filled, padded and left out."""
    from ..baselines.seasonal_naive import infer_season
    from ..forecast import seasonality
    from .files import read_long_series
    from .series_plan import plan_series
    from .timeseries import make_timeseries_task

    columns = {
        "id_col": cfg.get("id_col", "unique_id"),
        "time_col": cfg.get("time_col", "ds"),
        "value_col": cfg.get("value_col", "y"),
    }
    data = read_long_series(cfg["path"], **columns)
    plan = plan_series(data, cfg)
    task = make_timeseries_task(
        {"series": plan.series},
        n_windows=plan.n_windows,
        n_clusters=plan.n_clusters,
        context=plan.context,
        horizon=plan.horizon,
        seed=seed,
        name="series",
        observed={"series": plan.observed},
        every_series=True,
        fix=plan.fix,
    )
    trained = len(np.unique(task.meta["windows"]["train"].series))
    histories = [s[int(np.argmax(o)) :] for s, o in zip(plan.series, plan.observed, strict=True)]
    meta = {
        **task.meta,
        "freq": data.freq,
        # the season the user gave; else integer time steps (no frequency) take the one
        # their history shows, and dated series their frequency's (`season_of`)
        "season": plan.season or (None if data.freq else infer_season(histories)),
        # the file's column names, which `sgem predict` reads new series with
        "series_columns": columns,
        # the season the user gave, else the frequency's, sets the MASE period
        "frequencies": [data.freq],
        "seasonality": [plan.season or seasonality(data.freq)],
        "series_names": plan.names,
        "missing": cfg.get("missing") or "impute",
        "pad_short": True,
        "series_report": {
            **plan.report,
            "series_trained": trained,
            "held_out_windows": task.meta["split"],
        },
        # each series' history without its left padding (windows index the padded series:
        # `history_offsets` says by how much), for classical members that refit on it
        "histories": histories,
        "history_offsets": [int(np.argmax(o)) for o in plan.observed],
    }
    return replace(task, meta=meta)


def image_folder_task(cfg: dict[str, Any], seed: int) -> ClusteredTask:
    """Classification on an image folder (one sub-folder per class) or an NPZ (x, y)."""
    from pathlib import Path

    from .files import read_image_folder, read_image_npz
    from .images import make_image_task

    path = Path(cfg["path"])
    size = cfg.get("image_size")
    data = read_image_npz(path) if path.suffix.lower() == ".npz" else read_image_folder(path, size)
    n_clusters = int(cfg.get("n_clusters") or default_n_clusters(len(data.x)))
    task = make_image_task(
        data.x,
        data.y,
        n_clusters=n_clusters,
        seed=seed,
        n_classes=len(data.class_names),
        name="images",
    )
    return replace(task, meta={**task.meta, "classes": list(data.class_names)})


BUILDERS = {"table": table_task, "series": series_task, "image_folder": image_folder_task}

__all__ = [
    "BUILDERS",
    "MINIBATCH_TABLE_ROWS",
    "TABLE_MINIBATCH",
    "default_n_clusters",
    "image_folder_task",
    "series_task",
    "table_facts",
    "table_task",
]
