"""A latency model of candidate training, for measuring how a search scales out.

On paper-scale image or forecasting runs a candidate takes minutes on a GPU; what limits
the search there is whether the workers are kept busy, not the arithmetic. `LatencyModel`
stands in for the real trainer in any executor (`trainer_factory=LatencyModel(...)`): each
training sleeps a set time (no compute, so many fit on a few cores; `jitter` spreads it
by a fixed per-job fraction, as real candidates differ) and returns a deterministic
synthetic loss vector that gives the search something real to find:

* the clusters fall in two groups (the task's oracle partition, else even / odd ids), and
  each group prefers its own set of ops: the fraction of a cell's nodes using them lowers
  the group's loss;
* a cluster trained on a mask mixed with the other group loses accuracy in proportion to
  the other group's share of the mask (so pure masks, i.e. the right routing, win);
* clusters outside the mask are far worse (the mask's experts never saw them);
* a small hash of (architecture, cluster) adds a fixed, seed-free wrinkle.

It is picklable (a frozen dataclass of plain values) so it travels to process and Ray
workers; it never touches the task's arrays beyond its cluster sizes and oracle partition.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from ..space.arch import Arch
from ..train.trainer import TrainOutcome

#: ops each group of clusters prefers (the toy's linear and ring groups, tabular op names)
GROUP_OPS: tuple[tuple[str, ...], tuple[str, ...]] = (
    ("linear", "shift", "identity"),
    ("rbf", "square"),
)


def _uniform(text: str) -> float:
    """A fixed pseudo-random number in [0, 1) per text."""
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "little") / 2**32


def _wrinkle(arch: Arch, cluster: int) -> float:
    return _uniform(f"{arch.key}|{cluster}")


def job_latency(seconds: float, jitter: float, arch: Arch, mask: np.ndarray) -> float:
    """How long (arch, mask) trains: `seconds` times a fixed factor in [1 - jitter,
    1 + jitter] drawn from the job's content (the same on every worker and run)."""
    bits = "".join("1" if b else "0" for b in np.asarray(mask, dtype=bool))
    return seconds * (1.0 + jitter * (2.0 * _uniform(f"{arch.key}|{bits}|latency") - 1.0))


def synthetic_losses(
    arch: Arch,
    mask: np.ndarray,
    groups: np.ndarray,
    sizes: np.ndarray,
    group_ops: tuple[tuple[str, ...], ...] = GROUP_OPS,
) -> np.ndarray:
    """The loss vector (one per cluster) of `arch` trained on `mask` (see the module)."""
    mask = np.asarray(mask, dtype=bool)
    groups = np.asarray(groups, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.float64)
    weight = sizes[mask].sum()
    out = np.empty(len(mask))
    for c in range(len(mask)):
        preferred = group_ops[int(groups[c]) % len(group_ops)]
        fit = sum(op in preferred for op in arch.ops) / arch.n_nodes
        noise = 0.05 * _wrinkle(arch, c)
        if mask[c]:
            other = sizes[mask & (groups != groups[c])].sum() / max(weight, 1e-12)
            out[c] = 0.2 + 0.6 * (1.0 - fit) + 0.8 * other + noise
        else:
            out[c] = 1.5 + 0.3 * (1.0 - fit) + noise
    return out


class LatencyTrainer:
    """Sleeps `job_latency` per candidate, then returns `synthetic_losses`."""

    def __init__(self, task, space, config, seconds: float, jitter: float = 0.0) -> None:
        if seconds < 0 or not 0 <= jitter <= 1:
            raise ValueError(f"need seconds >= 0 and jitter in [0, 1], got {seconds}, {jitter}")
        self.task, self.space, self.config = task, space, config
        self.device = "cpu"
        self.seconds, self.jitter = float(seconds), float(jitter)
        oracle = getattr(task, "oracle_partition", None)
        m = task.n_clusters
        self.groups = np.arange(m) % 2 if oracle is None else np.asarray(oracle)
        self.sizes = np.asarray(task.cluster_sizes, dtype=np.float64)

    def train(self, arch: Arch, mask: np.ndarray, seed: int) -> TrainOutcome:
        start = time.perf_counter()
        time.sleep(job_latency(self.seconds, self.jitter, arch, mask))
        losses = synthetic_losses(arch, mask, self.groups, self.sizes)
        return TrainOutcome(losses, time.perf_counter() - start)


@dataclass(frozen=True)
class LatencyModel:
    """A `TrainerFactory` (see `sgem.execution.jobs`): every candidate takes `seconds` of sleep,
    spread by up to +-`jitter` (a fraction) per job."""

    seconds: float = 1.0
    jitter: float = 0.0

    def __call__(self, task, space, train_config, device: str = "cpu") -> LatencyTrainer:
        return LatencyTrainer(task, space, train_config, self.seconds, self.jitter)


__all__ = ["GROUP_OPS", "LatencyModel", "LatencyTrainer", "job_latency", "synthetic_losses"]
