"""Observations: (architecture, training mask, per-cluster loss vector) triples.

Kept in memory here; every observation is also appended to the run directory's
observations.jsonl the moment it exists (see `rundir.RunDirectory`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .space.arch import Arch


@dataclass(frozen=True)
class Observation:
    arch: Arch
    mask: np.ndarray  # (M,) bool: the clusters it was trained on
    losses: np.ndarray  # (M,) mean validation NLL per cluster
    seconds: float
    seed: int
    phase: str  # "init", "s-step", "incumbent", "final"
    iteration: int

    def to_json(self) -> dict:
        return {
            "arch": self.arch.to_json(),
            "mask": "".join("1" if b else "0" for b in self.mask),
            "losses": [round(float(v), 6) for v in self.losses],
            "seconds": round(self.seconds, 4),
            "seed": self.seed,
            "phase": self.phase,
            "iteration": self.iteration,
        }


@dataclass
class ObservationStore:
    n_clusters: int
    observations: list[Observation] = field(default_factory=list)

    def add(self, obs: Observation) -> None:
        if obs.losses.shape != (self.n_clusters,) or obs.mask.shape != (self.n_clusters,):
            raise ValueError("observation mask and losses must have one entry per cluster")
        self.observations.append(obs)

    def __len__(self) -> int:
        return len(self.observations)

    @property
    def archs(self) -> list[Arch]:
        return [o.arch for o in self.observations]

    @property
    def masks(self) -> np.ndarray:
        return np.stack([o.mask for o in self.observations]).astype(np.float64)

    @property
    def losses(self) -> np.ndarray:
        return np.stack([o.losses for o in self.observations])

    def lookup(self, arch: Arch, mask: np.ndarray) -> Observation | None:
        mask = np.asarray(mask, dtype=bool)
        for o in self.observations:
            if o.arch == arch and np.array_equal(o.mask, mask):
                return o
        return None

    def on_mask(self, mask: np.ndarray) -> list[Observation]:
        mask = np.asarray(mask, dtype=bool)
        return [o for o in self.observations if np.array_equal(o.mask, mask)]
