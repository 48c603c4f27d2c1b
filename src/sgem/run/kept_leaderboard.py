"""The leaderboard's outcome, kept in the run directory: a run killed in its calibration,
saving or figures resumes without fitting the leaderboard's members again.

Why: the leaderboard trains networks of its own (the global networks of the experts' cells,
their out-of-fold fits on a small table, the MoE's validation fits where its experts were
refitted) and decides the saved model from them; on 400 hourly series one global network
took 40 s. A resume after it used to fit them again, under a time budget past its fence, so
a member it had fitted could be cut and the saved model could change. Kept: the model to
save (the MoE with selective routing, where it is not the final MoE itself), the board,
the validation outputs the calibration is fit on and the combination's description and
member arrays (`sgem.moe.combination`, rebuilt as `sgem.load` rebuilds it).

One safetensors file (`sgem.run.kept_moe`), trusted only for the final MoE it was decided
on: the final stages remove it before they train anything (`forget_leaderboard`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from ..leaderboard.contest import Contest
from ..methods.result import MethodResult
from ..moe.combination import Combination
from ..train.trainer import Trainer
from .kept_moe import decode_result, encode_result, read_kept, write_kept

log = logging.getLogger(__name__)

#: the leaderboard's outcome as kept, in the run directory
LEADERBOARD_FILE = "leaderboard.safetensors"


def write_leaderboard(path: Path, key: str, contest: Contest, final: MethodResult) -> None:
    """`contest` (decided on `final`) as one safetensors file, `key` in its metadata; a
    failure to write is a warning (a resume then fits the leaderboard again)."""
    try:
        doc: dict = {"report": contest.report, "shipped_is_final": contest.final is final}
        tensors: dict[str, torch.Tensor] = {}
        if contest.final is not final:
            doc["shipped"], tensors = encode_result(contest.final, "shipped.")
        if contest.validation is not None:
            outputs, has = contest.validation
            tensors["validation.outputs"] = torch.from_numpy(np.ascontiguousarray(outputs))
            tensors["validation.has"] = torch.from_numpy(np.ascontiguousarray(has, dtype=bool))
        if contest.combination is not None:
            _, state, arrays, scores = contest.combination
            doc["combination"] = {"state": state, "scores": scores}
            for name, a in arrays.items():
                tensors[f"combination.{name}"] = torch.from_numpy(np.ascontiguousarray(a))
        write_kept(path, key, doc, tensors)
    except Exception as err:  # keeping is for a resume: the run goes on without it
        log.warning("the leaderboard could not be kept for a resume (%s)", err)


def read_leaderboard(path: Path, key: str, trainer: Trainer, final: MethodResult) -> Contest | None:
    """The leaderboard `write_leaderboard` kept for `key` and `final`, or None (it is fitted
    again) where there is no file, or it is unreadable or kept for another search."""
    if not path.exists():
        return None
    try:
        doc, tensors = read_kept(path, key)
        shipped = final
        if not doc["shipped_is_final"]:
            assert final.search is not None
            shipped = decode_result(doc["shipped"], tensors, "shipped.", trainer, final.search)
        validation = None
        if "validation.outputs" in tensors:
            has = tensors["validation.has"].numpy().astype(bool)
            validation = (tensors["validation.outputs"].numpy(), has)
        combination = None
        if "combination" in doc:
            head = "combination."
            arrays = {k[len(head) :]: t.numpy() for k, t in tensors.items() if k.startswith(head)}
            state, scores = doc["combination"]["state"], doc["combination"]["scores"]
            combination = (Combination.from_state(state, arrays), state, arrays, scores)
        return Contest(doc["report"], shipped, validation, combination)
    except Exception as err:  # any damage: fit it again rather than trust or crash
        log.warning("the kept leaderboard is unusable (%s): fitting it again", err)
        return None


def forget_leaderboard(path: Path) -> None:
    """Remove a kept leaderboard: the final MoE it was decided on is being trained again."""
    path.unlink(missing_ok=True)


__all__ = ["LEADERBOARD_FILE", "forget_leaderboard", "read_leaderboard", "write_leaderboard"]
