"""The `sgem` command: run, fit, resume, predict, show, plot, ops, download.

User mistakes (`SgemUserError` and the older ValueError-based errors) print one line and
exit with code 2; anything else is a bug and prints its traceback with a request to report
it. Heavy imports happen inside the commands, so `sgem --help` starts fast.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable

from .terminal import one_line_warning, said_once

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


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
    fit.add_argument("--image-size", type=int, default=32, help="images: side in pixels (32)")
    fit.add_argument("--clusters", type=int, default=None, help="M (default from the data size)")
    fit.add_argument(
        "--experts",
        default=None,
        help="K experts (default 2; series 4; a table with --time-budget: K grows from 2 "
        "while validation gains and the budget lasts), or 'auto': the best of 2, 3, 4",
    )
    fit.add_argument("--time-budget", default=None, help="e.g. 10m, 2h: plan the search to it")
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
        default="0.1,0.5,0.9",
        help="regression / forecast quantiles, comma-separated (default 0.1,0.5,0.9)",
    )
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


def _fail(message: str) -> int:
    print(f"sgem: error: {message}", file=sys.stderr)
    return EXIT_USER_ERROR


# -- commands --------------------------------------------------------------------------------
def _run(args: argparse.Namespace) -> int:
    from .run.pipeline import resume_experiment, run_experiment, summarise

    out = args.rundir if args.command == "resume" else args.out
    if out is None:
        out = f"runs/{args.preset}-seed{args.seed}"
    common = dict(
        progress=not args.quiet,
        executor=args.executor,
        workers=args.workers,
        ray_address=args.ray_address,
        gpus_per_task=args.gpus_per_task,
    )
    try:
        if args.command == "run":
            result = run_experiment(
                args.preset,
                seed=args.seed,
                out=out,
                config_file=args.config,
                device=args.device,
                **common,
            )
        else:
            result = resume_experiment(out, **common)
    except KeyboardInterrupt:
        print(
            f"\nsgem: interrupted. Finished trainings are saved in {out}/store.sqlite; "
            f"continue with:\n    sgem resume {out}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if result.get("reused"):
        print("(this run directory already holds the finished run with this config)")
    print(summarise(result))
    print(f"  run directory: {out}  (model: {out}/model; sgem show {out})")
    return 0


def _fit(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .run.fitting import fit
    from .run.pipeline import summarise

    out = args.out or f"runs/fit-{Path(args.data).stem or 'data'}-seed{args.seed}"
    try:
        model = fit(
            args.data,
            out=out,
            progress=not args.quiet,
            executor=args.executor,
            workers=args.workers,
            ray_address=args.ray_address,
            gpus_per_task=args.gpus_per_task,
            n_experts=args.experts,
            kind=args.kind,
            target=args.target,
            task_kind=args.task,
            features=args.features.split(",") if args.features else None,
            horizon=args.horizon,
            context=args.context,
            image_size=args.image_size,
            n_clusters=args.clusters,
            time_budget=args.time_budget,
            seed=args.seed,
            config=args.config,
            device=args.device,
            id_col=args.id_col,
            time_col=args.time_col,
            value_col=args.value_col,
            missing=args.missing,
            combine=args.combine,
            started=args.started,
        )
    except KeyboardInterrupt:
        print(f"\nsgem: interrupted; continue with:\n    sgem resume {out}", file=sys.stderr)
        return EXIT_INTERRUPTED
    result = model.result or {}
    if "experts_auto" in result:
        for row in result["experts_auto"]["candidates"]:
            print(f"  K={row['n_experts']}: validation loss {row['validation_loss']:.4g}")
        print(f"  chose K={result['experts_auto']['chosen']}")
    print(summarise(result))
    print(f"  run directory: {out}\n  predict with: sgem predict {out} NEW_DATA --out preds.csv")
    return 0


def _quantiles(text: str) -> tuple[float, ...]:
    """`--quantiles` as levels strictly between 0 and 1, checked before any model loads."""
    from .errors import SgemUserError
    from .moe.calibration import quantile_levels

    try:
        return quantile_levels([float(q) for q in text.split(",")])
    except ValueError as exc:
        raise SgemUserError(f"--quantiles must be numbers like 0.1,0.5,0.9: {exc}") from exc


def _predict(args: argparse.Namespace) -> int:
    from .execution.progress import shown
    from .moe.model import load
    from .run.predict_io import predict_file, write_table

    quantiles = _quantiles(args.quantiles)
    model = load(args.model)
    with shown(True):  # (a combination refits AutoETS per series: a minute for 2000)
        frame = predict_file(model, args.input, quantiles=quantiles)
    path = write_table(frame, args.out)
    print(f"wrote {len(frame)} rows to {path}")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .moe.explain import explain_lines, targets_in
    from .moe.model import load
    from .run.predict_io import read_input, write_table

    model = load(args.model)
    x, ids = read_input(model, args.input)
    frame = model.explain(x, ids=ids)
    importance = None
    if args.importance:
        importance = model.explain_importance(x, targets_in(model, x, args.input))
    print("\n".join(explain_lines(model, frame, importance, rows=max(args.rows, 0))))
    if args.out:
        print(f"wrote {len(frame)} rows to {write_table(frame, args.out)}")
        if importance is not None:
            out = Path(args.out)
            path = write_table(importance, out.with_name(f"{out.stem}.importance{out.suffix}"))
            print(f"wrote the importance table to {path}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from .moe.model import load

    quantiles = _quantiles(args.quantiles)
    print(load(args.model).export_onnx(args.out, quantiles=quantiles).describe())
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from .leaderboard import leaderboard_lines
    from .moe.model import load

    model = load(args.model)
    print("\n".join(leaderboard_lines(model.spec.info.get("leaderboard"))))
    if args.csv:
        model.leaderboard().to_csv(args.csv, index=False)
        print(f"  written to {args.csv}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .moe.model import load
    from .report.cell_figures import draw_cells

    model = load(args.model)
    print(model.summary())
    spec = model.spec
    cells = Path(args.cells) if args.cells else Path(args.model) / "model" / "cells.png"
    if not cells.parent.is_dir():
        cells = Path(args.model) / "cells.png"
    titles = [
        f"expert {k} ({int((model.assignment == k).sum())} clusters)" for k in range(spec.n_experts)
    ]
    draw_cells(spec.architectures, cells, spec.space.get("kind", "tabular"), titles)
    print(f"  cells drawn in {cells}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from .report.figures import plot_convergence
    from .run.rundir import RunDirectory, RunDirectoryError

    rundir = RunDirectory(args.rundir)
    if not rundir.file("trace.jsonl").exists():
        raise RunDirectoryError(f"{args.rundir} holds no trace.jsonl: not a run directory")
    paths = [plot_convergence(rundir.read_trace(), rundir.file("convergence.png"))]
    task_cfg = rundir.read_config().get("run", {}).get("task", {})
    if rundir.is_complete and task_cfg.get("name") == "images":
        from .report.image_figures import plot_run_representatives

        paths.append(plot_run_representatives(rundir.path))
    for path in paths:
        print(f"wrote {path}")
    return 0


def _ops(args: argparse.Namespace) -> int:
    import json

    from .report.analysis import format_op_table, load_run, op_effects

    runs = [load_run(d) for d in args.rundirs]
    table = op_effects(runs, n_bootstrap=args.bootstrap)
    print(format_op_table(table))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    return 0


def _download(args: argparse.Namespace) -> int:
    from .data.download import download_dataset

    paths = download_dataset(
        args.name,
        args.directory,
        names=args.members or None,
        mirror=args.mirror,
        progress=not args.quiet,
    )
    for path in paths:
        print(f"ready: {path}")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": _run,
    "fit": _fit,
    "resume": _run,
    "predict": _predict,
    "show": _show,
    "leaderboard": _leaderboard,
    "explain": _explain,
    "export": _export,
    "plot": _plot,
    "ops": _ops,
    "download": _download,
}


def main(argv: list[str] | None = None) -> int:
    import warnings

    started = time.perf_counter()  # before torch and statsforecast are imported: a time
    # budget counts their seconds too (`sgem fit --time-budget 30s` returned after 36 s)
    args = _parser().parse_args(argv)
    args.started = started
    shown, warnings.formatwarning = warnings.formatwarning, one_line_warning
    show, warnings.showwarning = warnings.showwarning, said_once(warnings.showwarning)
    try:
        return COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError, ConnectionError, ImportError, PermissionError) as exc:
        # SgemUserError, RunDirectoryError and StoreError are ValueErrors: the user's to fix
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("\nsgem: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:
        traceback.print_exc()
        print(
            "sgem: internal error (a bug, not your input). Please report it with the "
            "traceback above and the command you ran.",
            file=sys.stderr,
        )
        return 1
    finally:
        warnings.formatwarning, warnings.showwarning = shown, show


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
