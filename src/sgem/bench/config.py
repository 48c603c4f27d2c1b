"""The forecasting benchmark's scales and their command-line overrides, as one run config.

A scale is a preset (`ts-offline`, `ts-paper`) or the smoke file over `ts-offline`
(`configs/ts-smoke.yaml`, the same config `sgem run ts-offline --config` reads), shrunk or
widened by flags; the effective config is what every script records in its JSON, so a row
can be reproduced from its own file.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..final.protocol import FINAL_LENGTHS
from ..run.runconfig import load_config

#: The repository's run configs of the benchmarks (the scripts run from a checkout).
CONFIGS = Path(__file__).resolve().parents[3] / "configs"
SMOKE_CONFIG = CONFIGS / "ts-smoke.yaml"
SCALES = ("smoke", "offline", "paper")
#: Candidate trainings of each searching baseline, per scale (--budget overrides).
DEFAULT_BUDGET = {"smoke": 4, "offline": 16, "paper": 60}


def parse_value(text: str) -> Any:
    """A `key=value` override's value: int, float, true/false, or the text itself."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def add_scale_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that choose and shrink a scale (read by `scale_config`)."""
    p.add_argument("--scale", choices=SCALES, default="smoke")
    p.add_argument("--data-dir", default=None, help="directory of the Monash .tsf files (paper)")
    p.add_argument(
        "--files",
        nargs="+",
        default=None,
        help="Monash-format .tsf files, one domain each (default: the scale's domains)",
    )
    p.add_argument(
        "--final-length",
        choices=FINAL_LENGTHS,
        nargs="+",
        default=None,
        help="final training length of SGEM and every baseline: fixed (the preset's steps) or "
        "chosen on validation, then retrained on train + validation (validation; the "
        "forecasting presets' default, where SGEM also makes its second look). Several: "
        "one search per method and seed, the final training once per length, one output "
        "file per length (<tag>-<length>)",
    )
    p.add_argument("--device", default=None, help="cpu, cuda or auto (default: the preset's)")
    for flag, what in (
        ("--n-windows", "windows of the task"),
        ("--n-clusters", "k-means clusters M"),
        ("--context", "context length L (default 96)"),
        ("--horizon", "forecast horizon H (default 24)"),
        ("--iterations", "SGEM EM iterations"),
        ("--n-init", "SGEM initial observations"),
        ("--steps", "candidate training steps"),
        ("--final-steps", "final retraining steps"),
        ("--budget", "baseline candidate trainings"),
    ):
        p.add_argument(flag, type=int, default=None, help=what)
    p.add_argument(
        "--search-set",
        nargs="+",
        default=None,
        metavar="KEY=VALUE",
        help="SGEM search settings over the preset's (e.g. refit_budget=0 final_candidates=1)",
    )


def scale_config(args: argparse.Namespace) -> dict[str, Any]:
    """The effective run config (pipeline format) of a scale plus command-line overrides."""
    if args.scale == "paper":
        cfg = load_config("ts-paper")
        if args.data_dir:
            cfg["task"]["directory"] = args.data_dir
    else:
        cfg = load_config("ts-offline", SMOKE_CONFIG if args.scale == "smoke" else None)
    task, search = cfg["task"], cfg["search"]
    for flag, section, key in (
        ("n_windows", task, "n_windows"),
        ("n_clusters", task, "n_clusters"),
        ("context", task, "context"),  # short series (quarterly, yearly): a shorter window
        ("horizon", task, "horizon"),
        ("iterations", search, "n_iterations"),
        ("n_init", search, "n_init"),
        ("steps", search["train"], "steps"),
    ):
        if getattr(args, flag):
            section[key] = getattr(args, flag)
    if args.final_steps:
        search["final_steps"] = args.final_steps
        cfg["final_epochs"] = None
    if args.device:
        cfg["device"] = args.device
    if args.files:
        # absolute paths: the task reads them as they are (domain name = the file stem)
        task["source"] = "files"
        task["directory"] = None
        task["domains"] = [os.path.abspath(f) for f in args.files]
    cfg["budget"] = args.budget or DEFAULT_BUDGET[args.scale]
    if args.final_length:  # else the preset's (validation in the forecasting presets)
        cfg["final_length"] = args.final_length
    lengths = cfg["final_length"]
    lengths = list(lengths) if isinstance(lengths, list | tuple) else [lengths]
    cfg["final_length"] = list(dict.fromkeys(lengths))
    for key, value in (item.split("=", 1) for item in args.search_set or []):
        search[key] = parse_value(value)
    return cfg


def scale_defaults(scale: str, *flags: str) -> dict[str, Any]:
    """`scale_config` of a scale with these command-line `flags` (e.g. "--context", "32"),
    for scripts that replay a table run at that scale."""
    p = argparse.ArgumentParser()
    add_scale_arguments(p)
    return scale_config(p.parse_args(["--scale", scale, *flags]))
