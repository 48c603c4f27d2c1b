"""What each `sgem` command does, given its parsed arguments; an exit code back.

Heavy imports happen inside the commands, so `sgem --help` starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path

from .parser import DEFAULT_QUANTILES

#: a user's mistake (`SgemUserError`, a missing file, ...): one line, this exit code
EXIT_USER_ERROR = 2
#: Ctrl-C: the run directory keeps what is finished; `sgem resume` continues it
EXIT_INTERRUPTED = 130


def _fail(message: str) -> int:
    print(f"sgem: error: {message}", file=sys.stderr)
    return EXIT_USER_ERROR


def _run(args: argparse.Namespace) -> int:
    from ..run.pipeline import resume_experiment, run_experiment, summarise

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


def _continue(args: argparse.Namespace, out: str) -> str:
    """How an interrupted `sgem fit` into `out` continues: `sgem resume`, or for a fit
    that chooses K (`--experts auto`, a budgeted table fit growing K: one run per K) the
    same command again, which reuses each K's finished run and resumes the interrupted one."""
    import yaml

    from ..run.experts_choice import grows_experts
    from ..run.rundir import CONFIG

    loop = args.experts == "auto" or any(Path(out).glob("experts-*"))
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        loop = loop or grows_experts(yaml.safe_load((Path(out) / CONFIG).read_text())["run"])
    if loop:
        return "the same `sgem fit` command again (finished K runs are reused)"
    return f"sgem resume {out}"


def _fit(args: argparse.Namespace) -> int:
    from ..run.fitting import fit_and_save
    from ..run.pipeline import summarise

    out = args.out or f"runs/fit-{Path(args.data).stem or 'data'}-seed{args.seed}"
    try:
        _, result = fit_and_save(
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
            season=args.season,
            image_size=args.image_size,
            n_clusters=args.clusters,
            time_budget=args.time_budget,
            forecast_budget=args.forecast_budget,
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
        print(f"\nsgem: interrupted; continue with:\n    {_continue(args, out)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result.get("reused"):  # (the same data and config: nothing was trained)
        print(f"(the finished fit already in {out} is shown; give another --out to fit again)")
    if "experts_auto" in result:
        print("\n".join(experts_lines(result["experts_auto"])))
    print(summarise(result))
    print(f"  run directory: {out}\n  predict with: sgem predict {out} NEW_DATA --out preds.csv")
    return 0


def experts_lines(auto: dict) -> list[str]:
    """What `sgem fit` prints of a choice among several K (`result.json["experts_auto"]`):
    each K's validation loss and holdout NLL, with its paired difference to the best K."""
    lines = []
    for row in auto["candidates"]:
        holdout = row.get("choice_nll", row.get("test_nll"))
        also = "" if holdout is None else f", holdout NLL {holdout:.4g}"
        if row.get("paired_difference_se") is not None:  # (row by row against the best)
            diff, se = row["paired_difference_to_best"], row["paired_difference_se"]
            also += f" ({diff:+.3g} +/- {se:.2g} against the best)"
        lines.append(f"  K={row['n_experts']}: validation loss {row['validation_loss']:.4g}{also}")
    return [*lines, f"  chose K={auto['chosen']} on {auto.get('chosen_on', 'validation')}"]


def _quantiles(text: str) -> tuple[float, ...]:
    """`--quantiles` as levels strictly between 0 and 1, checked before any model loads."""
    from ..errors import SgemUserError
    from ..moe.calibration import quantile_levels

    try:
        return quantile_levels([float(q) for q in text.split(",")])
    except ValueError as exc:
        raise SgemUserError(f"--quantiles must be numbers like 0.1,0.5,0.9: {exc}") from exc


def _predict(args: argparse.Namespace) -> int:
    from ..execution.progress import shown
    from ..moe.model import load
    from ..run.predict_io import predict_file, write_table

    quantiles = _quantiles(args.quantiles)
    model = load(args.model)
    if model.is_classifier and args.quantiles != DEFAULT_QUANTILES:
        print(
            "note: --quantiles is for regression and forecasts; a classifier writes its "
            "class probabilities (p_*)"
        )
    with shown(not args.quiet):  # (a combination refits AutoETS per series: a minute for 2000)
        frame = predict_file(model, args.input, quantiles=quantiles)
    path = write_table(frame, args.out)
    print(f"wrote {len(frame)} rows to {path}")
    return 0


def _explain(args: argparse.Namespace) -> int:

    from ..moe.explain import explain_lines, targets_in
    from ..moe.model import load
    from ..run.predict_io import read_input, write_table

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
    from ..moe.model import load

    quantiles = _quantiles(args.quantiles)
    print(load(args.model).export_onnx(args.out, quantiles=quantiles).describe())
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from ..leaderboard import leaderboard_lines
    from ..moe.model import load

    model = load(args.model)
    print("\n".join(leaderboard_lines(model.spec.info.get("leaderboard"))))
    if args.csv:
        model.leaderboard().to_csv(args.csv, index=False)
        print(f"  written to {args.csv}")
    return 0


def _show(args: argparse.Namespace) -> int:

    from ..moe.model import load
    from ..report.cell_figures import draw_cells

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
    from ..report.figures import plot_convergence
    from ..run.rundir import RunDirectory, RunDirectoryError

    rundir = RunDirectory(args.rundir)
    if not rundir.file("trace.jsonl").exists():
        raise RunDirectoryError(f"{args.rundir} holds no trace.jsonl: not a run directory")
    paths = [plot_convergence(rundir.read_trace(), rundir.file("convergence.png"))]
    task_cfg = rundir.read_config().get("run", {}).get("task", {})
    if rundir.is_complete and task_cfg.get("name") == "images":
        from ..report.image_figures import plot_run_representatives

        paths.append(plot_run_representatives(rundir.path))
    for path in paths:
        print(f"wrote {path}")
    return 0


def _ops(args: argparse.Namespace) -> int:
    import json

    from ..report.analysis import format_op_table, load_run, op_effects

    runs = [load_run(d) for d in args.rundirs]
    table = op_effects(runs, n_bootstrap=args.bootstrap)
    print(format_op_table(table))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    return 0


def _download(args: argparse.Namespace) -> int:
    from ..data.download import download_dataset

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
