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

from sgem.bench import results_tables

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RENAMED = {  # files some results were computed from, by the names they have now
    "ts_main_sgem-s5": "ts_main_offline-s56",
}
INDEX = RESULTS / "measurements.txt"  # file stem | how to read it | what was measured


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
    return [*head, *getattr(results_tables, kind)(d, arg), ""]


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
