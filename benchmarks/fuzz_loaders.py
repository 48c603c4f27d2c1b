"""Fuzzed loaders, the full set: every mutation of tests/loader_fuzz_cases.py and
loader_fuzz_run.py (about 2,000, seeded) applied to a tiny fitted table's model directory,
the same model saved as a combination with a logistic-regression member, and its run
directory; each copy is read back as a user does (`sgem.load` + predict; every reader of a
run directory) and classed as read identically, tolerated, refused (the error type and the
file its message names), or a failure (a traceback, a silently different output, a hang, an
unnamed refusal, executed code). tests/test_fuzz_loaders.py runs 40 per class of the same.

    python benchmarks/fuzz_loaders.py [--per-class N]

Prints the table and saves benchmarks/results/fuzz_loaders.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "tests"))  # the fuzzer is shared with the test

NOTES = {
    "store-flip": "tolerated: SQLite keeps no checksum of a row's values, so a flipped byte "
    "inside a stored loss or name reads as another value; only the store's rows differ",
    "result-flip": "tolerated: result.json has no checksum; only the report differs",
    "config-flip": "tolerated: config.yaml has no checksum; only the config differs",
    "trace-torn": "tolerated: the torn last record (a kill mid-append) is dropped",
    "trace-edit": "tolerated: an empty trace reads as no iterations",
    "json-value": "tolerated: an optional section (calibration, combination) deleted or "
    "emptied loads as a model saved without it; refused-input: loaded, and predicting "
    "refused the rows with a user error (a model without its table encoding)",
}


def named_file(detail: str) -> str:
    """The file a refusal names first (the run / model files, else the directory)."""
    from loader_fuzz import MODEL_FILES, RUN_FILES

    names = (*MODEL_FILES, "members.safetensors", *RUN_FILES, "run.lock")
    hits = [(detail.find(n), n) for n in names if n in detail]
    return min(hits)[1] if hits else "the directory"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-class", type=int, default=0, help="cap per class (0: all)")
    p.add_argument("--out", default=str(RESULTS / "fuzz_loaders.json"))
    args = p.parse_args()
    from loader_fuzz import Fuzzer, build_bases, format_table, summary
    from loader_fuzz_cases import SEED, all_cases, subset

    with tempfile.TemporaryDirectory(prefix="sgem-fuzz-") as tmp:
        start = time.perf_counter()
        bases = build_bases(Path(tmp))
        build_s = time.perf_counter() - start
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        fuzzer = Fuzzer(bases, scratch)
        cases = all_cases(bases)
        if args.per_class:
            cases = subset(cases, args.per_class)
        start = time.perf_counter()
        outcomes = [fuzzer.run_case(c) for c in cases]
        fuzz_s = time.perf_counter() - start
    table = summary(outcomes)
    files: dict[str, Counter] = {}
    failed = Counter(o.case.cls for o in outcomes if o.failed)
    for o in outcomes:
        if o.kind == "refused":
            files.setdefault(o.case.cls, Counter())[f"{o.step} naming {named_file(o.detail)}"] += 1
    print(format_table(table))
    rows = []
    for cls, row in table.items():
        rows.append(
            {
                "class": cls,
                "cases": row["cases"],
                **{k: row["outcomes"].get(k, 0) for k in ("identical", "tolerated", "refused")},
                "refused_input": row["outcomes"].get("refused-input", 0),
                "failures": failed[cls],
                "how_refused": dict(files.get(cls, {})),
                "note": NOTES.get(cls, ""),
                "failed_cases": row["failures"],
            }
        )
    total_failures = sum(r["failures"] for r in rows)
    print(f"{len(outcomes)} cases, {total_failures} failures, fuzzing {fuzz_s:.1f} s")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    doc = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit,
        "seed": SEED,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "cases": len(outcomes),
        "failures": total_failures,
        "build_seconds": round(build_s, 1),
        "fuzz_seconds": round(fuzz_s, 1),
        "classes": rows,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
