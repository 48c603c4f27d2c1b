"""Shared fixtures.

The unit-test modules listed in SINGLE_THREADED run torch on one thread (tiny tensors: extra
threads only add overhead, and spin badly on a loaded machine). Torch's thread count is left
alone everywhere else: end-to-end modules compare in-process runs with subprocess runs bit for
bit, and a different thread count in the two could break that.

Tests that read the real offline data of the shared data directory (`../shared/data` beside
the checkout, or `$SGEM_DATA`; `$SGEM_TIMESERIES_DATA` / `$SGEM_IMAGE_DATA` per kind) carry
``@pytest.mark.requires_shared_data("timeseries")`` (or ``"images"``), or a fixture that
requests `shared_timeseries_dir` / `shared_image_dir`: on a clone without that directory they
skip, the reason naming the directory and the files missing there.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import SMALL_SURROGATE, TOY_SMOKE, TOY_SMOKE_SEED, random_masks, synthetic_losses

from sgem.data.images import OFFLINE_IMAGE_DIR
from sgem.data.timeseries import OFFLINE_FILES, OFFLINE_TIMESERIES_DIR
from sgem.space import TabularSpace
from sgem.surrogate import Surrogate

SINGLE_THREADED = {
    "test_arch",
    "test_baselines",
    "test_darts_baselines",
    "test_learnable_gate",
    "test_losses",
    "test_masks",
    "test_objective",
    "test_routing",
    "test_surrogate",
    "test_task_validation",
    "test_trainer_modes",
}


#: kind -> (directory, the files of it the tests read)
SHARED_DATA: dict[str, tuple[Path, tuple[str, ...]]] = {
    "timeseries": (Path(OFFLINE_TIMESERIES_DIR), tuple(OFFLINE_FILES.values())),
    "images": (
        Path(OFFLINE_IMAGE_DIR),
        (
            "cifar10_subset_train.npz",
            "cifar10_subset_test.npz",
            "t10k-images-idx3-ubyte.gz",
            "t10k-labels-idx1-ubyte.gz",
        ),
    ),
}


def missing_shared_data(kind: str, files: tuple[str, ...] | None = None) -> str | None:
    """Why the shared `kind` data cannot be read (a skip reason naming the directory), or None
    when `files` (default: all the tests read) are there."""
    directory, wanted = SHARED_DATA[kind]
    absent = [f for f in (files or wanted) if not (directory / f).is_file()]
    if not absent:
        return None
    env = "SGEM_TIMESERIES_DATA" if kind == "timeseries" else "SGEM_IMAGE_DATA"
    return (
        f"shared {kind} data absent: {directory} lacks {', '.join(absent)} (point $SGEM_DATA "
        f"or ${env} at the shared data to run this test)"
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "requires_shared_data(kind, files=None): skip unless the shared offline data of kind "
        "'timeseries' or 'images' (optionally only the given file names) is present",
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        for mark in item.iter_markers("requires_shared_data"):
            reason = missing_shared_data(*mark.args, **mark.kwargs)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
                break


@pytest.fixture(scope="session")
def shared_timeseries_dir() -> Path:
    """The directory of the offline time-series stand-ins; skips the test when absent."""
    reason = missing_shared_data("timeseries")
    if reason:
        pytest.skip(reason)
    return SHARED_DATA["timeseries"][0]


@pytest.fixture(scope="session")
def shared_image_dir() -> Path:
    """The directory of the offline image files; skips the test when absent."""
    reason = missing_shared_data("images")
    if reason:
        pytest.skip(reason)
    return SHARED_DATA["images"][0]


@contextlib.contextmanager
def torch_threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True, scope="module")
def _single_threaded_unit_tests(request):
    # module scope, so that it also covers the modules' own module-scoped fixtures
    if request.module.__name__.rpartition(".")[2] in SINGLE_THREADED:
        with torch_threads(1):
            yield
    else:
        yield


@pytest.fixture(scope="session")
def toy_smoke_run(tmp_path_factory) -> tuple[Path, dict]:
    """One finished `sgem run toy` of `TOY_SMOKE` (its directory and result), run once for
    every test that needs a finished run (a run takes about 17 s on two cores): read it as
    it is, or change a `copy_run` of it."""
    from sgem.run.pipeline import run_experiment

    out = tmp_path_factory.mktemp("toy-smoke") / "run"
    result = run_experiment(
        "toy", seed=TOY_SMOKE_SEED, out=out, progress=False, config_file=TOY_SMOKE
    )
    return out, result


@pytest.fixture(scope="session")
def tabular_space() -> TabularSpace:
    return TabularSpace(n_nodes=2)


@pytest.fixture(scope="session")
def fitted_surrogate(tabular_space: TabularSpace) -> Surrogate:
    """A small surrogate over M=5 clusters fitted on 30 random observations."""
    rng = np.random.default_rng(123)
    m = 5
    archs = tabular_space.sample_many(30, rng)
    masks = random_masks(30, m, rng)
    losses = synthetic_losses(archs, masks, rng)
    with torch_threads(1):
        surrogate = Surrogate(tabular_space, m, SMALL_SURROGATE, seed=0)
        surrogate.fit(archs, masks, losses, seed=0)
    return surrogate
