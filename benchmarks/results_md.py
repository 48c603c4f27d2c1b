"""Write RESULTS.md from the JSON files in benchmarks/results/: one section per measurement.

Each section names what was measured, the date and commit of the measurement (the file's
own `date` / `commit` where it records them, else the commit that first stored the file's
content) and the command that reproduces it (the file's own, else one built from its
recorded settings, else the benchmark script's docstring), then a table read off the JSON.

    python benchmarks/results_md.py
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
METRICS = ("test_nll", "rel_wql", "test_crps", "test_accuracy", "learnable_gate_accuracy",
           "oracle_match", "n_trained", "seconds")  # fmt: skip
SKIP = {"machine", "config", "configs", "versions", "meta", "args", "uptime", "platform",
        "current_src", "date", "commit"}  # fmt: skip
RENAMED = {  # files some results were computed from, by the names they have now
    "ts_main_sgem-s5": "ts_main_offline-s56",
}
INDEX = RESULTS / "measurements.txt"  # file stem | how to read it | what was measured


def fmt(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list) and all(isinstance(x, int | float) for x in v) and len(v) <= 8:
        return " / ".join(fmt(x) for x in v)
    return str(v).replace("|", "\\|")


def scalars(d: dict, prefix: str = "") -> dict:
    """The scalar leaves of `d` (nested keys joined by '.'), bookkeeping keys left out."""
    out: dict = {}
    for k, v in d.items():
        numbers = isinstance(v, list) and v and all(isinstance(x, int | float) for x in v)
        if isinstance(v, dict) and k not in SKIP:
            out.update(scalars(v, f"{prefix}{k}."))
        elif k not in SKIP and (isinstance(v, int | float) or numbers or len(str(v)) <= 40):
            out[prefix + k] = v
    return out


def table(rows: list[dict], columns: list[str] | None = None) -> list[str]:
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]


def methods(d: dict, _: str) -> list[str]:
    rows = []
    for name, s in d["summary"].items():
        row = {"method": name, "seeds": len(s.get("seeds", []))}
        row.update({m: s[m]["mean"] if isinstance(s[m], dict) else s[m] for m in METRICS if m in s})
        rows.append(row)
    return ["Means over seeds.", "", *table(rows)]


def summary(d: dict, _: str) -> list[str]:
    s = d.get("summary", d.get("summaries"))
    return table([scalars(r) for r in (s if isinstance(s, list) else [s])])


def paired(d: dict, _: str) -> list[str]:
    parts = {"": d} if "methods" in d else {k: v for k, v in d.items() if isinstance(v, dict)}
    rows = []
    for label, part in parts.items():
        for name, m in part["methods"].items():
            seeds = list(m["per_seed"].values())
            ci = m.get("window_nll_diff", {})
            row = {"comparison": label or "-", "baseline": name}
            row["baseline NLL"] = sum(s["baseline_nll"] for s in seeds) / len(seeds)
            row["SGEM NLL"] = sum(s["sgem_nll"] for s in seeds) / len(seeds)
            row["SGEM ahead on"] = f"{m['sgem_ahead_on']}/{m['seeds']}"
            row["window NLL diff"] = f"{fmt(ci.get('mean'))} [{fmt(ci.get('ci95'))}]"
            rows.append(row)
    note = "Test NLL, mean over seeds; window diff: paired bootstrap of SGEM minus the baseline."
    return [note, "", *table(rows)]


def records(d: dict, spec: str) -> list[str]:
    key, cols = spec.split(":")
    return table([scalars(r) for r in d[key]], cols.split(","))


def keyed(d: dict, key: str) -> list[str]:
    obj = d[key] if key else {k: v for k, v in d.items() if isinstance(v, dict) and k not in SKIP}
    return table([{"": k, **scalars(v)} for k, v in obj.items()])


def flat(d: dict, _: str) -> list[str]:
    rows = [{"quantity": k, "value": v} for k, v in scalars(d).items() if ".timing." not in k]
    return table(rows[:24])


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def measured(path: Path) -> tuple[str, str]:
    """Date and commit that first stored this content (under any name), else the last commit."""
    blob = git("hash-object", str(path))
    log = git("log", "--reverse", "--format=%ad,%h", "--date=short", f"--find-object={blob}")
    first = log.splitlines()[0] if log else git("log", "-1", "--format=%ad,%h", "--date=short")
    return tuple(first.split(","))  # type: ignore[return-value]


def result_path(p: str) -> str:
    stem = Path(p).stem
    return f"benchmarks/results/{RENAMED.get(stem, stem)}.json"


def docstring_command(script: Path) -> str:
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    lines = [ln.strip() for ln in doc.split("\n")]
    for i, ln in enumerate(lines):
        if ln.startswith("python benchmarks/"):
            cmd = [ln]
            while cmd[-1].endswith("\\"):
                cmd.append(lines[i + len(cmd)])
            return " ".join(c.rstrip("\\").strip() for c in cmd)
    return f"python benchmarks/{script.name}"


def command(stem: str, d: dict) -> str:
    if isinstance(d.get("command"), str):
        cmd = d["command"]
        return cmd if cmd.startswith(("python", "sgem")) else f"python {cmd}"
    meta, bench = d.get("meta", {}), "python benchmarks/"
    if "scale" in meta:
        args = f"--seeds {' '.join(map(str, meta['seeds']))} --methods {' '.join(meta['methods'])}"
        if meta.get("replayed_from"):
            src = result_path(meta["replayed_from"])
            return f"{bench}ts_refinal.py {src} {args} --final-length {meta['final_length']}"
        script = "images_main" if stem.startswith("images") else "ts_main"
        length = f" --final-length {meta['final_length']}" if meta.get("final_length") else ""
        return f"{bench}{script}.py --scale {meta['scale']} {args}{length}"
    part = d if "baselines" in d else next((v for v in d.values() if isinstance(v, dict)), {})
    if isinstance(part.get("baselines"), str) and isinstance(d.get("sgem"), str):
        pair = f"{result_path(part['baselines'])} --sgem {result_path(d['sgem'])}"
        return f"{bench}matched_budget.py {pair} --out benchmarks/results/{stem}.json"
    if stem.startswith("scaling"):
        r = d["runs"][0]
        size = f"--m {r['M']}" if r["family"] == "toy" else f"--k {r['K']}"
        seeds = " ".join(sorted({str(x["seed"]) for x in d["runs"]}))
        return f"{bench}scaling.py --family {r['family']} {size} --seeds {seeds}"
    scripts = sorted(RESULTS.parent.glob("*.py"), key=lambda p: -len(p.stem))
    aliases = {"executors_ts": "executor_speed"}
    for p in scripts:
        if stem.startswith(p.stem) or aliases.get(stem) == p.stem:
            return docstring_command(p)
    return "(see the file)"


def section(stem: str, how: str, title: str) -> list[str]:
    path = RESULTS / f"{stem}.json"
    d = json.loads(path.read_text())
    date, commit = measured(path)
    date, commit = str(d.get("date", date))[:10], str(d.get("commit", commit))
    kind, _, arg = how.partition(":")
    # (parts of one file measured at different commits: the file says which, in words)
    at = f"commits {commit}" if " " in commit else f"commit `{commit[:7]}`"
    where = f"`{path.relative_to(ROOT)}`, measured {date} at {at}:"
    head = [f"### {title}", "", where, "", f"    {command(stem, d)}", ""]
    if isinstance(d.get("note"), str):
        head.append(f"({d['note']})\n")
    return [*head, *globals()[kind](d, arg), ""]


def render() -> str:
    out = ["# Results", "", "Every measurement kept in `benchmarks/results/`, written by "
           "`python benchmarks/results_md.py`. Unless noted: 2 shared CPU cores (seconds depend "
           "on the machine and its load).", ""]  # fmt: skip
    listed = set()
    for line in INDEX.read_text().splitlines():
        if line.startswith("# ") or not line.strip():
            continue
        if line.startswith("#"):
            out += [line, ""]
            continue
        stem, how, title = (s.strip() for s in line.split("|"))
        listed.add(stem)
        out += section(stem, how, title)
    missing = sorted(p.stem for p in RESULTS.glob("*.json") if p.stem not in listed)
    if missing:
        out += ["## Not yet summarised here", "", *[f"- `{m}.json`" for m in missing], ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    (ROOT / "RESULTS.md").write_text(render())
    print(f"wrote {ROOT / 'RESULTS.md'}")
