"""The `sgem` command."""

from __future__ import annotations

import argparse
import sys

from .rundir import RunDirectoryError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sgem",
        description="Structure-aware NAS for Mixture-of-Experts (surrogate-assisted EM).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a preset end to end (search, final MoE, test)")
    run.add_argument("preset", choices=["toy"], help="which experiment")
    run.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    run.add_argument("--out", default=None, help="run directory (default runs/PRESET-seedN)")
    run.add_argument("--config", default=None, help="YAML file overriding preset keys")
    run.add_argument("--quiet", action="store_true", help="no progress bars, summary only")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        from .pipeline import run_experiment, summarise

        try:
            result = run_experiment(
                args.preset,
                seed=args.seed,
                out=args.out,
                progress=not args.quiet,
                config_file=args.config,
            )
        except (RunDirectoryError, ValueError) as exc:
            print(f"sgem: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(
                "sgem: interrupted; finished observations are in the run directory's "
                "observations.jsonl",
                file=sys.stderr,
            )
            return 130
        if result.get("reused"):
            print("(this run directory already holds the finished run with this config)")
        print(summarise(result))
        out = args.out or f"runs/{args.preset}-seed{args.seed}"
        print(f"  run directory: {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
