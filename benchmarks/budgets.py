"""Time budgets kept: `sgem fit --time-budget B` on tables, series and images returns within
B + max(5 s, 2 %), measured as the wall clock of the whole command (process start included).

Each fit is a fresh `sgem fit` process (inline or process executor, `--experts auto`
included); the script prints each wall clock beside its budget and how the run says it
used the budget (result.json's `time_budget.why_it_ended`), and saves everything as JSON.
Data: scikit-learn's bundled breast_cancer / diabetes / digits (written as CSV and as an
image folder), the shared M3 and tourism series when ../shared is beside the checkout.

    python benchmarks/budgets.py                 # the full set (about 20 minutes)
    python benchmarks/budgets.py --only table    # a subset by name

On a GPU machine, `--device cuda` trains every fit there and then reloads each saved model
in a process that sees no GPU (CUDA_VISIBLE_DEVICES empty) and predicts with it:

    python benchmarks/budgets.py --device cuda --only breast_cancer-30s digits-60s \
        m3_other --out benchmarks/results/budgets_cuda.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
SHARED = Path(os.environ.get("SGEM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared"))


def tolerance(budget: float) -> float:
    """What the promise allows beyond the budget."""
    return max(5.0, 0.02 * budget)


def write_data(root: Path) -> dict[str, Path]:
    """The inputs: bundled scikit-learn tables and digits images, plus shared series."""
    from PIL import Image
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits

    root.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, loader in (("breast_cancer", load_breast_cancer), ("diabetes", load_diabetes)):
        frame = loader(as_frame=True).frame
        paths[name] = root / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    digits = load_digits()
    folder = root / "digits"
    if not folder.exists():
        for i, (image, label) in enumerate(zip(digits.images, digits.target, strict=True)):
            (folder / str(label)).mkdir(parents=True, exist_ok=True)
            pixels = (image * (255 / 16)).astype(np.uint8)
            Image.fromarray(pixels).resize((16, 16)).save(folder / str(label) / f"{i}.png")
    paths["digits"] = folder
    competition = SHARED / "data" / "competition"
    for name in ("m3_quarterly", "m3_yearly", "m3_other"):
        if (competition / f"{name}_train.csv").exists():
            paths[name] = competition / f"{name}_train.csv"
    tourism = SHARED / "data" / "timeseries" / "tourism_monthly.tsf"
    if tourism.exists():
        paths["tourism"] = tourism
    return paths


#: (name, data key, budget seconds, executor, extra flags)
FITS = [
    ("table-breast_cancer-30s-inline", "breast_cancer", 30, "inline", ["--target", "target"]),
    ("table-diabetes-60s-processes", "diabetes", 60, "processes", ["--target", "target"]),
    (
        "table-breast_cancer-auto-90s",
        "breast_cancer",
        90,
        "processes",
        ["--target", "target", "--experts", "auto"],
    ),
    ("images-digits-60s-processes", "digits", 60, "processes", ["--image-size", "16"]),
    ("images-digits-120s-inline", "digits", 120, "inline", ["--image-size", "16"]),
    ("series-m3_yearly-60s-inline", "m3_yearly", 60, "inline", ["--horizon", "6"]),
    ("series-m3_quarterly-60s-processes", "m3_quarterly", 60, "processes", ["--horizon", "8"]),
    ("series-m3_other-90s-processes", "m3_other", 90, "processes", ["--horizon", "8"]),
    ("series-tourism-180s-processes", "tourism", 180, "processes", ["--horizon", "24"]),
    ("series-m3_quarterly-300s-processes", "m3_quarterly", 300, "processes", ["--horizon", "8"]),
]


def _sgem() -> list[str]:
    """The `sgem` command, or the module where it is not installed (a machine given the
    source tree alone, as the GPU machines are)."""
    return ["sgem"] if shutil.which("sgem") else [sys.executable, "-m", "sgem.cli"]


RELOAD = """
import sys, sgem, torch
from sgem.run.predict_io import predict_file
out = predict_file(sgem.load(sys.argv[1]), sys.argv[2])
print(f"{len(out)} prediction rows, cuda visible: {torch.cuda.is_available()}")
"""


def reload_without_gpu(out: Path, data: Path) -> dict:
    """Load the saved model in a fresh process that sees no GPU and predict with it."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-c", RELOAD, str(out), str(data)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    said = (proc.stdout if proc.returncode == 0 else proc.stderr).strip()
    return {"ok": proc.returncode == 0, "said": said[-600:]}


def run_fit(
    name: str,
    data: Path,
    budget: float,
    executor: str,
    flags: list[str],
    runs: Path,
    device: str | None = None,
):
    out = runs / name
    shutil.rmtree(out, ignore_errors=True)  # a fresh fit: a finished run would be reused
    if device is not None:
        flags = [*flags, "--device", device]
    cmd = [
        *_sgem(),
        "fit",
        str(data),
        "--time-budget",
        f"{budget:g}s",
        "--out",
        str(out),
        "--executor",
        executor,
        "--quiet",
        *flags,
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=2 * budget + 120)
    wall = time.perf_counter() - start
    row = {
        "name": name,
        "budget_seconds": budget,
        "wall_seconds": round(wall, 2),
        "within": wall <= budget + tolerance(budget),
        "executor": executor,
        "command": " ".join(cmd),
        "returncode": proc.returncode,
    }
    if proc.returncode != 0:
        row["error"] = (proc.stderr or proc.stdout)[-800:]
        return row
    result = json.loads((out / "result.json").read_text())
    row["why_it_ended"] = (result.get("time_budget") or {}).get("why_it_ended")
    row["stage_seconds"] = (result.get("clock") or {}).get("stage_seconds")
    row["test_nll"] = result.get("test_nll")
    row["test_accuracy"] = result.get("test_accuracy")
    if device is not None:
        row["device"] = device
        row["reload_without_gpu"] = reload_without_gpu(out, data)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--only", nargs="*", default=[""], help="run the fits whose name contains one of these"
    )
    p.add_argument("--device", default=None, help="sgem fit --device (cuda on a GPU machine)")
    p.add_argument("--runs", default="/tmp/sgem-budgets", help="where run directories go")
    p.add_argument("--out", default=str(RESULTS / "budgets.json"))
    args = p.parse_args()
    runs = Path(args.runs)
    paths = write_data(runs / "data")
    rows = []
    for name, key, budget, executor, flags in FITS:
        if not any(part in name for part in args.only):
            continue
        if key not in paths:
            print(f"skip {name}: {key} not available (no ../shared beside the checkout)")
            continue
        row = run_fit(name, paths[key], budget, executor, flags, runs, args.device)
        rows.append(row)
        mark = "ok  " if row["within"] and row["returncode"] == 0 else "FAIL"
        said = row.get("why_it_ended") or row.get("error", "")
        print(
            f"{mark} {name:38s} budget {budget:5.0f} s  wall {row['wall_seconds']:7.1f} s  "
            f"(limit {budget + tolerance(budget):.0f} s)  {said}",
            flush=True,
        )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    doc = {
        "what": "sgem fit wall clock (whole command) against --time-budget",
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "seed": 0,
        "command": " ".join(["python benchmarks/budgets.py", *sys.argv[1:]]),
        "device": args.device or "cpu",
        "fits": rows,
        "all_within": all(r["within"] and r["returncode"] == 0 for r in rows),
    }
    if args.device is not None:
        import torch

        doc["machine"] += f", torch {torch.__version__}"
        if torch.cuda.is_available():
            doc["machine"] += f", {torch.cuda.get_device_name(0)}"
        doc["all_reload_without_gpu"] = all(r.get("reload_without_gpu", {}).get("ok") for r in rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(
        f"{sum(r['within'] and r['returncode'] == 0 for r in rows)} of {len(rows)} ended "
        f"without error within budget + max(5 s, 2 %); saved {args.out}"
    )
    sys.exit(0 if doc["all_within"] else 1)


if __name__ == "__main__":
    main()
