"""The final MoE, kept in the run directory once trained: a resumed run reads it instead of
training it again.

Why: a kill in the stages after the final MoE (its reference networks, seed rounds, the
leaderboard, calibration, saving, figures) made `sgem resume` train the final stage again,
and under a time budget in the seconds its clock had left: a fit killed while drawing its
figures resumed to a final stage planned down to the last few seconds, a cheaper model than
the one it had finished. The final MoE is now kept after each of those stages (its experts'
weights, its report, the partition and cells it follows, the protocol it was trained with),
so a resume continues from the last one that finished.

One safetensors file: the experts' weights and the report's outputs as tensors, the rest as
JSON in its metadata. Nothing in it is executed. It is trusted only for the search it was
trained from (`final_key`: the run's fingerprint and the searched partition and cells); a
damaged file, or one for another search, is ignored and the final stage trains again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..atomic import write_atomic
from ..final.moe_fit import MoEReport
from ..final.protocol import FinalProtocol
from ..methods.result import MethodResult
from ..moe.averaged import AveragedExpert, n_networks
from ..moe.cluster_gated import ClusterGatedMoE
from ..search.sgem import SearchResult
from ..space.arch import Arch
from ..train.trainer import Trainer

log = logging.getLogger(__name__)

#: the final MoE as last kept, in the run directory
FINAL_FILE = "final_stage.safetensors"

#: the stages whose outcome the kept final MoE holds, in run order
KEPT_STAGES = ("final_stage", "references", "seed_rounds")

_SEARCH_FIELDS = (  # a SearchResult's plain fields (its trace and store: the resumed search's)
    "oracle_match",
    "n_trained",
    "seconds",
    "region_val_losses",
    "failures",
    "selection",
    "timing",
)
_RESULT_FIELDS = (  # a MethodResult's plain fields
    "method",
    "seed",
    "seconds",
    "n_out",
    "n_trained",
    "uses_domain_labels",
    "crps_samples",
    "kind",
    "note",
    "shippable",
    "extra",
)


@dataclass
class KeptFinal:
    """The final stage's outcome as far as `done` goes: the final MoE (`final`, its `search`
    the partition and cells it follows), the protocol it was trained with, whether the
    budget's fence cut it, its stages' seconds and
    what a budget's plan recorded in them (for result.json)."""

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
    from safetensors.torch import save

    final = kept.final
    if final.moe is None or final.report is None or final.search is None:
        raise ValueError("only a final MoE with its report and search result can be kept")
    if final.fitted is not None or final.test_output is not None or final.val_output is not None:
        raise ValueError("a final MoE keeps its outputs in its report")
    tensors: dict[str, torch.Tensor] = {}
    pairs = list(zip(final.moe.experts, final.moe.used, strict=True))
    for k, (expert, used) in enumerate(pairs):
        if used:
            for name, t in expert.state_dict().items():
                tensors[f"expert{k}.{name}"] = t.detach().to("cpu").clone().contiguous()
    report = final.report
    if report.output is not None:
        tensors["report.output"] = report.output.detach().to("cpu").contiguous()
    for k, v in enumerate(report.val_outputs or []):
        if v is not None:
            tensors[f"report.val_output{k}"] = torch.from_numpy(np.ascontiguousarray(v))
    search = final.search
    tensors["search.routing"] = torch.as_tensor(np.ascontiguousarray(search.routing))
    doc = {
        "done": list(kept.done),
        "final_cut": kept.final_cut,
        "seconds": kept.seconds,
        "plan_records": kept.plan_records,
        "protocol": dataclasses.asdict(kept.protocol),
        "result": {k: getattr(final, k) for k in _RESULT_FIELDS},
        "assignment": [int(a) for a in np.asarray(final.assignment)],
        "architectures": [a.to_json() for a in final.architectures or []],
        "used": list(final.moe.used),
        "networks": [n_networks(e) if u else 0 for e, u in pairs],
        "moe_assignment": [int(a) for a in final.moe.assignment.cpu()],
        "report": _report_doc(report),
        "search": {
            "assignment": [int(a) for a in np.asarray(search.assignment)],
            "architectures": [a.to_json() for a in search.architectures],
        }
        | {k: getattr(search, k) for k in _SEARCH_FIELDS},
    }
    metadata = {"final": json.dumps(_plain(doc)), "key": key}
    write_atomic(path, save(tensors, metadata=metadata))


def read_final(path: Path, key: str, trainer: Trainer, searched: SearchResult) -> KeptFinal | None:
    """The final MoE `write_final` kept for `key`, its networks built by `trainer` and its
    search result given `searched`'s trace and store; None (the final stage trains again)
    where there is no file, or it is unreadable or was kept for another search."""
    from safetensors import safe_open

    if not path.exists():
        return None
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
        if metadata.get("key", "") != key:
            raise ValueError("kept for another search")
        return _kept(json.loads(metadata["final"]), tensors, trainer, searched)
    except Exception as err:  # any damage: train it again rather than trust or crash
        log.warning("the kept final MoE is unusable (%s): training it again", err)
        return None


def _kept(doc: dict, tensors: dict, trainer: Trainer, searched: SearchResult) -> KeptFinal:
    archs = [trainer.space.validate(Arch.from_json(a)) for a in doc["architectures"]]
    experts: list[torch.nn.Module | None] = []
    for k, (arch, used, n) in enumerate(zip(archs, doc["used"], doc["networks"], strict=True)):
        if not used:
            experts.append(None)
            continue
        with torch.random.fork_rng(devices=[]):  # building draws throwaway weights
            nets = [trainer.build(arch) for _ in range(int(n))]
        net = nets[0] if len(nets) == 1 else AveragedExpert(nets, trainer.task.loss)
        prefix = f"expert{k}."
        own = {n[len(prefix) :]: t for n, t in tensors.items() if n.startswith(prefix)}
        net.load_state_dict(own, strict=True)
        experts.append(net.to(trainer.device))
    moe = ClusterGatedMoE(experts, np.asarray(doc["moe_assignment"]), archs)
    report = _report(doc["report"], tensors)
    s = doc["search"]
    search = replace(
        searched,
        assignment=np.asarray(s["assignment"]),
        architectures=[Arch.from_json(a) for a in s["architectures"]],
        routing=tensors["search.routing"].numpy(),
        **{k: s[k] for k in _SEARCH_FIELDS},
    )
    final = MethodResult(
        **doc["result"],
        assignment=np.asarray(doc["assignment"]),
        architectures=archs,
        report=report,
        moe=moe,
        search=search,
    )
    return KeptFinal(
        final,
        FinalProtocol(**doc["protocol"]),
        tuple(doc["done"]),
        bool(doc["final_cut"]),
        {k: float(v) for k, v in doc["seconds"].items()},
        dict(doc["plan_records"]),
    )


def _report_doc(report: MoEReport) -> dict:
    skip = ("output", "val_outputs")
    doc = {
        f.name: getattr(report, f.name) for f in dataclasses.fields(report) if f.name not in skip
    }
    doc["per_domain_test_nll"] = [[int(k), v] for k, v in report.per_domain_test_nll.items()]
    doc["val_outputs"] = None if report.val_outputs is None else len(report.val_outputs)
    return doc


def _report(doc: dict, tensors: dict) -> MoEReport:
    doc = dict(doc)
    doc["per_domain_test_nll"] = {int(k): v for k, v in doc["per_domain_test_nll"]}
    n = doc.pop("val_outputs")
    val_outputs = None
    if n is not None:
        val_outputs = [
            tensors[f"report.val_output{k}"].numpy() if f"report.val_output{k}" in tensors else None
            for k in range(n)
        ]
    return MoEReport(**doc, output=tensors.get("report.output"), val_outputs=val_outputs)


def _plain(obj: Any) -> Any:
    """`obj` with numpy scalars and arrays as JSON's numbers and lists."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


__all__ = ["FINAL_FILE", "KEPT_STAGES", "KeptFinal", "final_key", "read_final", "write_final"]
