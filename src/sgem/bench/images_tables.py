"""The image table (Table cifar_main): summary over seeds, paired differences, markdown,
and merging the result files of seeds run in separate processes."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ..errors import SgemUserError
from .images import LABELS


def _stats(values: list) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "n": len(values),
    }


def summarise(rows: list[dict]) -> dict:
    """Per method: mean, std and count over seeds of accuracy, recovery and seconds."""
    out: dict[str, dict] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        lg = [r.get("learnable_gate") or {} for r in mine]
        out[method] = {
            "seeds": [r["seed"] for r in mine],
            "test_accuracy": _stats([r["test_accuracy"] for r in mine]),
            "oracle_match": _stats([r.get("oracle_match") for r in mine]),
            "learnable_gate_accuracy": _stats([g.get("test_accuracy") for g in lg]),
            "seconds": _stats([r["seconds"] for r in mine]),
            "learnable_gate_seconds": _stats([g.get("seconds") for g in lg]),
        }
    return out


def paired_differences(rows: list[dict], method: str = "sgem") -> dict[str, dict]:
    """Per-seed cluster-gate accuracy of `method` minus each other method's, on the same
    task: the comparison the seed-to-seed task variance does not blur."""
    by_seed = {(r["seed"], r["method"]): r["test_accuracy"] for r in rows}
    out: dict[str, dict] = {}
    for other in dict.fromkeys(r["method"] for r in rows):
        if other == method:
            continue
        diffs = [
            by_seed[(s, method)] - by_seed[(s, other)]
            for s in sorted({r["seed"] for r in rows})
            if (s, method) in by_seed and (s, other) in by_seed
        ]
        if diffs:
            out[other] = {
                **(_stats(diffs) or {}),
                "wins": sum(d > 0 for d in diffs),
                "diffs": diffs,
            }
    return out


def markdown(summary: dict, meta: dict, rows: list[dict]) -> str:
    """The table of a run (or of merged runs), with the paired differences under it."""

    def fmt(entry: dict, key: str, digits: int = 4) -> str:
        v = entry.get(key)
        return "n/a" if v is None else f"{v['mean']:.{digits}f} ± {v['std']:.{digits}f}"

    def pct(entry: dict, key: str) -> str:
        v = entry.get(key)
        return "n/a" if v is None else f"{100 * v['mean']:.0f}% ± {100 * v['std']:.0f}%"

    lines = [
        f"# Table cifar_main ({meta['scale']} scale, seeds {meta['seeds']})",
        "",
        f"Task: {meta['task_summary']}",
        "",
        f"Device: {meta['device']}, torch threads {meta['torch_threads']}; total wall clock "
        f"{meta['wall_seconds']:.0f} s.",
        "",
        "| method | test acc. (cluster gate) | source recovery | test acc. (learnable gate) "
        "| wall clock (s) |",
        "|---|---|---|---|---|",
    ]
    for method, e in summary.items():
        secs = e["seconds"]["mean"]
        if e.get("learnable_gate_seconds"):
            secs_txt = f"{secs:.0f} + {e['learnable_gate_seconds']['mean']:.0f}"
        else:
            secs_txt = f"{secs:.0f}"
        lines.append(
            f"| {LABELS.get(method, method)} | {fmt(e, 'test_accuracy')} | "
            f"{pct(e, 'oracle_match')} | {fmt(e, 'learnable_gate_accuracy')} | {secs_txt} |"
        )
    lines += [
        "",
        "Mean ± std over seeds. Source recovery: Hungarian agreement of the cluster routing "
        "with the majority-source partition (100% by construction for the oracle rows). "
        "Wall clock per method and seed: search + cluster-gated final MoE (+ the learnable-"
        "gate MoE).",
    ]
    paired = paired_differences(rows)
    if paired:
        lines += [
            "",
            "Paired per seed (same task): SGEM cluster-gate accuracy minus the method's — "
            + "; ".join(
                f"{LABELS.get(m, m).replace('*', '')}: {100 * v['mean']:+.1f} ± "
                f"{100 * v['std']:.1f} points, SGEM ahead on {v['wins']}/{v['n']} seeds"
                for m, v in paired.items()
            )
            + ".",
        ]
    if any(m.startswith("decomp_") for m in summary):
        lines += [
            "",
            "Decomposition rows (Table decomp): every expert uses one DARTS cell, searched on "
            "the full mixture or on one source's clusters; '(i) random split' uses the same "
            "split, cell and seeds as DARTS×K.",
        ]
    return "\n".join(lines) + "\n"


def combine(tags: list[str], out_dir: Path, tag: str) -> Path:
    """Merge the rows of several result files (e.g. seeds run in parallel processes) into
    one table; wall clock is the sum of the parts' (they may have overlapped in time)."""
    parts = []
    for part in tags:
        path = out_dir / f"images_main_{part}.json"
        if not path.exists():
            raise SgemUserError(f"--combine: {path} does not exist (run that tag first)")
        parts.append(json.loads(path.read_text()))
    rows = [r for part in parts for r in part["rows"]]
    keys = [(r["seed"], r["method"]) for r in rows]
    if len(set(keys)) != len(keys):
        raise SgemUserError(
            "--combine: the parts share (seed, method) rows; combine disjoint seeds"
        )
    meta = dict(parts[0]["meta"])
    meta.update(
        tag=tag,
        seeds=sorted({r["seed"] for r in rows}),
        wall_seconds=round(sum(p["meta"]["wall_seconds"] for p in parts), 1),
        combined_from=tags,
        tasks={k: v for p in parts for k, v in p["meta"].get("tasks", {}).items()},
    )
    summary = summarise(rows)
    json_path = out_dir / f"images_main_{tag}.json"
    json_path.write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
    md_path = out_dir / f"images_main_{tag}.md"
    md_path.write_text(markdown(summary, meta, rows))
    return md_path
