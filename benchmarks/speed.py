"""Wall clock of `sgem run toy --quiet` (and `sgem --help`): this code vs a base commit.

Each run is a fresh process (start-up included). The two versions run interleaved, seed by
seed, alternating which goes first (A B, B A, A B, ...), so that the load of a shared machine
hits both alike; compare the ratios, not the absolute seconds. The base version runs from a
git worktree of the base commit (made here when missing) with PYTHONPATH pointing at its
src/. Besides the wall clock, each run's CPU time (user + sys of the child) is recorded: it
is far less sensitive to other jobs on the machine. The machine load (`uptime`) and the
busiest other processes are saved with every run.

    python benchmarks/speed.py [--seeds 0 1 2] [--base 0904414] [--base-tree /tmp/h4/base]
        [--current-src src] [--help-repeats 5] [--out benchmarks/results/speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sgem.bench.machine import busiest, load_average

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], src: Path) -> dict:
    """Run `cmd` with `src` first on PYTHONPATH; wall clock and the child's CPU time."""
    env = dict(os.environ, PYTHONPATH=str(src))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = load_average()
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "load_before": load,
        "load_after": load_average(),
    }


def ensure_base(tree: Path, commit: str) -> tuple[Path, str]:
    if not (tree / "src" / "sgem").is_dir():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit], check=True
        )
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return tree / "src", head


def toy_result(rundir: Path) -> dict:
    res = json.loads((rundir / "result.json").read_text())
    return {
        "oracle_match": res.get("oracle_match"),
        "test_accuracy": res.get("test_accuracy"),
        "n_trained": res.get("n_trained"),
    }


def ratio_summary(rows: list[dict], key: str) -> dict | None:
    if not rows:
        return None
    ratios = [r["base"][key] / r["current"][key] for r in rows]
    return {
        "per_seed": [round(x, 3) for x in ratios],
        "mean": round(statistics.fmean(ratios), 3),
        "total": round(sum(r["base"][key] for r in rows) / sum(r["current"][key] for r in rows), 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    p.add_argument("--base", default="0904414", help="base commit")
    p.add_argument("--base-tree", default="/tmp/h4/base", help="worktree of the base commit")
    p.add_argument("--current-src", default=str(ROOT / "src"), help="src/ of the code to time")
    p.add_argument("--help-repeats", type=int, default=5)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "speed.json"))
    args = p.parse_args()

    base_src, base_head = ensure_base(Path(args.base_tree), args.base)
    current_src = Path(args.current_src).resolve()
    versions = {"base": base_src, "current": current_src}
    python = sys.executable
    help_code = "import sys; sys.argv = ['sgem', '--help']; from sgem.cli import main; main()"
    help_cmd = [python, "-c", help_code]

    # `sgem --help`: start-up only
    helps: dict[str, list[float]] = {"base": [], "current": []}
    for i in range(args.help_repeats):
        for name in ("base", "current") if i % 2 == 0 else ("current", "base"):
            helps[name].append(timed(help_cmd, versions[name])["wall_s"])
    hb, hc = statistics.median(helps["base"]), statistics.median(helps["current"])
    print(f"sgem --help  base {hb:.2f} s  current {hc:.2f} s  ratio {hb / hc:.1f}x", flush=True)

    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="sgem-speed-"))
    try:
        for i, seed in enumerate(args.seeds):
            row: dict = {"seed": seed}
            order = ("base", "current") if i % 2 == 0 else ("current", "base")
            row["order"] = list(order)
            for name in order:
                rundir = scratch / f"{name}-seed{seed}"
                shutil.rmtree(rundir, ignore_errors=True)
                cmd = [python, "-m", "sgem.cli", "run", "toy", "--seed", str(seed)]
                cmd += ["--out", str(rundir), "--quiet"]
                row[name] = timed(cmd, versions[name]) | toy_result(rundir)
                row[name]["others"] = busiest()
            row["ratio_wall"] = round(row["base"]["wall_s"] / row["current"]["wall_s"], 3)
            row["ratio_cpu"] = round(row["base"]["cpu_s"] / row["current"]["cpu_s"], 3)
            rows.append(row)
            print(
                f"seed {seed}: base {row['base']['wall_s']:.1f} s (cpu {row['base']['cpu_s']:.1f})"
                f"  current {row['current']['wall_s']:.1f} s (cpu {row['current']['cpu_s']:.1f})"
                f"  ratio wall {row['ratio_wall']:.2f}x cpu {row['ratio_cpu']:.2f}x"
                f"  load {row['current']['load_before']}",
                flush=True,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    data = {
        "what": "sgem run toy --quiet, fresh process per run, base vs current interleaved",
        "base_commit": base_head,
        "current_src": str(current_src),
        "current_commit": subprocess.run(
            ["git", "-C", str(current_src), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
        "help_s": helps,
        "help_ratio_median": round(hb / hc, 2),
        "runs": rows,
        "ratio_wall": ratio_summary(rows, "wall_s"),
        "ratio_cpu": ratio_summary(rows, "cpu_s"),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        },
    }
    print(json.dumps({k: data[k] for k in ("ratio_wall", "ratio_cpu", "help_ratio_median")}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()
