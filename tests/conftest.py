"""Shared fixtures.

The unit-test modules listed in SINGLE_THREADED run torch on one thread (tiny tensors: extra
threads only add overhead, and spin badly on a loaded machine). Torch's thread count is left
alone everywhere else: end-to-end modules compare in-process runs with subprocess runs bit for
bit, and a different thread count in the two could break that.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from helpers import SMALL_SURROGATE, random_masks, synthetic_losses

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
