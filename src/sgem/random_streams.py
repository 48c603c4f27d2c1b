"""Named random streams: every random generator of a run derives from the run's seed here.

A numpy stream is `np.random.default_rng([seed, stream])` (numpy's SeedSequence keeps the
streams of one seed independent). Two parts of the code draw the same numbers only when they
name the same stream, on purpose: e.g. the baselines that need "a random partition of the
clusters" (best single architecture, the decomposition's random split, DARTS x K) all use
`Stream.BASELINE_PARTITION`, so they compare on one and the same routing.

The values are the literals the code used before they were named: changing one changes
every result drawn from it.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Stream(IntEnum):
    """The second word of a numpy stream's seed, `default_rng([seed, stream])`."""

    #: baselines: the random search for the best single architecture on all clusters
    BEST_SINGLE_SEARCH = 1
    #: baselines: the random partition shared by bestarch, decomposition (random split),
    #: DARTS x K
    BASELINE_PARTITION = 2
    #: Random-MoE: its partition and architectures
    RANDOM_MOE = 3
    #: NAS-MoE: its random partition, then its per-region random search
    NAS_MOE_PARTITION = 4
    NAS_MOE_SEARCH = 5
    #: the oracle MoE's per-region random search
    ORACLE_SEARCH = 6
    #: analysis: the random architectures of the measured architecture spread
    ARCH_SPREAD = 11
    #: user tables: the train / validation / test permutation
    USER_TASK_SPLIT = 31
    #: time budget: the pilot candidate whose training is timed
    BUDGET_PILOT = 77
    #: scaling mixtures: the rotation of each group (shared by training and test draws)
    MIXTURE_LAYOUT = 7
    #: forecasting: the domain-stratified train / validation / test split of the windows
    SERIES_SPLIT = 7919
    #: the toy mixture's test sample (the training sample uses the plain seed)
    TOY_TEST = 1_000_003
    #: the built-in image embedding's random filters
    EMBEDDING_FILTERS = 0x5EED


def stream_rng(seed: int, stream: Stream | int) -> np.random.Generator:
    """The numpy generator of `stream` under `seed`."""
    return np.random.default_rng([int(seed), int(stream)])


def series_window_rng(seed: int, domain: int) -> np.random.Generator:
    """Forecasting: the windows picked from domain number `domain` (one stream per domain)."""
    return np.random.default_rng([int(seed), int(domain)])


def mixture_rng(seed: int, n_groups: int) -> np.random.Generator:
    """Scaling mixtures: the training sample of a mixture of `n_groups` groups (one stream
    per group count, so K = 4 and K = 8 at one seed draw independently)."""
    return np.random.default_rng([seed, n_groups])


def mixture_test_rng(seed: int, n_groups: int) -> np.random.Generator:
    """Scaling mixtures: the test sample, drawn like the toy's (`Stream.TOY_TEST`)."""
    return np.random.default_rng([seed, n_groups, int(Stream.TOY_TEST)])


def routing_seed(seed: int, iteration: int) -> int:
    """The routing M-step's torch seed at EM iteration `iteration`."""
    return seed * 7919 + iteration


def acquisition_seed(seed: int, iteration: int, expert: int) -> int:
    """The MC-dropout seed of the S-step's surrogate draws for `expert` at `iteration`."""
    return seed * 104_729 + iteration * 31 + expert


def expert_seed(seed: int, expert: int) -> int:
    """The cluster-gated MoE: the torch seed of final expert `expert`'s training (and of the
    validation-length run that picks its length)."""
    return seed * 101 + expert


def gate_expert_seed(seed: int, expert: int) -> int:
    """The learnable-gate MoE: the torch seed of expert `expert`'s initial weights (the gate
    itself uses `gate_expert_seed(seed, n_experts)`); the same value as `expert_seed`."""
    return seed * 101 + expert


__all__ = [
    "Stream",
    "acquisition_seed",
    "expert_seed",
    "gate_expert_seed",
    "mixture_rng",
    "mixture_test_rng",
    "routing_seed",
    "series_window_rng",
    "stream_rng",
]
