"""The leaderboard as a table: a DataFrame for `model.leaderboard()`, lines for the CLI and
the model card (both read result.json's / model.json's "leaderboard")."""

from __future__ import annotations

from typing import Any

METRICS = ("nll", "accuracy", "rmse", "crps")


def leaderboard_frame(report: dict | None) -> Any:
    """One row per model: validation and holdout scores (`val_nll`, `holdout_nll`, ...),
    seconds and notes; best validation NLL first, the saved model marked."""
    import pandas as pd

    records = []
    for row in (report or {}).get("rows", []):
        rec: dict[str, Any] = {"model": row["model"], "kind": row["kind"]}
        for part, prefix in (("validation", "val"), ("holdout", "holdout")):
            for m in METRICS:
                value = (row.get(part) or {}).get(m)
                if value is not None:
                    rec[f"{prefix}_{m}"] = value
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
    head = f"  {'model':{width}s}  " + "  ".join(f"{c:>13s}" for c in cols)
    lines = ["leaderboard (validation decides, holdout reports):", head]
    for _, r in frame.iterrows():
        cells = "  ".join(
            f"{r[c]:13.4f}" if isinstance(r[c], float) and r[c] == r[c] else f"{'-':>13s}"
            for c in cols
        )
        note = f"  ({r['note']})" if r["note"] else ""
        lines.append(f"  {r['model']:{width}s}  {cells}{note}")
    shipped = report.get("shipped") or {}
    lines.append(f"  saved: {shipped.get('model', 'the searched MoE')}")
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
            "  better on validation, not saved (not a network): "
            + ", ".join(shipped["better_on_validation"])
        )
    ensemble = report.get("ensemble") or {}
    if ensemble:
        weights = ", ".join(f"{k} {v:.2f}" for k, v in ensemble["weights"].items())
        lines.append(
            f"  weighted ensemble (reported, not saved): validation NLL "
            f"{ensemble['validation_nll']:.4f}, holdout {ensemble['holdout_nll']:.4f} ({weights})"
        )
    return lines


__all__ = ["METRICS", "leaderboard_frame", "leaderboard_lines"]
