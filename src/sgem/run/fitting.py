"""`sgem fit` / `sgem.fit`: search an MoE for the user's own file and save the model.

    model = sgem.fit("train.csv", target="label", time_budget="10m")
    model = sgem.fit("sales.csv", horizon=14)          # long format: unique_id, ds, y
    model = sgem.fit("photos/", image_size=32)          # one sub-folder per class

The kind of data is inferred from the path (a folder: images; a .tsf file or a table with
the id/time/value columns: series; any other table: tabular, which needs `target`). The
run config starts from the matching preset's space and search (toy, ts-offline,
images-offline), takes the data-derived defaults (M from the number of samples, context
from the frequency), then the user's overrides; it is written whole to config.yaml and run
through the same experiment path as `sgem run` (so `sgem resume` works).
"""

from __future__ import annotations

import copy
import math
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
            raise SgemUserError("a table needs the column to predict: --target COLUMN")
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


AUTO_EXPERTS = (2, 3, 4)


def fit(
    data: Any,
    *,
    out: str | os.PathLike | None = None,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
    n_experts: int | str | None = None,
    started: float | None = None,
    **options: Any,
):
    """Search an MoE for `data`, save it in `out` (default runs/fit-<name>-seed<N>) and
    return the loaded `SgemModel` (its result.json as `model.result`). Options are those of
    `fit_config`; `n_experts="auto"` runs `fit_auto_experts`.

    `data`: a path, a pandas DataFrame (a table, or long-format series with unique_id / ds /
    y columns) or a tuple (X, y) (X 2-D: features x0..x{d-1}, target "target"); in-memory
    data is written once into `out/input/` and fitted from there (`sgem.run.fit_input`), so
    `sgem resume` and config.yaml work as for a file. A `time_budget` counts from
    this call (or from `started`, a `time.perf_counter()` value: the CLI's start, so its
    imports count): the fit returns within it (plus a few seconds; `sgem.train.time_fence`)."""
    from ..moe.model import load

    saved, result = fit_and_save(
        data,
        out=out,
        progress=progress,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        gpus_per_task=gpus_per_task,
        n_experts=n_experts,
        started=started,
        **options,
    )
    model = load(saved)
    model.result = result
    return model


def fit_and_save(
    data: Any,
    *,
    out: str | os.PathLike | None = None,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
    n_experts: int | str | None = None,
    started: float | None = None,
    **options: Any,
) -> tuple[Path, dict]:
    """`fit` without loading the saved model back: (`out`, its result.json). The CLI
    prints the result and leaves (loading took 1.3 s, past a 3-minute series fit's budget)."""
    import time

    started = time.perf_counter() if started is None else started
    from .fit_input import check_data, forget, in_memory, materialise
    from .pipeline import run_config

    check_data(data)
    if out is None:
        stem = "data" if in_memory(data) else Path(data).stem or "data"
        out = Path("runs") / f"fit-{stem}-seed{options.get('seed', 0)}"
    written = None
    if in_memory(data):
        data, options["target"], written = materialise(data, out, options.get("target"))
    execution: dict[str, Any] = dict(
        progress=progress,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        gpus_per_task=gpus_per_task,
    )
    try:
        if n_experts == "auto":
            result = fit_auto_experts(data, out, execution=execution, started=started, **options)
        else:
            run = fit_config(data, n_experts=_experts(n_experts), **options)
            # K chosen on validation within the budget
            if grows_experts(run, n_experts, options.get("config")):
                first = AUTO_EXPERTS[0]
                result = fit_auto_experts(
                    data, out, execution, (first, *range(first + 1, 9)), started, True, **options
                )
            else:
                result = run_config(run, out, **execution, started=started)
    except BaseException:
        forget(written, out)  # a fit refused before the run claimed `out` leaves nothing
        raise
    return Path(out), result


def _series_id(path: Path, id_col: str) -> str | None:
    """The id column of a series table, or None where the table has none: one series (its
    time and value columns are checked when it is read)."""
    if path.suffix.lower() not in _TABLE_SUFFIXES:
        return id_col
    from ..data.files import read_frame

    return id_col if id_col in read_frame(path, header_only=True).columns else None


def _experts(value: int | str | None) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    try:
        return int(value)
    except ValueError:
        raise SgemUserError(f"--experts must be an integer >= 1 or 'auto', got {value!r}") from None


def fit_auto_experts(
    data: str | os.PathLike,
    out: str | os.PathLike,
    execution: dict | None = None,
    candidates: tuple[int, ...] = AUTO_EXPERTS,
    started: float | None = None,
    grow: bool = False,
    **options: Any,
) -> dict:
    """Choose K among `candidates` on measured validation loss. `execution`: run_config's
    progress / executor / workers / ray_address / gpus_per_task; `started`: the caller's
    `time.perf_counter()`, so the whole choice keeps a time budget.

    `grow=False` (`--experts auto`): every K runs, each in `out/experts-K` with an equal
    part of the budget left when it starts (a K that ends early leaves its rest to the next).
    `grow=True` (a budgeted table fit without --experts): the first K runs in `out` itself
    with the whole budget, as a fixed-K fit would; each next K runs, with all that is left,
    only while the last one gained on validation and the rest of the budget holds it
    (estimated from the last K's wall clock). Why: a planned search ends when its configured
    iterations are done, often at a fraction of the budget, and K is what the rest buys
    most reliably (`sgem.run.budget`).

    The winner is the K whose searched MoE has the lowest holdout NLL (`_choice_key`): the
    part of the file that no choice inside any K's run was made on, where the final networks
    (retrained on train + validation) are scored as they are saved. Each K's validation loss
    (its returned regions' search-stage losses, weighted by region size) is reported beside
    it and decides only where a run has no holdout score. Its model is copied to
    `out/model` and its result.json to `out/result.json` with an `experts_auto` report of
    every K. A K whose search leaves an expert without a cluster is reported with the
    experts it really uses (`n_experts_used`)."""
    import json
    import shutil
    import time

    from ..atomic import replace_dir, write_atomic
    from .budget import parse_duration
    from .early_references import shared_table_references
    from .pipeline import run_config

    out = Path(out)
    started = time.perf_counter() if started is None else started
    total = options.pop("time_budget", None)
    total = None if total is None else parse_duration(total)
    report: list[dict] = []
    runs: list[tuple[int, dict, Path]] = []
    stop = "every candidate K ran"
    with shared_table_references():  # (they do not depend on K)
        for i, k in enumerate(candidates):
            begun = started if i == 0 else time.perf_counter()
            left = None if total is None else total - (begun - started)
            if grow and i > 0:
                why_not = _why_not_grow(report, left, k)
                if why_not:
                    stop = why_not
                    break
            budget = left if grow or left is None else left / (len(candidates) - i)
            rundir = out if grow and i == 0 else out / f"experts-{k}"
            try:
                run = fit_config(data, n_experts=k, time_budget=budget, **options)
                result = run_config(run, rundir, **(execution or {}), started=begun)
            except SgemUserError as exc:
                if not report:
                    raise
                if rundir != out and not (rundir / "result.json").exists():
                    shutil.rmtree(rundir, ignore_errors=True)  # refused: nothing of it is kept
                stop = f"K={k} did not fit the {budget or 0:.0f} s left ({exc})"
                break
            val_loss = _validation_loss(result)
            report.append(
                {
                    "n_experts": k,
                    "n_experts_used": len(set(result["routing"])),
                    "n_clusters": len(result["routing"]),
                    "validation_loss": val_loss,
                    "test_nll": result["test_nll"],
                    "seconds": round(time.perf_counter() - begun, 1),
                    "reused_seconds": _reused_seconds(result),
                    "budget_seconds": None if budget is None else round(budget, 1),
                }
            )
            runs.append((k, result, rundir))
    assert runs
    key = _choice_key(report)
    k, result, rundir = runs[min(range(len(report)), key=lambda i: report[i][key])]
    result = {
        **result,
        "experts_auto": {
            "chosen": k,
            "chosen_on": _CHOSEN_ON[key],
            "candidates": report,
            "why_it_stopped": stop,
        },
    }
    result["wall_seconds"] = round(time.perf_counter() - started, 3)  # every K's run
    if total is not None and len(report) > 1 and isinstance(result.get("time_budget"), dict):
        tried = ", ".join(str(r["n_experts"]) for r in report)
        result["time_budget"] = {
            **result["time_budget"],
            "budget_seconds": total,
            "why_it_ended": f"{result['time_budget'].get('why_it_ended')} (K = {k}'s run); "
            f"K = {tried} tried in {result['wall_seconds']:.0f} s of {total:.0f} s ({stop}), "
            f"K = {k} chosen on {_CHOSEN_ON[key]}",
        }
    if rundir != out:  # the winner's model, replaced whole (a kill leaves the old or the new)
        staged = out / ".model-winner"
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(rundir / "model", staged)
        replace_dir(staged, out / "model")
    write_atomic(out / "result.json", json.dumps(result, indent=2, default=str))
    return result


#: the least budget a next K is started with, as a share of the last K's wall clock (less
#: what the next run reuses) scaled by K_next / K_last: its plan fits its search into what is
#: left (`sgem.run.budget`), and below about half the last K's effort its search is too small
#: to compete. (At 0.6, counting the references again, a 3-minute fit on four mixed
#: structures stopped after K = 2's 102 s: "K=3 needs about 91 s, 78 s were left"; K = 3
#: alone, without a budget, took 70 s and its holdout NLL was 0.16 against K = 2's 0.29.)
GROW_MARGIN = 0.5


#: what `_choice_key`'s answer is, in words
_CHOSEN_ON = {"test_nll": "the holdout", "validation_loss": "validation"}


def _choice_key(report: list[dict]) -> str:
    """The report field the Ks are compared on: the searched MoE's holdout NLL where every K
    has one, else the search's validation loss. Why the holdout: validation scored the
    search-stage networks each K's search chose among (and a larger K chooses more); the
    holdout scores the final MoE as saved, and nothing was chosen on it. On a CSV of three
    mixed structures (`benchmarks/mixed_csv.py`) validation preferred K = 4 on a seed where
    K = 3's holdout NLL was 0.078 against K = 4's 0.114."""
    holdout = all(_finite(row.get("test_nll")) for row in report)
    return "test_nll" if holdout else "validation_loss"


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _why_not_grow(report: list[dict], left: float | None, k: int) -> str | None:
    """Why a growing K choice stops before trying `k` (None: try it): the last K did not
    gain where Ks are compared (`_choice_key`), `k` exceeds half the clusters, or less is
    left than `GROW_MARGIN` of the last K's time (less what the next run reuses: a table's
    references, `shared_table_references`; scaled by K)."""
    key = _choice_key(report)
    if len(report) >= 2 and report[-1][key] >= report[-2][key]:
        return f"K={report[-1]['n_experts']} did not gain on {_CHOSEN_ON[key]}"
    if k > report[-1]["n_clusters"] // 2:  # an expert should own two clusters on average
        return f"K={k} is more than half of the {report[-1]['n_clusters']} clusters"
    if left is None:
        return None
    last = report[-1]
    need = GROW_MARGIN * (last["seconds"] - last.get("reused_seconds", 0.0)) * k / last["n_experts"]
    if left < need:
        return f"K={k} needs about {need:.0f} s, {max(left, 0.0):.0f} s were left"
    return None


def _reused_seconds(result: dict) -> float:
    """The seconds of a K's run that the next K's run reuses: a table's scikit-learn
    references (`sgem.run.early_references.shared_table_references`)."""
    stages = (result.get("clock") or {}).get("stage_seconds") or {}
    return float(stages.get("scikit_learn_references", 0.0))


def _validation_loss(result: dict) -> float:
    """The size-weighted validation loss of a run's returned regions (an expert its search
    left without a cluster is not among them: routing and losses count the used ones)."""
    import numpy as np

    losses = np.asarray(
        [np.nan if v is None else v for v in result["region_val_losses"]], dtype=float
    )
    sizes = np.bincount(result["routing"], weights=result["cluster_sizes"], minlength=len(losses))
    used = ~np.isnan(losses)
    return float((losses[used] * sizes[used]).sum() / sizes[used].sum())


def grows_experts(run: dict, n_experts: int | str | None, config: Any = None) -> bool:
    """Whether a fit chooses K by growing it within its budget: a budgeted table fit whose
    K the user left open (no --experts, none in the --config override `config`)."""
    from .pipeline import read_config_file

    override = config if config is None or isinstance(config, dict) else read_config_file(config)
    return (
        n_experts is None
        and run.get("time_budget") is not None
        and run["task"].get("name") == "table"
        and "n_experts" not in ((override or {}).get("search") or {})
    )


__all__ = [
    "AUTO_EXPERTS",
    "KINDS",
    "fit",
    "fit_and_save",
    "fit_auto_experts",
    "fit_config",
    "grows_experts",
    "infer_kind",
]
