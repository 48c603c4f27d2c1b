"""A budgeted table fit that grows K (`sgem fit --time-budget B`, no --experts), SIGKILLed
while it runs its second K and run again with the same command, beside the same fit left
alone: how many seconds the Ks cost in all (each K's own clock, across the attempts) against
the budget, and which K was saved.

    python benchmarks/choice_resume.py [--budget 90] [--kill-after 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from sgem.bench.machine import commit, machine_info
from sgem.bench.structure_recovery import write_csv

RESULTS = Path(__file__).resolve().parent / "results"


def k_clocks(out: Path) -> dict[str, float]:
    """Each K's run's seconds as its clock saved them (the first K runs in `out` itself)."""
    found = {}
    for run in [out, *sorted(out.glob("experts-*"))]:
        clock = run / "budget_clock.json"
        if clock.exists():
            found[run.name] = json.loads(clock.read_text())["spent_seconds"]
    return found


def fit(cmd: list[str], kill_when: Path | None, kill_after: float) -> float:
    """Run `cmd`; SIGKILL it `kill_after` s after `kill_when` appears (None: let it end)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    seen = None
    while proc.poll() is None:
        time.sleep(0.2)
        if kill_when is not None and seen is None and kill_when.exists():
            seen = time.perf_counter()
        if seen is not None and time.perf_counter() - seen >= kill_after:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=90.0)
    p.add_argument("--kill-after", type=float, default=8.0, help="seconds into the second K")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", default="/tmp/sgem-choice-resume")
    p.add_argument("--out", default=str(RESULTS / "choice_resume.json"))
    args = p.parse_args()
    root = Path(args.runs)
    train, _ = write_csv(args.seed, root / "data")
    rows = []
    for part in ("alone", "killed"):
        out = root / part
        subprocess.run(["rm", "-rf", str(out)], check=True)
        cmd = ["sgem", "fit", str(train), "--target", "label", "--seed", str(args.seed),
               "--time-budget", f"{args.budget:g}s", "--out", str(out), "--quiet"]  # fmt: skip
        walls = [fit(cmd, out / "experts-3" if part == "killed" else None, args.kill_after)]
        if part == "killed":
            walls.append(fit(cmd, None, 0.0))  # the same command again
        result = json.loads((out / "result.json").read_text())
        clocks = k_clocks(out)
        auto = result.get("experts_auto") or {}
        row = {
            "part": part,
            "attempts": len(walls),
            "wall_seconds": round(sum(walls), 1),
            "k_clock_seconds": clocks,
            "ks_seconds": round(sum(clocks.values()), 1),
            "within_budget": sum(clocks.values()) <= args.budget,
            "ks_tried": [c["n_experts"] for c in auto.get("candidates", [])],
            "k_budgets": [c["budget_seconds"] for c in auto.get("candidates", [])],
            "chosen": auto.get("chosen"),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    doc = {"date": time.strftime("%Y-%m-%d"), "commit": commit() or "unknown",
           "machine": machine_info(), "seed": args.seed, "budget_seconds": args.budget,
           "kill_after_seconds": args.kill_after, "rows": rows,
           "command": "python benchmarks/choice_resume.py"}  # fmt: skip
    Path(args.out).write_text(json.dumps(doc, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
