"""Table cifar_main: SGEM against the image baselines on a two-source image mixture.

Per seed: one task (mixture draw, split and clustering depend on the seed), then SGEM
(search + cluster-gated final MoE) and the baselines under one protocol
(`sgem.methods.MethodBudget`: the same candidate training, the same final retraining on
train + validation, test once): Random-MoE, DARTS x K, the DARTS oracle MoE (uses source
labels) and, with --decomposition, the decomposition ablation (Table decomp). For every
method the same experts are also trained under a learnable gate (`sgem.moe.learnable_gate`)
unless --no-learnable-gate. Reports cluster-gate test accuracy mean +- std over seeds,
source recovery (Hungarian agreement of the routing with the majority-source partition),
learnable-gate accuracy and wall clock; JSON + markdown to
benchmarks/results/images_main_<tag>.{json,md} after every method (--resume skips what is
saved), and the cluster-representatives figure of each SGEM run.

Scales (configs/images-<scale>.yaml; the JSON records the effective configuration):
  smoke    a few minutes on 2 CPU cores: 600 images, 16 x 16, M = 8 (a wiring check)
  offline  CIFAR-10 subset + MNIST from the shared data directory, downsampled to 16 x 16,
           small cells and budgets sized for a shared 2-core CPU
  paper    CIFAR-100 + SVHN (--data-dir with cifar-100-python/ and train_32x32.mat),
           42,000 images, M = 30, K = 2, init_channels 16, final retrain 100 epochs SGD
           lr 0.05 / momentum 0.9 / Nesterov / wd 3e-4 / cosine / batch 128 / clip 5;
           for a GPU (device auto)

    python benchmarks/images_main.py --scale smoke --seeds 0
    python benchmarks/images_main.py --scale offline --seeds 0 1 2
    python benchmarks/images_main.py --scale paper --data-dir ~/data --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sgem.bench.images import LABELS, METHODS, load_scale
from sgem.bench.images_run import ImagesRun, run_images
from sgem.bench.images_tables import combine
from sgem.errors import SgemUserError


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", choices=["smoke", "offline", "paper"], default="smoke")
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--methods", nargs="+", default=None)
    p.add_argument("--decomposition", action="store_true", help="add the Table decomp rows")
    p.add_argument("--no-learnable-gate", action="store_true")
    p.add_argument("--data-dir", default=None, help="CIFAR-100 / SVHN directory (paper)")
    p.add_argument("--device", default=None, help="cpu, cuda or auto (default: the config's)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument(
        "--baseline-budget",
        type=int,
        default=None,
        help="candidate trainings per searching baseline (default: the config's), e.g. "
        "SGEM's count for a budget-matched Random-MoE",
    )
    p.add_argument("--tag", default=None, help="file name suffix (default: the scale)")
    p.add_argument("--resume", action="store_true", help="skip (seed, method) already saved")
    p.add_argument(
        "--combine",
        nargs="+",
        default=None,
        metavar="TAG",
        help="run nothing: merge the rows of images_main_<TAG>.json files (e.g. seeds run in "
        "parallel processes) into images_main_<--tag>.{json,md}",
    )
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument(
        "--save-models",
        default=None,
        metavar="DIR",
        help="also save each SGEM model as DIR/sgem-seedN (load with sgem.load)",
    )
    args = p.parse_args()
    try:
        cfg = load_scale(args.scale)
        if args.data_dir:
            cfg["task"]["directory"] = args.data_dir
        if args.device:
            cfg["device"] = args.device
        if args.threads:
            cfg["torch_threads"] = args.threads
        if args.baseline_budget is not None:
            cfg["baseline_budget"] = args.baseline_budget
        tag = args.tag or args.scale
        if args.combine:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            print(combine(args.combine, Path(args.out), tag).read_text())
            return
        methods = list(args.methods or METHODS)
        if args.decomposition:
            methods += [m for m in LABELS if m.startswith("decomp_") and m not in methods]
        run = ImagesRun(
            scale=args.scale,
            seeds=args.seeds if args.seeds is not None else cfg["seeds"],
            methods=methods,
            learnable_gate=not args.no_learnable_gate,
            tag=tag,
            resume=args.resume,
            out=Path(args.out),
            save_models=Path(args.save_models) if args.save_models else None,
        )
        print(run_images(cfg, run).read_text())
    except SgemUserError as exc:
        p.error(str(exc))


if __name__ == "__main__":
    main()
