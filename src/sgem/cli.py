"""The `sgem` command: run, resume, plot, ops, download."""

from __future__ import annotations

import argparse
import sys

from .rundir import RunDirectoryError
from .store import StoreError


def _add_executor_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        choices=["inline", "batched", "processes", "ray"],
        default="inline",
        help="where candidates are trained (default inline; results agree up to float noise)",
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes for 'processes'")
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
    run = sub.add_parser("run", help="run a preset end to end (search, final MoE, test)")
    run.add_argument(
        "preset",
        help="which experiment: toy, ts-offline (CPU-sized), ts-paper (GPU, Monash), "
        "images-offline (CPU-sized, CIFAR-10 + MNIST) or images-paper (GPU, CIFAR-100 + SVHN "
        "from task.directory)",
    )
    run.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    run.add_argument("--out", default=None, help="run directory (default runs/PRESET-seedN)")
    run.add_argument("--config", default=None, help="YAML file overriding preset keys")
    _add_executor_flags(run)
    resume = sub.add_parser("resume", help="continue an interrupted run from its checkpoint")
    resume.add_argument("rundir", help="the run directory to continue")
    _add_executor_flags(resume)
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
        help="fetch an original image dataset (cifar10, cifar100, svhn, mnist), MD5-checked",
    )
    download.add_argument("name", help="cifar10, cifar100, svhn or mnist")
    download.add_argument("directory", help="where to put it (the directory task.directory names)")
    download.add_argument(
        "--mirror", default=None, help="URL or local folder holding the same file names"
    )
    download.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def _fail(message: str) -> int:
    print(f"sgem: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("run", "resume"):
        from .pipeline import resume_experiment, run_experiment, summarise

        out = (
            args.rundir
            if args.command == "resume"
            else (args.out or f"runs/{args.preset}-seed{args.seed}")
        )
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
                    args.preset, seed=args.seed, out=out, config_file=args.config, **common
                )
            else:
                result = resume_experiment(out, **common)
        except (RunDirectoryError, StoreError, ValueError, ConnectionError, ImportError) as exc:
            return _fail(str(exc))
        except KeyboardInterrupt:
            print(
                f"\nsgem: interrupted. Finished trainings are saved in {out}/store.sqlite; "
                f"continue with:\n    sgem resume {out}",
                file=sys.stderr,
            )
            return 130
        if result.get("reused"):
            print("(this run directory already holds the finished run with this config)")
        print(summarise(result))
        print(f"  run directory: {out}")
    elif args.command == "plot":
        from .report import plot_convergence
        from .rundir import RunDirectory

        rundir = RunDirectory(args.rundir)
        try:
            if not rundir.file("trace.jsonl").exists():
                raise RunDirectoryError(f"{args.rundir} holds no trace.jsonl: not a run directory")
            paths = [plot_convergence(rundir.read_trace(), rundir.file("convergence.png"))]
            task_cfg = rundir.read_config().get("run", {}).get("task", {})
            if rundir.is_complete and task_cfg.get("name") == "images":
                from .report_images import plot_run_representatives

                paths.append(plot_run_representatives(rundir.path))
        except (RunDirectoryError, ValueError, FileNotFoundError) as exc:
            return _fail(str(exc))
        for path in paths:
            print(f"wrote {path}")
    elif args.command == "ops":
        import json

        from .analysis import format_op_table, load_run, op_effects

        try:
            runs = [load_run(d) for d in args.rundirs]
            table = op_effects(runs, n_bootstrap=args.bootstrap)
        except ValueError as exc:
            return _fail(str(exc))
        print(format_op_table(table))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(table, f, indent=1)
    elif args.command == "download":
        from .data.download import download_dataset

        try:
            paths = download_dataset(
                args.name, args.directory, mirror=args.mirror, progress=not args.quiet
            )
        except (ValueError, ConnectionError) as exc:
            return _fail(str(exc))
        for path in paths:
            print(f"ready: {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
