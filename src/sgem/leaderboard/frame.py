"""The leaderboard as a table: a DataFrame for `model.leaderboard()`, lines for the CLI and
the model card (both read result.json's / model.json's "leaderboard")."""

from __future__ import annotations

from typing import Any

from .forecast_cost import forecast_lines

#: (coverage_80: how much of the samples each model's central 80 % interval holds, as scored:
#: a network's raw intervals, which the saved model calibrates; a combination's calibrated)
METRICS = ("nll", "accuracy", "rmse", "crps", "coverage_80")


def leaderboard_frame(report: dict | None) -> Any:
    """One row per model: validation and holdout scores (`val_nll`, `holdout_nll`, ...),
    seconds and notes; best validation NLL first, the saved model marked. A table
    regression's RMSE and CRPS are in the target's units (its NLL stays per sample of the
    standardised target, as the models were scored)."""
    import pandas as pd

    std = (report or {}).get("target_std") or 1.0
    records = []
    for row in (report or {}).get("rows", []):
        rec: dict[str, Any] = {"model": row["model"], "kind": row["kind"]}
        for part, prefix in (("validation", "val"), ("holdout", "holdout")):
            scores = _in_units(row.get(part) or {}, std)
            rec |= {f"{prefix}_{m}": scores[m] for m in METRICS if scores.get(m) is not None}
        rec["seconds"] = row.get("seconds")
        rec["note"] = row.get("note", "")
        records.append(rec)
    frame = pd.DataFrame.from_records(records)
    if "val_nll" in frame:
        frame = frame.sort_values("val_nll", na_position="last", kind="stable")
    return frame.reset_index(drop=True)


def leaderboard_lines(report: dict | None) -> list[str]:
    """The leaderboard as text: what `sgem fit` prints and `sgem leaderboard RUN` shows."""
    if not report or "rows" not in report:
        why = (report or {}).get("skipped", "this run has no leaderboard")
        return [f"leaderboard: {why}"]
    frame = leaderboard_frame(report)
    cols = [c for c in frame.columns if c.startswith(("val_", "holdout_"))]
    width = max(len(m) for m in frame["model"])
    size = {c: max(13, len(c)) for c in cols}
    head = f"  {'model':{width}s}  " + "  ".join(f"{c:>{size[c]}s}" for c in cols)
    units = "; RMSE, CRPS in the target's units" if report.get("target_std") else ""
    lines = [f"leaderboard (validation decides, holdout reports{units}):", head]
    for _, r in frame.iterrows():
        cells = "  ".join(
            f"{r[c]:{size[c]}.4f}"
            if isinstance(r[c], float) and r[c] == r[c]
            else "-".rjust(size[c])
            for c in cols
        )
        note = f"  ({r['note']})" if r["note"] else ""
        lines.append(f"  {r['model']:{width}s}  {cells}{note}")
    shipped = report.get("shipped") or {}
    lines.append(f"  saved: {shipped.get('model', 'the searched MoE')}")
    if report.get("combination"):  # the user turned the combination off
        lines.append(f"  combination: {report['combination']}")
    overall = (report.get("evidence") or {}).get("overall")
    if overall:  # why: the paired validation verdict that set the burden of proof
        lines.append(
            f"  why: on validation the MoE gains {overall['nll_gain']:+.4f} NLL per sample over "
            f"the best global network (se {overall['se']:.4f}), so a cluster's default is "
            f"{'its expert' if overall['default'] == 'expert' else 'the global network'}"
        )
    if report.get("fallback_clusters"):
        lines.append(f"  clusters sent to the global network: {report['fallback_clusters']}")
    if shipped.get("better_on_validation"):
        lines.append(
            "  better on validation, yet not in the saved model: "
            + ", ".join(shipped["better_on_validation"])
            + " (a global network is a fallback, not a member; a combination is kept only "
            "where it clearly gains on rows its weights were not fit on)"
        )
    lines.extend(forecast_lines(report))
    lines.extend(stage_lines(report))
    ensemble = report.get("ensemble") or {}
    if ensemble:
        weights = ", ".join(f"{k} {v:.2f}" for k, v in ensemble["weights"].items())
        lines.append(
            f"  weighted ensemble of every member (reported): validation NLL "
            f"{ensemble['validation_nll']:.4f}, holdout {ensemble['holdout_nll']:.4f} ({weights})"
        )
    return lines


def stage_lines(report: dict) -> list[str]:
    """What each stage of the fit cost and gained: the validation NLL after it (the best
    global network stands for "no search") and the measure the saved model is chosen on
    beside it (accuracy; a regression's RMSE; a forecast's CRPS), each with its change, and
    the stage's seconds. Why both: a regression's combination is weighed by the squared
    error of its mean, and its NLL can rise while its RMSE falls."""
    std = report.get("target_std") or 1.0  # a regression's RMSE / CRPS in its units
    rows = {r["model"]: _in_units(r.get("validation") or {}, std) for r in report["rows"]}
    seconds = report.get("stage_seconds") or {}
    networks = [k for k, v in rows.items() if k.startswith("global network") and "nll" in v]
    best = min(networks, key=lambda k: rows[k]["nll"]) if networks else None
    steps = [
        ("one global network (no search)", best, None),
        ("search + final MoE", "sgem MoE (searched)", ("search", "final_stage")),
        ("selective routing", "saved model (selective routing)", None),
    ]
    if "selective-routing MoE (before the combination)" in rows:
        steps[2] = (steps[2][0], "selective-routing MoE (before the combination)", None)
    if "saved model (combination)" in rows:
        steps.append(("combination", "saved model (combination)", None))
    measure = _chosen_on(rows)
    shown_as = {"rmse": "RMSE", "crps": "CRPS"}.get(measure, measure)
    lines = [f"  stages (validation NLL and {shown_as} after each, their change, seconds):"]
    before: dict = {}
    for name, row, timed in steps:
        scores = rows.get(row or "", {})
        if not any(scores.get(k) is not None for k in ("nll", measure)):
            continue
        shown = [_after(scores.get(k), before.get(k)) for k in ("nll", measure)]
        spent = sum(seconds.get(k, 0.0) for k in timed or ())
        took = f"  {spent:.1f} s" if spent else ""
        lines.append(f"    {name:32s} {shown[0]}  {shown[1]}{took}".rstrip())
        before = {k: before.get(k) if scores.get(k) is None else scores[k] for k in before | scores}
    rounds = report.get("seed_rounds") or {}
    if rounds.get("rounds"):  # the time left: more seeds of every expert (holdout, not chosen on)
        lines.append(
            f"    {'more seeds of every expert':32s} holdout NLL {rounds['holdout_nll_before']:.4f}"
            f" -> {rounds['holdout_nll_after']:.4f} ({rounds['rounds']} rounds)  "
            f"{seconds.get('seed_rounds', rounds['seconds']):.1f} s"
        )
    if seconds.get("scikit_learn_references"):  # fitted before the search (a user's table)
        spent = seconds["scikit_learn_references"]
        lines.append(f"    {'scikit-learn references':32s} {spent:.1f} s")
    if seconds.get("classical_references"):  # fitted before the search (series)
        spent = seconds["classical_references"]
        lines.append(f"    {'AutoETS / AutoTheta / naive':32s} {spent:.1f} s")
    if seconds.get("leaderboard"):
        lines.append(f"    {'references and leaderboard':32s} {seconds['leaderboard']:.1f} s")
    return lines if len(lines) > 1 else []


def _in_units(scores: dict, std: float) -> dict:
    """A row's scores with a regression's RMSE and CRPS in the target's units."""
    return {k: v * std if k in ("rmse", "crps") and v is not None else v for k, v in scores.items()}


def _chosen_on(rows: dict[str, dict]) -> str:
    """The measure beside the NLL in `stage_lines`: accuracy (a classifier), CRPS (a
    forecaster's combination has no NLL, its weights are fit on the quantile loss), else
    RMSE (a regression)."""
    if any("accuracy" in v for v in rows.values()):
        return "accuracy"
    if rows.get("saved model (combination)", {}).get("crps") is not None:
        return "crps"
    return "rmse"


def _after(value: float | None, before: float | None) -> str:
    """A stage's score and its change from the stage before, in fixed-width columns."""
    if value is None:
        return f"{'-':>9s}{'':10s}"
    change = "" if before is None else f"({value - before:+.4f})"
    return f"{value:9.4f} {change:9s}"


__all__ = ["METRICS", "leaderboard_frame", "leaderboard_lines", "stage_lines"]
