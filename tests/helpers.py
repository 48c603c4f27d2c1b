"""Test helpers shared by several test modules (imported as a plain module)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from sgem.space import Arch
from sgem.surrogate import SurrogateConfig

#: a seconds-long search for end-to-end fits (the run config's `search` section)
TINY_SEARCH: dict = {
    "n_iterations": 2,
    "n_init": 8,
    "pool_size": 20,
    "mc_masks": 3,
    "routing_steps": 5,
    "acquisitions_per_expert": 1,
    "explore_every": 2,
    "refit_budget": 1,
    "final_candidates": 1,
    "finalist_budget": 1,
    "final_steps": 30,
    "train": {"steps": 20},
    "surrogate": {"epochs_first": 20, "epochs_refit": 5, "mc_samples": 3},
}

# a small, quick surrogate for tests
SMALL_SURROGATE = SurrogateConfig(
    hidden=16, gcn_layers=2, dropout=0.1, epochs_first=150, epochs_refit=50, mc_samples=8
)


def synthetic_losses(archs: list[Arch], masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A learnable (arch, mask) -> per-cluster loss rule: training on a cluster lowers its
    loss, and 'rbf' helps the first half of the clusters."""
    masks = np.asarray(masks, dtype=np.float64)
    n, m = masks.shape
    uses_rbf = np.array([a.uses("rbf") for a in archs], dtype=np.float64)[:, None]
    first_half = (np.arange(m) < m // 2).astype(np.float64)[None, :]
    noise = 0.02 * rng.normal(size=(n, m))
    return 1.5 - 0.8 * masks - 0.6 * uses_rbf * first_half + noise


def random_masks(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    masks = rng.random((n, m)) < 0.5
    masks[~masks.any(axis=1), 0] = True  # a training mask is never empty
    return masks.astype(np.float64)


def three_domain_series() -> dict[str, list[np.ndarray]]:
    """Three small series of different kinds (a daily cycle, a random walk, a trend): a
    forecasting task with structure, small enough for unit tests of the final training."""
    rng = np.random.default_rng(0)
    t = np.arange(400)
    return {
        "cycle": [10 + 3 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 0.3, 400)],
        "walk": [50 + np.cumsum(rng.normal(0, 1, 400))],
        "trend": [1 + 0.05 * t + rng.normal(0, 0.5, 400)],
    }


def small_ts_task(
    n_windows: int = 240, n_clusters: int = 6, context: int = 24, horizon: int = 6, seed: int = 0
):
    """A forecasting task of `three_domain_series`: the final stage's unit-test task."""
    from sgem.data.timeseries import make_timeseries_task

    return make_timeseries_task(
        three_domain_series(),
        n_windows=n_windows,
        n_clusters=n_clusters,
        context=context,
        horizon=horizon,
        seed=seed,
    )


def short_train():
    """Five Adam steps: enough to move weights in a unit test of the final stage."""
    from sgem.train.trainer import TrainConfig

    return TrainConfig(steps=5, lr=3e-3, batch_size=32)


def small_ts_space():
    """A two-node forecasting cell space of cheap ops."""
    from sgem.space.timeseries import TimeSeriesSpace

    return TimeSeriesSpace(
        op_names=("moving_average", "dilated_conv", "linear_trend", "skip"),
        n_nodes=2,
        channels=4,
        patch_len=8,
    )


#: the seconds-long toy config the end-to-end tests run, and the seed of `toy_smoke_run`
TOY_SMOKE = Path(__file__).resolve().parents[1] / "configs" / "toy-smoke.yaml"
TOY_SMOKE_SEED = 5


def toy_smoke_args(out: Path) -> list[str]:
    """`sgem run toy` of `TOY_SMOKE` (seed `TOY_SMOKE_SEED`) into `out`, as CLI arguments."""
    seed = str(TOY_SMOKE_SEED)
    return ["run", "toy", "--seed", seed, "--out", str(out), "--config", str(TOY_SMOKE), "--quiet"]


def copy_run(run: Path, to: Path) -> Path:
    """A copy of the run directory `run` at `to`, for a test that changes it."""
    shutil.copytree(run, to)
    return to


def two_cloud_table(root: Path) -> tuple[Path, Path]:
    """A 600-row CSV of two clouds with a label that bends differently in each (a table whose
    fit has a search, a final MoE and a combination to keep), and a config of a seconds-long
    search: (train.csv, cfg.yaml) under `root`."""
    import pandas as pd
    import yaml

    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(-3, 1, (300, 2)), rng.normal(3, 1, (300, 2))]
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1]})
    frame["label"] = np.where(x[:, 1] > np.where(x[:, 0] < 0, -3.0, 3.0), "p", "n")
    frame.to_csv(root / "train.csv", index=False)
    search = {**TINY_SEARCH, "n_iterations": 3, "final_steps": 200}
    (root / "cfg.yaml").write_text(yaml.safe_dump({"search": search}))
    return root / "train.csv", root / "cfg.yaml"
