"""The forecasting table (Table ts_main) as JSON and markdown, and what is done to saved ones.

`write_table` computes relative scores, the summary and the paired comparisons of a run's
rows and writes `ts_main_<tag>.{json,md}`; `render` re-writes the markdown of a saved JSON,
`merge_outputs` pools outputs of one configuration run side by side, and `write_op_effects`
adds the operation-effect table (Table ts_ops) of the SGEM runs' observations.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import SgemUserError
from ..final.protocol import FINAL_LENGTHS, parse_length
from ..report.analysis import RunObservations, format_op_table, op_effects
from .methods import BLOCKS, LABELS, MATCHED, REFERENCE, label
from .stats import add_relative, paired, summarise


def markdown(summary: dict, meta: dict, comparisons: dict | None = None) -> str:
    """The table of a run's summary and comparisons, with the scale it ran at."""

    def fmt(entry: dict, key: str, digits: int = 3) -> str:
        v = entry.get(key)
        return "n/a" if v is None else f"{v['mean']:.{digits}f} ± {v['std']:.{digits}f}"

    n_seeds = len(meta["seeds"])
    cfg = meta["config"]
    search, train = cfg["search"], cfg["search"]["train"]
    name = cfg.get("final_length")  # several lengths in one table: none of them described
    one = isinstance(name, str) and name in FINAL_LENGTHS
    length, warm, refit = parse_length(name) if one else ("fixed", False, True)
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
            if length == "tracked" and refit
            else ""
        )
        + (
            ", or rather: each network early-stopped on validation and kept as it is (trained "
            "on the training samples only, no refit)"
            if length == "tracked" and not refit
            else ""
        )
        + (
            "; every routed expert fine-tunes a global network of its cell (warm start, "
            "`sgem.final.warm_start`; K = 1 unchanged)"
            if warm
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
            ci = c["ci95_seeds"]
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


def merge_outputs(paths: list[Path], out_dir: Path, tag: str) -> str:
    """One table from several outputs of the same configuration (processes run side by
    side): rows and references pooled, relative scores, summary and paired comparisons
    recomputed; a (seed, method) present twice is an error. Returns the markdown."""
    parts = [json.loads(p.read_text()) for p in paths]
    configs = {json.dumps(d["meta"]["config"], sort_keys=True) for d in parts}
    if len(configs) != 1:
        raise SgemUserError(
            f"cannot merge outputs of different configurations: {paths}; merge runs of one "
            "configuration"
        )
    rows = [r for d in parts for r in d["rows"]]
    keys = [(r["seed"], r["method"]) for r in rows]
    if len(set(keys)) != len(keys):
        raise SgemUserError(f"a (seed, method) appears twice in {paths}; merge disjoint runs")
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
    return (out_dir / f"ts_main_{tag}.md").read_text()


def ops_markdown(table: dict, tag: str) -> str:
    """Table ts_ops: operation effects from the SGEM runs' observations."""
    return (
        f"# Table ts_ops ({tag}): operation effects from the SGEM runs' observations\n\n"
        + format_op_table(table)
        + "\n"
    )


def write_op_effects(
    observations: list[RunObservations], ops: list[str], out_dir: Path, tag: str
) -> None:
    """Add the operation-effect table of `observations` to ts_main_<tag>.json and write it
    as ts_ops_<tag>.md."""
    table = op_effects(observations, ops=ops, n_bootstrap=1000)
    (out_dir / f"ts_ops_{tag}.md").write_text(ops_markdown(table, tag))
    json_path = out_dir / f"ts_main_{tag}.json"
    data = json.loads(json_path.read_text())
    data["op_effects"] = table
    json_path.write_text(json.dumps(data, indent=1))


def render(path: Path) -> str:
    """Re-write the markdown of a saved table (and its ts_ops table); returns the markdown."""
    data = json.loads(Path(path).read_text())
    md = Path(path).with_suffix(".md")
    md.write_text(markdown(data["summary"], data["meta"], data.get("comparisons")))
    if "op_effects" in data:
        tag = data["meta"]["tag"]
        md.with_name(f"ts_ops_{tag}.md").write_text(ops_markdown(data["op_effects"], tag))
    return md.read_text()
