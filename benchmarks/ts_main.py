"""Table ts_main: SGEM against the forecasting baselines on a multi-domain mixture.

Per seed, one task (windows, split and clustering depend on the seed), then SGEM (search +
final MoE) and every baseline under the same protocol (`sgem.baselines.BaselineSetup`:
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
on train + validation; `sgem.moe.final_length`), applied to SGEM and every baseline alike.

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
import importlib.util
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from scaling import parse_value  # the benchmarks' one `key=value` override parser

from sgem.analysis import RunObservations, format_op_table, op_effects
from sgem.baselines import BaselineSetup, get_baseline
from sgem.baselines.base import forecast_fields, remember_best_single
from sgem.data.timeseries import load_domains, make_timeseries_task
from sgem.experiment import finish_sgem
from sgem.forecast import relative_geomean, seasonality
from sgem.metrics import partition_match
from sgem.moe.final_length import FINAL_LENGTHS
from sgem.pipeline import build_space, load_config
from sgem.search.config import SearchConfig
from sgem.search.sgem import SGEM
from sgem.space.arch import Arch
from sgem.train import resolve_device

BASELINES = [
    "naive",
    "seasonal_naive",
    "dlinear",
    "global_single",
    "random_moe",
    "geometry",
    "bestarch_x_k",
    "nas_moe",
    "mole",
    "oracle",
]
#: external references from a well-kept library (the `bench` extra); run when installed
EXTERNAL = ["auto_ets", "auto_theta"]
if importlib.util.find_spec("statsforecast") is not None:
    BASELINES += EXTERNAL
BLOCKS = [
    ("statistical / linear, no routing", ["naive", "seasonal_naive", "dlinear"]),
    ("statsforecast references, one local model per window", EXTERNAL),
    (
        "cluster gate, no domain labels",
        ["global_single", "random_moe", "geometry", "bestarch_x_k", "nas_moe", "sgem"],
    ),
    ("own learnable routing", ["mole"]),
    ("oracle, uses domain labels", ["oracle"]),
]
#: label-free baselines whose search spends `budget` candidate trainings: with --matched
#: each also runs at SGEM's own number of trainings on the seed, as `<method>@sgem`
SEARCHING = ["global_single", "random_moe", "geometry", "bestarch_x_k", "nas_moe"]
MATCHED = "@sgem"
LABELS = {
    "naive": "Naive",
    "seasonal_naive": "Seasonal naive",
    "dlinear": "DLinear (Student-t)",
    "global_single": "Global single (K=1)",
    "random_moe": "Random-MoE",
    "geometry": "Geometry routing",
    "bestarch_x_k": "BestArch x K",
    "nas_moe": "NAS-MoE",
    "sgem": "SGEM",
    "mole": "MoLE",
    "oracle": "Per-domain specialists",
    "auto_ets": "AutoETS (statsforecast)",
    "auto_theta": "AutoTheta (statsforecast)",
}


def label(method: str) -> str:
    """A method's name in the tables (`<method>@sgem`: that baseline at SGEM's budget)."""
    if method.endswith(MATCHED):
        base = method.removesuffix(MATCHED)
        return f"{LABELS.get(base, base)} @ SGEM's trainings"
    return LABELS.get(method, method)


#: The smoke scale: the `ts-offline` preset with this file's overrides, the same run config
#: as `sgem run ts-offline --config configs/ts-smoke.yaml` (one source for both).
SMOKE_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "ts-smoke.yaml"
DEFAULT_BUDGET = {"smoke": 4, "offline": 16, "paper": 60}
#: The reference of the relative scores (per domain divided by its score).
REFERENCE = "seasonal_naive"
#: Scores summarised per method and compared pairwise (rel_*: relative to REFERENCE).
SCORES = ("test_nll", "test_crps", "test_mase", "test_wql", "rel_mase", "rel_wql")


def scale_config(args: argparse.Namespace) -> dict:
    """The effective run config (pipeline format) of a scale plus command-line overrides."""
    if args.scale == "paper":
        cfg = load_config("ts-paper")
        if args.data_dir:
            cfg["task"]["directory"] = args.data_dir
    else:
        cfg = load_config("ts-offline", SMOKE_CONFIG if args.scale == "smoke" else None)
    if args.n_windows:
        cfg["task"]["n_windows"] = args.n_windows
    if args.n_clusters:
        cfg["task"]["n_clusters"] = args.n_clusters
    if args.context:  # short series (quarterly, yearly) need a shorter window
        cfg["task"]["context"] = args.context
    if args.horizon:
        cfg["task"]["horizon"] = args.horizon
    if args.iterations:
        cfg["search"]["n_iterations"] = args.iterations
    if args.n_init:
        cfg["search"]["n_init"] = args.n_init
    if args.steps:
        cfg["search"]["train"]["steps"] = args.steps
    if args.final_steps:
        cfg["search"]["final_steps"] = args.final_steps
        cfg["final_epochs"] = None
    if args.device:
        cfg["device"] = args.device
    if args.files:
        # absolute paths: load_domains reads them as they are (domain name = the file stem)
        cfg["task"]["source"] = "files"
        cfg["task"]["directory"] = None
        cfg["task"]["domains"] = [os.path.abspath(f) for f in args.files]
    cfg["budget"] = args.budget or DEFAULT_BUDGET[args.scale]
    if args.final_length:  # else the preset's (validation in the forecasting presets)
        cfg["final_length"] = args.final_length
    cfg["final_length"] = list(dict.fromkeys(_as_list(cfg["final_length"])))
    for key, value in (item.split("=", 1) for item in args.search_set or []):
        cfg["search"][key] = parse_value(value)
    return cfg


def _as_list(value) -> list:
    return list(value) if isinstance(value, list | tuple) else [value]


def load_task_domains(task_cfg: dict) -> dict:
    """{domain name: TSFData} of the task section (read once for every seed)."""
    source, names = task_cfg["source"], task_cfg.get("domains")
    if source == "offline":
        return load_domains(task_cfg.get("directory"), names=names, offline=True)
    if source == "files":
        return load_domains(names=names)
    directory = task_cfg.get("directory") or os.environ.get("SGEM_MONASH_DIR")
    return load_domains(directory, names=names)


def build_task(task_cfg: dict, domains: dict, seed: int):
    """The task of one seed (what `sgem.pipeline.build_task_from_config` builds from the same
    section), with `meta["seasonality"]`: GluonTS's MASE period of each domain's frequency."""
    params = {
        k: v for k, v in task_cfg.items() if k not in ("name", "source", "directory", "domains")
    }
    params["split"] = tuple(params.get("split", (0.7, 0.15, 0.15)))
    task = make_timeseries_task(domains, seed=seed, name="timeseries", **params)
    task.meta["seasonality"] = [seasonality(d.frequency) for d in domains.values()]
    task.meta["frequencies"] = [d.frequency for d in domains.values()]
    return task


def baseline_setup(
    cfg: dict, search_cfg: SearchConfig, space, length: str, device: str, cache=None
) -> BaselineSetup:
    """The baselines' protocol of a run config: SGEM's candidate training and final steps,
    the config's budget, final length `length`, CRPS samples and device."""
    return BaselineSetup(
        space=space,
        train=search_cfg.train,
        n_experts=search_cfg.n_experts,
        budget=cfg["budget"],
        final_steps=search_cfg.final_steps,
        final_epochs=cfg["final_epochs"],
        final_length=length,
        crps_samples=cfg["crps_samples"],
        device=device,
        cache={} if cache is None else cache,
    )


def saved_champions(path: Path, budget: int) -> dict[int, tuple]:
    """Per seed, the best-single-cell search's result recorded in a saved table at the same
    budget (its Global single rows, K = 1, name the cell and the trainings spent): loaded
    into a seed's baseline cache, BestArch x K and Geometry routing reuse that search instead
    of repeating it. The search is deterministic in (task, seed, budget), so the rows are
    the same as a fresh search's; only the seconds differ."""
    data = json.loads(Path(path).read_text())
    saved_budget = data["meta"]["config"].get("budget")
    if saved_budget != budget:
        raise SystemExit(
            f"--champions-from {path}: its searches spent {saved_budget} trainings, this run "
            f"{budget}; pass a table run at --budget {budget}"
        )
    found = {
        int(r["seed"]): (Arch.from_key(r["architectures"][0]), int(r["n_trained"]))
        for r in data["rows"]
        if r["method"] == "global_single"
    }
    if not found:
        raise SystemExit(f"--champions-from {path}: no global_single rows to take the cell from")
    return found


def run_sgem(
    task, cfg: dict, seed: int, device: str, lengths: list[str] | None = None
) -> tuple[dict[str, dict], RunObservations]:
    """One SGEM search, then the final MoE for each final length (the search does not
    depend on it): {length: row} and the search's observations."""
    start = time.perf_counter()
    space = build_space(cfg["space"])
    search_cfg = SearchConfig.from_dict(cfg["search"])
    search = SGEM(space, search_cfg, seed=seed, progress=False, device=device)
    found = search.fit(task)
    search_end = time.perf_counter()
    rows = {}
    for length in lengths or [cfg["final_length"]]:
        t0 = time.perf_counter()
        rows[length] = sgem_row(task, cfg, seed, search.trainer_, found, length)
        rows[length]["seconds"] = round(search_end - start + time.perf_counter() - t0, 3)
    store = found.store
    obs = RunObservations(
        list(store.archs),
        store.masks.astype(bool),
        store.losses,
        np.asarray(task.oracle_partition),
        list(task.meta["domain_names"]),
    )
    return rows, obs


def sgem_row(task, cfg: dict, seed: int, trainer, found, length: str) -> dict:
    """SGEM's final stage on a finished search (`finish_sgem`: the champion cell and the
    second look where the config asks for them), as a table row."""
    search_cfg = SearchConfig.from_dict(cfg["search"])
    # what the search returned, before the final stage's choices (a replay starts here)
    searched = {"architectures": [a.key for a in found.architectures], "n_trained": found.n_trained}
    final = finish_sgem(  # with length "validation": the finalists' second look first
        task,
        trainer,
        found,
        search_cfg,
        seed,
        final_epochs=cfg["final_epochs"],
        final_length=length,
        crps_samples=cfg["crps_samples"],
    )
    found = final.search
    moe = final.report.to_json()
    names = task.meta["domain_names"]
    row = {
        "method": "sgem",
        "test_nll": moe["test_nll"],
        "test_crps": moe["test_crps"],
        "test_crps_closed_form": moe["test_crps_closed_form"],
        "per_domain_test_nll": {names[int(d)]: v for d, v in moe["per_domain_test_nll"].items()},
        "assignment": found.assignment.tolist(),
        "oracle_match": partition_match(found.assignment, task.oracle_partition),
        "architectures": [a.key for a in found.architectures],
        "n_trained": found.n_trained,
        "uses_domain_labels": False,
        "search_seconds": round(found.seconds, 3),
        "steps": moe["steps"],
        "search_architectures": searched["architectures"],
        "search_n_trained": searched["n_trained"],
    }
    check = found.selection.get("final_check")
    if check is not None:
        row["final_check"] = {
            "changed_partition": check["changed_partition"],
            "changed_architectures": check["changed_architectures"],
            "tracking_runs": check["tracking_runs"],
            "seconds": check["seconds"],
            "validation_nll": [c["validation_nll"] for c in check["contenders"]],
            # each expert's tracked cells (validation NLL at the chosen length) and its pick
            "regions": next(c["regions"] for c in check["contenders"] if c["chosen"]),
        }
    if moe.get("global_networks_test"):  # each cell's global network alone, a reference
        row["global_networks_test"] = moe["global_networks_test"]
    if "final_length" in moe:
        row["final_length"] = [
            None if f is None else {k: v for k, v in f.items() if k != "curve"}
            for f in moe["final_length"]
        ]
    return row | forecast_fields(task, moe.get("forecast"))


def add_relative(rows: list[dict], references: dict) -> None:
    """Set `rel_mase` / `rel_wql` of every row: per domain its score divided by the reference
    method's (same seed), geometric mean across domains (None without a reference)."""
    for r in rows:
        ref = references.get(r["seed"]) or references.get(str(r["seed"]))
        for metric in ("mase", "wql"):
            key = f"per_domain_test_{metric}"
            if ref is None or key not in r or key not in ref:
                r[f"rel_{metric}"] = None
                continue
            r[f"rel_{metric}"] = relative_geomean(r[key], ref[key])
            r[f"per_domain_rel_{metric}"] = {
                d: (v / ref[key][d] if v and ref[key].get(d) else None) for d, v in r[key].items()
            }


def bootstrap_interval(
    values: list[float], n_boot: int = 10_000, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile 95% interval of the mean of `values` (resampled with replacement)."""
    if not values:
        return None
    v = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = v[rng.integers(len(v), size=(n_boot, len(v)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def window_bootstrap(
    diffs: list[np.ndarray], n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, 2.5%, 97.5%) of the mean over seeds of the mean per-window difference,
    windows resampled within each seed (a paired, seed-stratified bootstrap)."""
    rng = np.random.default_rng(seed)
    point = float(np.mean([d.mean() for d in diffs]))
    stats = np.zeros(n_boot)
    for d in diffs:
        stats += d[rng.integers(len(d), size=(n_boot, len(d)))].mean(axis=1)
    stats /= len(diffs)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return point, float(lo), float(hi)


def paired(rows: list[dict], target: str = "sgem") -> dict:
    """`target` minus each other method, on the seeds both have: per-seed differences of
    every score in SCORES, their mean with a bootstrap 95% interval over seeds, and for NLL
    and the closed-form CRPS a window-level paired bootstrap (negative: `target` better)."""
    mine = {r["seed"]: r for r in rows if r["method"] == target}
    out: dict[str, dict] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        if method == target:
            continue
        theirs = {r["seed"]: r for r in rows if r["method"] == method and r["seed"] in mine}
        if not theirs:
            continue
        seeds = sorted(theirs)
        entry: dict = {"seeds": seeds}
        for key in SCORES:
            per_seed = {
                s: mine[s][key] - theirs[s][key]
                for s in seeds
                if mine[s].get(key) is not None and theirs[s].get(key) is not None
            }
            if not per_seed:
                continue
            vals = list(per_seed.values())
            ci = bootstrap_interval(vals)
            entry[key] = {
                "per_seed": {str(s): v for s, v in per_seed.items()},
                "mean": statistics.fmean(vals),
                "ci95_seeds": list(ci) if ci else None,
            }
        for key, name in (("test_nll_per_window", "nll"), ("test_crps_cf_per_window", "crps_cf")):
            diffs = [
                np.asarray(mine[s][key]) - np.asarray(theirs[s][key])
                for s in seeds
                if key in mine[s] and key in theirs[s]
            ]
            if diffs and all(len(d) for d in diffs):
                mean, lo, hi = window_bootstrap(diffs)
                entry[f"window_{name}"] = {"mean": mean, "ci95": [lo, hi]}
        out[method] = entry
    return out


def summarise(rows: list[dict]) -> dict:
    """Per method: mean and std over seeds of every score."""
    out: dict[str, dict] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        entry: dict = {"seeds": [r["seed"] for r in mine]}
        for key in (*SCORES, "test_crps_closed_form", "oracle_match", "seconds"):
            values = [r[key] for r in mine if r.get(key) is not None]
            if values:
                entry[key] = {
                    "mean": statistics.fmean(values),
                    "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                }
        domains = mine[0].get("per_domain_test_nll") or {}
        entry["per_domain_test_nll"] = {
            d: statistics.fmean(r["per_domain_test_nll"][d] for r in mine) for d in domains
        }
        for metric in ("rel_mase", "rel_wql"):
            key = f"per_domain_{metric}"
            if all(r.get(key) for r in mine):
                entry[key] = {d: _geomean([r[key].get(d) for r in mine]) for d in mine[0][key]}
        entry["n_trained"] = statistics.fmean(r.get("n_trained") or 0 for r in mine)
        out[method] = entry
    return out


def _geomean(values: list) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in vals)) if vals else None


def markdown(summary: dict, meta: dict, comparisons: dict | None = None) -> str:
    def fmt(entry: dict, key: str, digits: int = 3) -> str:
        v = entry.get(key)
        return "n/a" if v is None else f"{v['mean']:.{digits}f} ± {v['std']:.{digits}f}"

    n_seeds = len(meta["seeds"])
    cfg = meta["config"]
    search, train = cfg["search"], cfg["search"]["train"]
    lines = [
        f"# Table ts_main ({meta['tag']}: {meta['scale']} scale, {n_seeds} seed(s): "
        f"{meta['seeds']})",
        "",
        f"Task (last seed): {meta['task_summary']}",
        "",
        f"Scale: {cfg['task']['n_windows']} windows (L = {cfg['task']['context']}, H = "
        f"{cfg['task']['horizon']}), M = {cfg['task']['n_clusters']} requested, K = "
        f"{search['n_experts']}; candidate training {train['steps']} Adam steps of "
        f"{train['batch_size']} windows (lr {train['lr']}); SGEM {search['n_iterations']} EM "
        f"iterations, {search['n_init']} initial observations; baselines "
        f"{cfg['budget']} candidate trainings each; final retraining "
        + (
            f"{cfg['final_epochs']} epochs"
            if cfg.get("final_epochs")
            else f"{search['final_steps']} steps"
        )
        + " per expert on train + validation"
        + (
            " (length chosen on validation per network: tracked on the training samples up "
            "to 4x that, the best step count x (n_train + n_val) / n_train)"
            if cfg.get("final_length") in ("validation", "validation-warm")
            else ""
        )
        + (
            ", or rather: each network early-stopped on validation and kept as it is (trained "
            "on the training samples only, no refit)"
            if str(cfg.get("final_length")).endswith("-norefit")
            else ""
        )
        + (
            "; every routed expert fine-tunes a global network of its cell (warm start, "
            "`sgem.moe.warm_start`; K = 1 unchanged)"
            if str(cfg.get("final_length")).startswith("validation-warm")
            else ""
        )
        + f". Device {meta['device']}, "
        f"{meta['torch_threads']} torch thread(s); benchmark wall clock "
        f"{meta['wall_seconds'] / 60:.1f} min"
        + (f"; {meta['note']}" if meta.get("note") else "")
        + ".",
        "",
        "| method | test NLL | test CRPS | MASE (rel.) | wQL (rel.) | domain recovery | "
        "trainings | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    listed = {m for _, ms in BLOCKS for m in ms}
    matched = [m for m in summary if m.endswith(MATCHED)]
    blocks = [
        *BLOCKS,
        ("cluster gate, no domain labels, at SGEM's number of trainings per seed", matched),
        ("other", [m for m in summary if m not in listed and m not in matched]),
    ]
    for title, methods in blocks:
        present = [m for m in methods if m in summary]
        if not present:
            continue
        lines.append(f"| *{title}* | | | | | | | |")
        for m in present:
            e = summary[m]
            lines.append(
                f"| {label(m)} | {fmt(e, 'test_nll')} | {fmt(e, 'test_crps')} | "
                f"{fmt(e, 'rel_mase')} | {fmt(e, 'rel_wql')} | "
                f"{fmt(e, 'oracle_match', 2)} | {e['n_trained']:.0f} | "
                f"{e['seconds']['mean']:.0f} |"
            )
    seasons = meta.get("mase_seasons")
    lines += [
        "",
        "NLL: mean Student-t negative log-likelihood per forecast step; CRPS: sample-based "
        f"({meta['config']['crps_samples']} samples per step); both in the per-window scaled "
        "units, lower is better. MASE (median forecast, seasonal error of each window's "
        "context) and wQL (mean weighted quantile loss over the levels 0.1..0.9, exact "
        "Student-t quantiles, normalised by sum |y|) in original units, per domain divided by "
        f"{LABELS[REFERENCE]}'s of the same seed, geometric mean across domains (1 = as good "
        "as it; the Chronos / fev aggregate), mean ± std over seeds"
        + (f"; MASE seasonal periods (GluonTS defaults) {seasons}" if seasons else "")
        + ". Domain recovery: Hungarian agreement of the cluster routing "
        "with the majority-domain partition. Trainings: candidate trainings spent on search.",
    ]
    if summary:
        domains = next(iter(summary.values()))["per_domain_test_nll"]
        if domains:
            lines += ["", "Per-domain test NLL (mean over seeds):", ""]
            lines.append("| method | " + " | ".join(domains) + " |")
            lines.append("|---|" + "---|" * len(domains))
            for m, e in summary.items():
                cells = " | ".join(
                    f"{e['per_domain_test_nll'].get(d, float('nan')):.3f}" for d in domains
                )
                lines.append(f"| {label(m)} | {cells} |")
    if comparisons:
        lines += [
            "",
            "SGEM minus each method (negative: SGEM better): mean over seeds with a bootstrap "
            "95% interval over seeds [per-seed differences]; window: mean over seeds of the "
            "mean per-window difference with a paired bootstrap 95% interval (windows "
            "resampled within each seed; CRPS closed form).",
            "",
            "| vs | NLL | CRPS | MASE (rel.) | wQL (rel.) | window NLL | window CRPS |",
            "|---|---|---|---|---|---|---|",
        ]

        def cell(c: dict | None) -> str:
            if not c:
                return "n/a"
            ci = c.get("ci95_seeds")
            seeds = ", ".join(f"{v:+.3f}" for v in c["per_seed"].values())
            return f"{c['mean']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] ({seeds})"

        def wcell(c: dict | None) -> str:
            if not c:
                return "n/a"
            return f"{c['mean']:+.4f} [{c['ci95'][0]:+.4f}, {c['ci95'][1]:+.4f}]"

        for m, c in comparisons.items():
            lines.append(
                f"| {label(m)} | {cell(c.get('test_nll'))} | {cell(c.get('test_crps'))} | "
                f"{cell(c.get('rel_mase'))} | {cell(c.get('rel_wql'))} | "
                f"{wcell(c.get('window_nll'))} | {wcell(c.get('window_crps_cf'))} |"
            )
    return "\n".join(lines) + "\n"


def write_table(rows: list[dict], references: dict, meta: dict, out_dir: Path) -> dict:
    """Relative scores, summary and paired comparisons of `rows`, written with `meta` as
    ts_main_<meta tag>.{json,md}; returns the summary."""
    add_relative(rows, references)
    summary = summarise(rows)
    comparisons = paired(rows) if any(r["method"] == "sgem" for r in rows) else {}
    data = {
        "meta": meta,
        "summary": summary,
        "comparisons": comparisons,
        "references": {str(k): v for k, v in references.items()},
        "rows": rows,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"ts_main_{meta['tag']}"
    stem.with_suffix(".json").write_text(json.dumps(data, indent=1))
    stem.with_suffix(".md").write_text(markdown(summary, meta, comparisons))
    return summary


def merge_outputs(paths: list[Path], out_dir: Path, tag: str) -> None:
    """One table from several outputs of the same configuration (processes run side by
    side): rows and references pooled, relative scores, summary and paired comparisons
    recomputed; a (seed, method) present twice is an error."""
    parts = [json.loads(p.read_text()) for p in paths]
    configs = {json.dumps(d["meta"]["config"], sort_keys=True) for d in parts}
    if len(configs) != 1:
        raise SystemExit(f"cannot merge outputs of different configurations: {paths}")
    rows = [r for d in parts for r in d["rows"]]
    keys = [(r["seed"], r["method"]) for r in rows]
    if len(set(keys)) != len(keys):
        raise SystemExit(f"a (seed, method) appears twice in {paths}")
    references = {int(k): v for d in parts for k, v in d.get("references", {}).items()}
    meta = dict(parts[0]["meta"])
    last = max(parts, key=lambda d: max((r["seed"] for r in d["rows"]), default=-1))
    meta |= {
        "task_summary": last["meta"]["task_summary"],  # the table says "Task (last seed)"
        "tag": tag,
        "seeds": sorted({r["seed"] for r in rows}),
        "methods": list(dict.fromkeys(r["method"] for r in rows)),
        "wall_seconds": round(sum(d["meta"]["wall_seconds"] for d in parts), 1),
        "merged_from": [p.name for p in paths],
        "note": "; ".join(
            [
                *dict.fromkeys(d["meta"]["note"] for d in parts if d["meta"].get("note")),
                f"merged from {len(paths)} processes ({', '.join(p.name for p in paths)})",
            ]
        ),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    write_table(rows, references, meta, out_dir)
    print((out_dir / f"ts_main_{tag}.md").read_text())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", choices=["smoke", "offline", "paper"], default="smoke")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--methods", nargs="+", default=["sgem", *BASELINES])
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
    p.add_argument("--note", default=None, help="a note for the table (e.g. machine load)")
    p.add_argument("--device", default=None, help="cpu, cuda or auto (default: the preset's)")
    p.add_argument("--n-windows", type=int, default=None)
    p.add_argument("--n-clusters", type=int, default=None)
    p.add_argument("--context", type=int, default=None, help="context length L (default 96)")
    p.add_argument("--horizon", type=int, default=None, help="forecast horizon H (default 24)")
    p.add_argument("--iterations", type=int, default=None, help="SGEM EM iterations")
    p.add_argument("--n-init", type=int, default=None, help="SGEM initial observations")
    p.add_argument("--steps", type=int, default=None, help="candidate training steps")
    p.add_argument("--final-steps", type=int, default=None, help="final retraining steps")
    p.add_argument("--budget", type=int, default=None, help="baseline candidate trainings")
    p.add_argument(
        "--matched",
        action="store_true",
        help="also run each searching label-free baseline in --methods at SGEM's own number "
        "of candidate trainings on the seed (rows <method>@sgem): both budgets in one table",
    )
    p.add_argument(
        "--search-set",
        nargs="+",
        default=None,
        metavar="KEY=VALUE",
        help="SGEM search settings over the preset's (e.g. refit_budget=0 final_candidates=1)",
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
    if args.merge:
        merge_outputs([Path(f) for f in args.merge], Path(args.out), args.tag or "merged")
        return
    if args.render:
        data = json.loads(Path(args.render).read_text())
        md = Path(args.render).with_suffix(".md")
        md.write_text(markdown(data["summary"], data["meta"], data.get("comparisons")))
        if "op_effects" in data:
            tag = data["meta"]["tag"]
            md.with_name(f"ts_ops_{tag}.md").write_text(
                f"# Table ts_ops ({tag}): operation effects from the SGEM runs' observations\n\n"
                + format_op_table(data["op_effects"])
                + "\n"
            )
        print(md.read_text())
        return

    if args.matched and "sgem" not in args.methods:
        p.error("--matched runs the baselines at SGEM's number of trainings: add sgem to --methods")
    torch.set_num_threads(args.threads)
    cfg = scale_config(args)
    device = str(resolve_device(cfg.get("device", "cpu")))
    tag = args.tag or args.scale
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    lengths = list(cfg["final_length"])
    tags = {L: tag if len(lengths) == 1 else f"{tag}-{L}" for L in lengths}
    cfgs = {L: {**cfg, "final_length": L} for L in lengths}
    rows: dict[str, list[dict]] = {L: [] for L in lengths}
    references: dict = {}
    for L in lengths:
        path = out_dir / f"ts_main_{tags[L]}.json"
        if args.resume and path.exists():
            saved = json.loads(path.read_text())
            rows[L] = saved["rows"]
            references |= {int(k): v for k, v in saved.get("references", {}).items()}
    done = {L: {(r["seed"], r["method"]) for r in rows[L]} for L in lengths}
    champions = saved_champions(args.champions_from, cfg["budget"]) if args.champions_from else {}
    domains = load_task_domains(cfg["task"])
    search_cfg = SearchConfig.from_dict(cfg["search"])
    space = build_space(cfg["space"])
    observations: list[RunObservations] = []
    task_summary = ""
    t_start = time.perf_counter()

    def save(length: str) -> dict:
        meta = {
            "scale": args.scale,
            "tag": tags[length],
            "seeds": args.seeds,
            "methods": args.methods,
            "config": cfgs[length],
            "device": device,
            "torch_threads": args.threads,
            "task_summary": task_summary,
            "domains": list(domains),
            "frequencies": [d.frequency for d in domains.values()],
            "mase_seasons": [seasonality(d.frequency) for d in domains.values()],
            "final_length": length,
            "run_with_lengths": lengths,
            "reference": REFERENCE,
            "note": args.note,
            "wall_seconds": round(time.perf_counter() - t_start, 1),
            "machine": {
                "platform": platform.platform(),
                "python": platform.python_version(),
                "torch": torch.__version__,
            },
        }
        return write_table(rows[length], references, meta, out_dir)

    def report(method: str, length: str, row: dict, t0: float) -> None:
        print(
            f"  {method:15s} [{length}] NLL {row['test_nll']:.4f}  CRPS {row['test_crps']:.4f}  "
            f"MASE rel {row.get('rel_mase')}  wQL rel {row.get('rel_wql')}  "
            f"recovery {row.get('oracle_match')}  steps {row.get('steps')}  "
            f"{time.perf_counter() - t0:.0f} s",
            flush=True,
        )

    for seed in args.seeds:
        task = build_task(cfg["task"], domains, seed)
        task_summary = (
            f"{task.summary()}; domains {task.meta['domain_names']}; mean purity "
            f"{task.meta['mean_purity']:.3f}; K = {search_cfg.n_experts}"
        )
        print(f"seed {seed}: {task_summary}", flush=True)
        cache: dict = {}  # searches that do not depend on the final length are shared
        if seed in champions:
            remember_best_single(cache, task, seed, cfg["budget"], champions[seed])
        setups = {L: baseline_setup(cfg, search_cfg, space, L, device, cache) for L in lengths}
        if seed not in references:  # the relative scores' reference (cheap, no training)
            ref = get_baseline(REFERENCE).fit_evaluate(task, setups[lengths[0]], seed)
            references[seed] = {
                k: ref.get(k) for k in ("per_domain_test_mase", "per_domain_test_wql")
            }
        for method in args.methods:
            todo = [L for L in lengths if (seed, method) not in done[L]]
            if not todo:
                continue
            t0 = time.perf_counter()
            if method == "sgem":
                found_rows, obs = run_sgem(task, cfgs[todo[0]], seed, device, todo)
                observations.append(obs)
                for L in todo:
                    found_rows[L]["seed"] = seed
                    rows[L].append(found_rows[L])
                    save(L)
                    report(method, L, found_rows[L], t0)
                continue
            for L in todo:
                t0 = time.perf_counter()
                row = get_baseline(method).fit_evaluate(task, setups[L], seed)
                row["seed"] = seed
                rows[L].append(row)
                save(L)
                report(method, L, row, t0)
        for L in lengths if args.matched else []:
            mine = next(r for r in rows[L] if r["seed"] == seed and r["method"] == "sgem")
            budget = int(mine["n_trained"])
            matched = baseline_setup({**cfg, "budget": budget}, search_cfg, space, L, device, cache)
            for method in [m for m in args.methods if m in SEARCHING]:
                if (seed, method + MATCHED) in done[L]:
                    continue
                t0 = time.perf_counter()
                row = get_baseline(method).fit_evaluate(task, matched, seed)
                row.update(method=method + MATCHED, seed=seed, budget=budget)
                rows[L].append(row)
                save(L)
                report(method + MATCHED, L, row, t0)
    for L in lengths:
        summary = save(L)
        json_path = out_dir / f"ts_main_{tags[L]}.json"
        md_path = json_path.with_suffix(".md")
        if observations:
            table = op_effects(observations, ops=list(cfg["space"]["ops"]), n_bootstrap=1000)
            (out_dir / f"ts_ops_{tags[L]}.md").write_text(
                f"# Table ts_ops ({tags[L]}): operation effects from the SGEM runs' "
                "observations\n\n" + format_op_table(table) + "\n"
            )
            data = json.loads(json_path.read_text())
            data["op_effects"] = table
            json_path.write_text(json.dumps(data, indent=1))
        print(md_path.read_text())
        for m, e in summary.items():
            print(m, e.get("test_nll"))


if __name__ == "__main__":
    main()
