"""The Table cifar_main bookkeeping (`sgem.bench.images_tables`): paired per-seed
differences and merging the result files of seeds run in separate processes (no training
here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgem.bench import images_tables
from sgem.errors import SgemUserError


def _row(method: str, seed: int, acc: float) -> dict:
    return {"method": method, "seed": seed, "test_accuracy": acc, "seconds": 1.0}


def _part(rows: list[dict], tag: str, seconds: float) -> dict:
    meta = {"scale": "offline", "tag": tag, "seeds": sorted({r["seed"] for r in rows})}
    meta.update(device="cpu", torch_threads=1, task_summary="t", wall_seconds=seconds)
    return {"meta": meta, "summary": {}, "rows": rows}


def test_paired_differences_match_seeds() -> None:
    rows = [_row("sgem", 0, 0.7), _row("random_moe", 0, 0.6), _row("sgem", 1, 0.5)]
    rows += [_row("random_moe", 1, 0.55), _row("darts_x_k", 1, 0.4)]
    paired = images_tables.paired_differences(rows)
    assert paired["random_moe"]["n"] == 2 and paired["random_moe"]["wins"] == 1
    assert paired["random_moe"]["diffs"] == pytest.approx([0.1, -0.05])
    assert paired["darts_x_k"]["n"] == 1 and paired["darts_x_k"]["diffs"] == pytest.approx([0.1])


def test_combine_merges_disjoint_seeds(tmp_path: Path) -> None:
    a = [_row("sgem", 0, 0.7), _row("random_moe", 0, 0.6)]
    b = [_row("sgem", 3, 0.8), _row("random_moe", 3, 0.5)]
    (tmp_path / "images_main_a.json").write_text(json.dumps(_part(a, "a", 10.0)))
    (tmp_path / "images_main_b.json").write_text(json.dumps(_part(b, "b", 5.0)))
    md = images_tables.combine(["a", "b"], tmp_path, "ab")
    merged = json.loads((tmp_path / "images_main_ab.json").read_text())
    assert merged["meta"]["seeds"] == [0, 3] and merged["meta"]["wall_seconds"] == 15.0
    assert merged["summary"]["sgem"]["test_accuracy"]["mean"] == pytest.approx(0.75)
    assert "SGEM ahead on 2/2 seeds" in md.read_text()
    (tmp_path / "images_main_c.json").write_text(json.dumps(_part(a, "c", 1.0)))
    with pytest.raises(SgemUserError, match="disjoint seeds"):
        images_tables.combine(["a", "c"], tmp_path, "ac")
    with pytest.raises(SgemUserError, match="does not exist"):
        images_tables.combine(["a", "missing"], tmp_path, "am")
