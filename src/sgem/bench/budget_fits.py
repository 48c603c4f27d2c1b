"""The fits of `benchmarks/budgets.py`: budgeted `sgem fit` commands on bundled and shared
data, timed as whole commands, and (on a GPU machine) each saved model reloaded where no GPU
is seen. In the library so the script stays a short driver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def tolerance(budget: float) -> float:
    """What the promise allows beyond the budget."""
    return max(5.0, 0.02 * budget)


def write_data(root: Path, shared: Path) -> dict[str, Path]:
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
    competition = shared / "data" / "competition"
    for name in ("m3_quarterly", "m3_yearly", "m3_other"):
        if (competition / f"{name}_train.csv").exists():
            paths[name] = competition / f"{name}_train.csv"
    tourism = shared / "data" / "timeseries" / "tourism_monthly.tsf"
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


__all__ = ["FITS", "reload_without_gpu", "run_fit", "tolerance", "write_data"]
