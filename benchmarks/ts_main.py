"""Table ts_main: SGEM against the forecasting baselines on a multi-domain mixture.

Per seed, one task (windows, split and clustering depend on the seed), then SGEM (search +
final MoE) and every baseline under the same protocol (`sgem.methods.MethodBudget`:
same candidate training, same final retraining on train + validation, test once). Reports
test NLL and sample CRPS mean +- std over seeds, the field's forecast metrics (MASE and
mean weighted quantile loss over the levels 0.1..0.9, in original units, per domain divided
by seasonal naive's and aggregated by the geometric mean across domains: the GluonTS /
Chronos / fev convention, GluonTS's default seasonalities from each file's @frequency),
domain recovery (Hungarian agreement of the routing with the majority-domain partition) and
wall clock; then paired comparisons of SGEM against each baseline (per-seed differences,
a bootstrap 95% interval over seeds and a window-level paired bootstrap, stratified by
seed). Writes JSON and markdown to benchmarks/results/ts_main_<tag>.{json,md}, plus the
operation-effect table (Table ts_ops) pooled over the SGEM runs' observations. Progress is
saved after every method, so an interrupted benchmark keeps what it finished (`--resume`
skips it).

Domains: the preset's (the four offline stand-ins, or the Monash files of --data-dir), or
`--files A.tsf B.tsf ...`: any number of Monash-format files, one domain each (named by
the file's stem). Final training length: `--final-length fixed` (the preset's steps or
epochs) or `validation` (each final network's length chosen on validation, then retrained
on train + validation; `sgem.final.length`), applied to SGEM and every baseline alike.

Scales:
  smoke    configs/ts-smoke.yaml over `ts-offline`: 400 windows, M = 6, K = 2, tiny cells
           and search (a wiring check: ~15 s on 2 CPU cores)
  offline  the `ts-offline` preset (4000 windows, M = 20, K = 4) on the offline stand-ins
  paper    the `ts-paper` preset: real Monash files (--data-dir), 40,000 windows, M = 30,
           final retrain 50 epochs; for a GPU (--device cuda)
Any scale can be shrunk with --n-windows / --n-clusters / --iterations / --budget /
--steps / --final-steps, and --context / --horizon set the window (short quarterly or
yearly series have too few windows of 96 + 24); the JSON records the exact effective
configuration.

    python benchmarks/ts_main.py --scale smoke --seeds 0
    python benchmarks/ts_main.py --scale offline --seeds 0 1 2 3 4
    python benchmarks/ts_main.py --scale paper --data-dir ~/monash --device cuda
    python benchmarks/ts_main.py --scale offline --files a.tsf b.tsf --seeds 0 1 --tag ab
    python benchmarks/ts_main.py --scale offline --files q.tsf y.tsf --context 24 --horizon 8
    python benchmarks/ts_main.py --scale offline --seeds 0 1 2 3 4 --matched   # both budgets
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sgem.bench.config import add_scale_arguments, scale_config
from sgem.bench.forecasting import TableRun, run_table
from sgem.bench.methods import BASELINES
from sgem.bench.tables import merge_outputs, render
from sgem.errors import SgemUserError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_scale_arguments(p)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--methods", nargs="+", default=["sgem", *BASELINES])
    p.add_argument("--note", default=None, help="a note for the table (e.g. machine load)")
    p.add_argument(
        "--matched",
        action="store_true",
        help="also run each searching label-free baseline in --methods at SGEM's own number "
        "of candidate trainings on the seed (rows <method>@sgem): both budgets in one table",
    )
    p.add_argument(
        "--champions-from",
        default=None,
        metavar="JSON",
        help="reuse the best-single-cell searches recorded (Global single rows) in this saved "
        "table at the same --budget, instead of repeating them",
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--tag", default=None, help="file name suffix (default: the scale)")
    p.add_argument("--resume", action="store_true", help="skip (seed, method) already saved")
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--render", default=None, help="only re-render the markdown of this JSON")
    p.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="JSON",
        help="merge these outputs (e.g. one process per seed or method) into ts_main_<tag>",
    )
    return p


def main() -> None:
    p = build_parser()
    args = p.parse_args()
    try:
        if args.merge:
            paths = [Path(f) for f in args.merge]
            print(merge_outputs(paths, Path(args.out), args.tag or "merged"))
        elif args.render:
            print(render(Path(args.render)))
        else:
            run = TableRun(
                scale=args.scale,
                seeds=args.seeds,
                methods=args.methods,
                matched=args.matched,
                threads=args.threads,
                tag=args.tag,
                resume=args.resume,
                out=Path(args.out),
                note=args.note,
                champions_from=args.champions_from,
            )
            run_table(scale_config(args), run)
    except SgemUserError as exc:
        p.error(str(exc))


if __name__ == "__main__":
    main()
