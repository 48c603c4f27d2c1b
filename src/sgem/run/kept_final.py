"""The final MoE, kept in the run directory once trained: a resumed run reads it instead of
training it again.

Why: a kill in the stages after the final MoE (its reference networks, seed rounds, the
leaderboard, calibration, saving, figures) made `sgem resume` train the final stage again,
and under a time budget in the seconds its clock had left: a fit killed while drawing its
figures resumed to a final stage planned down to the last few seconds, a cheaper model than
the one it had finished. The final MoE is now kept after each of those stages (its experts'
weights, its report, the partition and cells it follows, the protocol it was trained with),
so a resume continues from the last one that finished.

One safetensors file (`sgem.run.kept_moe`). It is trusted only for the search it was trained
from (`final_key`: the run's fingerprint and the searched partition and cells); a damaged
file, or one for another search, is ignored and the final stage trains again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..final.protocol import FinalProtocol
from ..methods.result import MethodResult
from ..search.sgem import SearchResult
from ..train.trainer import Trainer
from .kept_moe import decode_result, encode_result, read_kept, write_kept

log = logging.getLogger(__name__)

#: the final MoE as last kept, in the run directory
FINAL_FILE = "final_stage.safetensors"

#: the stages whose outcome the kept final MoE holds, in run order
KEPT_STAGES = ("final_stage", "references", "seed_rounds")


@dataclass
class KeptFinal:
    """The final stage's outcome as far as `done` goes: the final MoE (`final`, its `search`
    the partition and cells it follows), the protocol it was trained with, whether the
    budget's fence cut it, its stages' seconds and what a budget's plan recorded in them
    (for result.json)."""

    final: MethodResult
    protocol: FinalProtocol
    done: tuple[str, ...] = ()
    final_cut: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    plan_records: dict = field(default_factory=dict)


def final_key(fingerprint: str, searched: SearchResult) -> str:
    """What a kept final MoE was trained from: the run (its config's fingerprint) and the
    partition and cells its search returned."""
    doc = {
        "run": fingerprint,
        "assignment": [int(a) for a in np.asarray(searched.assignment)],
        "cells": [a.key for a in searched.architectures],
        "n_trained": int(searched.n_trained),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def write_final(path: Path, key: str, kept: KeptFinal) -> None:
    """`kept` as one safetensors file (one atomic write), with `key` in its metadata."""
    doc, tensors = encode_result(kept.final, "final.")
    doc |= {
        "done": list(kept.done),
        "final_cut": kept.final_cut,
        "seconds": kept.seconds,
        "plan_records": kept.plan_records,
        "protocol": dataclasses.asdict(kept.protocol),
    }
    write_kept(path, key, doc, tensors)


def read_final(path: Path, key: str, trainer: Trainer, searched: SearchResult) -> KeptFinal | None:
    """The final MoE `write_final` kept for `key`, its networks built by `trainer` and its
    search result given `searched`'s trace and store; None (the final stage trains again)
    where there is no file, or it is unreadable or was kept for another search."""
    if not path.exists():
        return None
    try:
        doc, tensors = read_kept(path, key)
        return KeptFinal(
            decode_result(doc, tensors, "final.", trainer, searched),
            FinalProtocol(**doc["protocol"]),
            tuple(doc["done"]),
            bool(doc["final_cut"]),
            {k: float(v) for k, v in doc["seconds"].items()},
            dict(doc["plan_records"]),
        )
    except Exception as err:  # any damage: train it again rather than trust or crash
        log.warning("the kept final MoE is unusable (%s): training it again", err)
        return None


__all__ = ["FINAL_FILE", "KEPT_STAGES", "KeptFinal", "final_key", "read_final", "write_final"]
