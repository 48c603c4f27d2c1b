"""The `sgem` command line's parser: every command, its arguments and their help.

Kept apart from the commands so `sgem --help` and the docs' reference
(`docs/generate_reference.py`) read it without importing anything heavy.
"""

from __future__ import annotations

import argparse

#: `sgem predict`'s quantile levels unless --quantiles names others
DEFAULT_QUANTILES = "0.1,0.5,0.9"


def _add_device_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device",
        default=None,
        help="cpu, cuda, cuda:N or auto (a GPU when present); default: the config's (cpu)",
    )


def _add_executor_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        choices=["auto", "inline", "batched", "processes", "ray"],
        default="auto",
        help="where candidates are trained: auto (default) is 'processes' on a CPU with 2 or "
        "more cores, else 'inline'; results agree (up to float noise where thread counts differ)",
    )
    p.add_argument(
        "--workers", type=int, default=2, help="worker processes for 'processes' (and auto)"
    )
    p.add_argument(
        "--ray-address",
        default=None,
        help="Ray cluster address host:port (default: start a local Ray)",
    )
    p.add_argument(
        "--gpus-per-task",
        type=float,
        default=0.0,
        help="GPUs each Ray training task declares (default 0)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars, summary only")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sgem",
        description="Structure-aware NAS for Mixture-of-Experts (surrogate-assisted EM).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a preset end to end (search, final MoE, test, model)")
    run.add_argument(
        "preset",
        help="which experiment: toy, ts-offline (CPU-sized), ts-paper (GPU, Monash), "
        "images-offline (CPU-sized, CIFAR-10 + MNIST) or images-paper (GPU, CIFAR-100 + SVHN "
        "from task.directory)",
    )
    run.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    run.add_argument("--out", default=None, help="run directory (default runs/PRESET-seedN)")
    run.add_argument("--config", default=None, help="YAML file overriding preset keys")
    _add_device_flag(run)
    _add_executor_flags(run)
    fit = sub.add_parser(
        "fit",
        help="search an MoE for your own data (table, series, image folder) and save the model",
    )
    fit.add_argument(
        "data",
        help="a CSV/Parquet/NPZ table, a long-format series table (unique_id, ds, y) or .tsf "
        "file, or a folder of images with one sub-folder per class",
    )
    fit.add_argument("--kind", choices=["tabular", "timeseries", "images"], default=None)
    fit.add_argument("--target", default=None, help="tabular: the column to predict")
    fit.add_argument(
        "--task",
        choices=("classification", "regression"),
        default=None,
        help="tabular: what to predict the target as (default: inferred; a few distinct "
        "integers are classes, e.g. a count 0..12; --task regression treats them as numbers)",
    )
    fit.add_argument(
        "--features", default=None, help="tabular: comma-separated feature columns (default all)"
    )
    fit.add_argument("--horizon", type=int, default=None, help="series: steps to forecast")
    fit.add_argument(
        "--context", type=int, default=None, help="series: past steps read (default from freq)"
    )
    fit.add_argument(
        "--season",
        type=int,
        default=None,
        help="series: the seasonal period AutoETS / AutoTheta / seasonal naive model and MASE "
        "scales by (default from the frequency: 12 monthly, 4 quarterly; 1: none)",
    )
    fit.add_argument("--image-size", type=int, default=32, help="images: side in pixels (32)")
    fit.add_argument("--clusters", type=int, default=None, help="M (default from the data size)")
    fit.add_argument(
        "--experts",
        default=None,
        help="K experts (default 2; series 4; a table with --time-budget: K grows from 2 "
        "until two Ks in a row do not gain on the holdout or the budget ends; the smallest "
        "K within one standard error of the best is kept), or 'auto': the same among 2, 3, 4",
    )
    fit.add_argument("--time-budget", default=None, help="e.g. 10m, 2h: plan the search to it")
    fit.add_argument(
        "--forecast-budget",
        default=None,
        help="series: what refitting AutoETS / AutoTheta on every series may take when the saved "
        "model forecasts, e.g. 5m (default: no limit); members beyond it are left out of the "
        "combination, which can cost much accuracy",
    )
    fit.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    fit.add_argument("--out", default=None, help="run directory (default runs/fit-NAME-seedN)")
    fit.add_argument("--config", default=None, help="YAML file overriding run config keys")
    _add_device_flag(fit)
    fit.add_argument(
        "--missing",
        choices=["impute", "error"],
        default="impute",
        help="missing values: impute (default; tables: median + indicator, most frequent "
        "category; rows without a target dropped) or error (refuse them)",
    )
    fit.add_argument(
        "--no-combination",
        dest="combine",
        action="store_false",
        help="save the MoE (with selective routing) even where its combination with the "
        "references scores better on the leaderboard: the model ONNX export can serve",
    )
    for name, default in (("--id-col", "unique_id"), ("--time-col", "ds"), ("--value-col", "y")):
        more = (
            "; a table of only the time and value columns is one series"
            if default == "unique_id"
            else ""
        )
        fit.add_argument(
            name, default=default, help=f"series: column name (default {default}{more})"
        )
    _add_executor_flags(fit)
    resume = sub.add_parser("resume", help="continue an interrupted run from its checkpoint")
    resume.add_argument("rundir", help="the run directory to continue")
    _add_executor_flags(resume)
    predict = sub.add_parser(
        "predict",
        help="predict with a saved model: one row per sample (or per series and step)",
    )
    predict.add_argument("model", help="a run directory (its model/) or a model directory")
    predict.add_argument(
        "input",
        help="tabular: CSV/Parquet/NPZ; forecasting: long-format CSV/Parquet (unique_id, ds, "
        "y) or .tsf; images: a folder of images or NPZ",
    )
    predict.add_argument("--out", required=True, help="where to write (CSV, or .parquet)")
    predict.add_argument(
        "--quantiles",
        default=DEFAULT_QUANTILES,
        help=f"regression / forecast quantiles, comma-separated (default {DEFAULT_QUANTILES})",
    )
    predict.add_argument("--quiet", action="store_true", help="no progress bars")
    explain = sub.add_parser(
        "explain",
        help="why each row or series went to its expert: cluster, distances to the centroids, "
        "the expert's validation NLL beside the fallback's, permutation importance (tables)",
    )
    explain.add_argument("model", help="a run directory (its model/) or a model directory")
    explain.add_argument("input", help="what `sgem predict` reads for this model")
    explain.add_argument("--out", default=None, help="also write every row as CSV (or .parquet)")
    explain.add_argument("--rows", type=int, default=20, help="rows to print (default 20)")
    explain.add_argument(
        "--importance",
        action="store_true",
        help="tables: permutation importance per expert (needs the target column, or NPZ 'y')",
    )
    export = sub.add_parser(
        "export",
        help="write a saved model as one ONNX graph (preprocessing, routing, experts, "
        "calibration) that onnxruntime runs alone; needs pip install 'sgem[export]'",
    )
    export.add_argument("model", help="a run directory (its model/) or a model directory")
    export.add_argument("--format", choices=["onnx"], default="onnx", help="the file format")
    export.add_argument("--out", required=True, help="the file to write, e.g. model.onnx")
    export.add_argument(
        "--quantiles",
        default="0.1,0.5,0.9",
        help="regression / forecast quantiles in the graph, comma-separated (default 0.1,0.5,0.9)",
    )
    show = sub.add_parser("show", help="print the model card and draw each expert's cell")
    show.add_argument("model", help="a run directory or a model directory")
    show.add_argument(
        "--cells", default=None, help="where to draw the cells (default MODEL/cells.png)"
    )
    board = sub.add_parser(
        "leaderboard",
        help="print a fit's leaderboard: the MoE beside one network of its cell and the models "
        "a user would otherwise pick, on validation and the holdout, and what was saved",
    )
    board.add_argument("model", help="a run directory or a model directory")
    board.add_argument("--csv", default=None, help="also write the table as CSV here")
    plot = sub.add_parser(
        "plot",
        help="(re)draw convergence.png (and, for an image run, cluster_representatives.png) "
        "from a run directory",
    )
    plot.add_argument("rundir", help="a run directory written by `sgem run`")
    ops = sub.add_parser(
        "ops",
        help="operation-effect table (paper Table ts_ops) from finished runs' observations",
    )
    ops.add_argument("rundirs", nargs="+", help="run directories (pooled by domain name)")
    ops.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    ops.add_argument("--json", default=None, help="also write the table as JSON here")
    download = sub.add_parser(
        "download",
        help="fetch an original dataset (cifar10, cifar100, svhn, mnist, or the Monash "
        "forecasting files), checksum-verified",
    )
    download.add_argument(
        "name",
        help="cifar10, cifar100, svhn, mnist, monash (all four forecasting files), or one of "
        "electricity_hourly, kdd_cup_2018, weather, tourism_monthly",
    )
    download.add_argument("directory", help="where to put it (the directory task.directory names)")
    download.add_argument("members", nargs="*", help="monash only: which files (default all four)")
    download.add_argument(
        "--mirror", default=None, help="URL or local folder holding the same file names"
    )
    download.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


__all__ = ["_parser"]
