"""The image presets through the pipeline: `sgem run images-offline` end to end on a tiny
override (a few seconds on one CPU thread), and the presets agree with the benchmark's YAML."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from sgem.cli import main
from sgem.run.pipeline import preset, run_experiment
from sgem.search.config import SearchConfig

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
RUN_SECTIONS = ("task", "space", "search", "final_epochs", "device", "torch_threads")

TINY = {
    "task": {"n_per_source": 40, "n_clusters": 4, "image_size": 8},
    "space": {"n_cell_nodes": 1, "init_channels": 4},
    "search": {
        "n_iterations": 1,
        "n_init": 4,
        "pool_size": 8,
        "mc_masks": 2,
        "routing_steps": 3,
        "explore_every": 2,
        "refit_budget": 1,
        "final_candidates": 1,
        "finalist_budget": 1,
        "train": {"steps": 3, "batch_size": 16, "eval_batch_size": 64},
        "surrogate": {"epochs_first": 10, "epochs_refit": 3, "mc_samples": 2},
    },
    "final_epochs": 1,
}


@pytest.mark.requires_shared_data("images")
def test_images_offline_end_to_end(tmp_path) -> None:
    config = tmp_path / "images-tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "run"
    result = run_experiment("images-offline", seed=0, out=out, progress=False, config_file=config)
    on_disk = json.loads((out / "result.json").read_text())
    assert on_disk["routing"] == result["routing"]
    assert len(result["routing"]) == 4
    assert set(result["routing"]) <= {0, 1}
    assert 0.0 <= result["oracle_match"] <= 1.0
    assert 0.0 <= result["test_accuracy"] <= 1.0
    assert result["task"] == "cifar10+mnist"
    assert (out / "cluster_representatives.png").stat().st_size > 1_000
    # `sgem plot` redraws both figures of an image run from the run directory alone
    (out / "cluster_representatives.png").unlink()
    assert main(["plot", str(out)]) == 0
    assert (out / "cluster_representatives.png").stat().st_size > 1_000


def test_images_paper_preset_on_tiny_original_files(tmp_path) -> None:
    """The paper's CIFAR-100 + SVHN path end to end on CPU: tiny files in the original
    formats, the preset's AMP / channels-last settings (inactive off CUDA), labels shifted
    to 110 classes."""
    from scipy.io import savemat
    from test_images import rand_images, write_cifar100

    data, n = tmp_path / "data", 100
    bright = rand_images(n, seed=1) // 2 + 128  # two sources that look different
    write_cifar100(data, "train", bright, np.arange(n) % 100)
    dark = (rand_images(n, seed=2) // 2).transpose(1, 2, 3, 0)
    digits = (np.arange(n) % 10 + 1).astype(np.uint8)[:, None]  # 10 means digit 0
    savemat(data / "train_32x32.mat", {"X": dark, "y": digits})
    tiny = copy.deepcopy(TINY)
    tiny["task"].update(directory=str(data), n_per_source=n, image_size=None)
    tiny["device"], tiny["torch_threads"] = "auto", 1
    config = tmp_path / "paper-tiny.yaml"
    config.write_text(yaml.safe_dump(tiny))
    out = tmp_path / "run"
    result = run_experiment("images-paper", seed=0, out=out, progress=False, config_file=config)
    assert result["task"] == "cifar100+svhn"
    assert json.loads((out / "result.json").read_text())["routing"] == result["routing"]
    assert 0.0 <= result["test_accuracy"] <= 1.0
    from sgem.data.images import build_image_task

    task = build_image_task({**tiny["task"], "source": "cifar100+svhn", "n_clusters": 4}, 0)
    assert task.n_classes == 110 and task.input_shape == (3, 32, 32)
    svhn = task.train.source == 1
    assert (task.train.y[svhn] >= 100).all() and (task.train.y[~svhn] < 100).all()


@pytest.mark.parametrize("scale", ["offline", "paper"])
def test_image_presets_match_benchmark_configs(scale: str) -> None:
    cfg = yaml.safe_load((CONFIGS / f"images-{scale}.yaml").read_text())
    expected = {key: cfg[key] for key in RUN_SECTIONS}
    expected["search"] = SearchConfig.from_dict(expected["search"]).to_dict()
    got = preset(f"images-{scale}")  # the packaged preset (src/sgem/presets/)
    assert got == expected and list(got) == list(expected)
