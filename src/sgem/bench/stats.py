"""The forecasting tables' statistics: relative scores, summaries and paired comparisons.

Seeds change the task (windows, split, clustering), so methods are compared per seed on
the same task: per-seed differences with a bootstrap interval over seeds, and a window-level
paired bootstrap stratified by seed (windows resampled within each seed).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

from ..forecast import relative_geomean

#: Scores summarised per method and compared pairwise (rel_*: relative to the reference).
SCORES = ("test_nll", "test_crps", "test_mase", "test_wql", "rel_mase", "rel_wql")


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


def paired_se(a: Any, b: Any) -> float:
    """Standard error of the mean paired difference `a - b` (per window)."""
    d = np.asarray(a) - np.asarray(b)
    return float(d.std(ddof=1) / np.sqrt(len(d)))


def paired(rows: list[dict], target: str = "sgem") -> dict[str, dict]:
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


def summarise(rows: list[dict]) -> dict[str, dict]:
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
                entry[key] = {d: geomean([r[key].get(d) for r in mine]) for d in mine[0][key]}
        entry["n_trained"] = statistics.fmean(r.get("n_trained") or 0 for r in mine)
        out[method] = entry
    return out


def geomean(values: list) -> float | None:
    """Geometric mean of the positive values (None when there is none)."""
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in vals)) if vals else None


def sign_agreement(regions: list[dict]) -> str:
    """In how many regions validation and test prefer the same side, as "k/n"."""
    agree = sum(np.sign(r["val_margin"]) == np.sign(r["test_margin"]) for r in regions)
    return f"{agree}/{len(regions)}"


def seed_margins(rows: list[dict], target: str, other: str) -> list[dict]:
    """Validation vs test margin of `target` minus `other`, per seed both have (validation:
    the final model's, `validation_nll`), with the test margin's paired standard error."""
    by = {(r["seed"], r["method"]): r for r in rows}
    out = []
    for seed in sorted({r["seed"] for r in rows}):
        a, b = by.get((seed, target)), by.get((seed, other))
        if a is None or b is None:
            continue
        va, vb = validation_nll(a), validation_nll(b)
        out.append(
            {
                "seed": seed,
                "val_margin": None if va is None or vb is None else va - vb,
                "test_margin": a["test_nll"] - b["test_nll"],
                "test_se": paired_se(a["test_nll_per_window"], b["test_nll_per_window"]),
            }
        )
    return out


def validation_nll(row: dict[str, Any]) -> float | None:
    """The final model's validation NLL: each expert's tracked best, weighted by its
    validation windows (None when a row has no validation-chosen lengths)."""
    lengths = [f for f in row.get("final_length") or [] if f]
    n = sum(f["n_val"] for f in lengths)
    return sum(f["best_val_nll"] * f["n_val"] for f in lengths) / n if n else None


def rank_agreement(a: list[float], b: list[float]) -> dict[str, Any]:
    """Spearman's rho and Kendall's tau of two scorings of the same items (None under 3)."""
    from scipy.stats import kendalltau, spearmanr

    if len(a) < 3:
        return {"n": len(a), "spearman": None, "kendall": None}
    return {
        "n": len(a),
        "spearman": round(float(spearmanr(a, b).statistic), 3),
        "kendall": round(float(kendalltau(a, b).statistic), 3),
    }
