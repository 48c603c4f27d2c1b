"""A finished MoE's `MethodResult` as plain data: its experts' weights and its report's
outputs as tensors, the rest as JSON; written and read back as one safetensors file whose
metadata names what it was kept for. What `sgem.run.kept_final` (the final MoE) and
`sgem.run.kept_leaderboard` (the model the leaderboard chose to save) keep for a resume.
Nothing in such a file is executed; one that is damaged or kept for something else is not
trusted (`read_kept` says why, and the caller trains again)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ..atomic import write_atomic
from ..final.moe_fit import MoEReport
from ..methods.result import MethodResult
from ..moe.artifact import json_safe
from ..moe.averaged import AveragedExpert, n_networks
from ..moe.cluster_gated import ClusterGatedMoE
from ..search.sgem import SearchResult
from ..space.arch import Arch
from ..train.trainer import Trainer

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


def write_kept(path: Path, key: str, doc: dict, tensors: dict[str, torch.Tensor]) -> None:
    """`doc` (JSON) and `tensors` as one safetensors file, `key` in its metadata; atomic."""
    from safetensors.torch import save

    metadata = {"kept": json.dumps(json_safe(doc)), "key": key}
    write_atomic(path, save(tensors, metadata=metadata))


def read_kept(path: Path, key: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """(doc, tensors) of a file `write_kept` wrote for `key`; ValueError or a safetensors
    error where it was kept for another key or is damaged."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
    if metadata.get("key", "") != key:
        raise ValueError("kept for another search")
    return json.loads(metadata["kept"]), tensors


def encode_result(result: MethodResult, prefix: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """A cluster-gated MoE's `MethodResult` (with its report and search result) as (JSON
    doc, tensors named under `prefix`)."""
    if result.moe is None or result.report is None or result.search is None:
        raise ValueError("only a final MoE with its report and search result can be kept")
    if result.fitted is not None or result.test_output is not None or result.val_output is not None:
        raise ValueError("a final MoE keeps its outputs in its report")
    tensors: dict[str, torch.Tensor] = {}
    pairs = list(zip(result.moe.experts, result.moe.used, strict=True))
    for k, (expert, used) in enumerate(pairs):
        if used:
            for name, t in expert.state_dict().items():
                tensors[f"{prefix}expert{k}.{name}"] = t.detach().to("cpu").clone().contiguous()
    report = result.report
    if report.output is not None:
        tensors[f"{prefix}report.output"] = report.output.detach().to("cpu").contiguous()
    for k, v in enumerate(report.val_outputs or []):
        if v is not None:
            tensors[f"{prefix}report.val_output{k}"] = torch.from_numpy(np.ascontiguousarray(v))
    search = result.search
    tensors[f"{prefix}search.routing"] = torch.as_tensor(np.ascontiguousarray(search.routing))
    doc = {
        "result": {k: getattr(result, k) for k in _RESULT_FIELDS},
        "assignment": [int(a) for a in np.asarray(result.assignment)],
        "architectures": [a.to_json() for a in result.architectures or []],
        "used": list(result.moe.used),
        "networks": [n_networks(e) if u else 0 for e, u in pairs],
        "moe_assignment": [int(a) for a in result.moe.assignment.cpu()],
        "report": _report_doc(report),
        "search": {
            "assignment": [int(a) for a in np.asarray(search.assignment)],
            "architectures": [a.to_json() for a in search.architectures],
        }
        | {k: getattr(search, k) for k in _SEARCH_FIELDS},
    }
    return doc, tensors


def decode_result(
    doc: dict, tensors: dict, prefix: str, trainer: Trainer, searched: SearchResult
) -> MethodResult:
    """The `MethodResult` `encode_result` wrote, its networks built by `trainer` (on its
    device) and its search result given `searched`'s trace and store."""
    own = {k[len(prefix) :]: t for k, t in tensors.items() if k.startswith(prefix)}
    archs = [trainer.space.validate(Arch.from_json(a)) for a in doc["architectures"]]
    experts: list[torch.nn.Module | None] = []
    for k, (arch, used, n) in enumerate(zip(archs, doc["used"], doc["networks"], strict=True)):
        if not used:
            experts.append(None)
            continue
        with torch.random.fork_rng(devices=[]):  # building draws throwaway weights
            nets = [trainer.build(arch) for _ in range(int(n))]
        net = nets[0] if len(nets) == 1 else AveragedExpert(nets, trainer.task.loss)
        head = f"expert{k}."
        net.load_state_dict({n[len(head) :]: t for n, t in own.items() if n.startswith(head)})
        experts.append(net.to(trainer.device))
    moe = ClusterGatedMoE(experts, np.asarray(doc["moe_assignment"]), archs).to(trainer.device)
    s = doc["search"]
    search = replace(
        searched,
        assignment=np.asarray(s["assignment"]),
        architectures=[Arch.from_json(a) for a in s["architectures"]],
        routing=own["search.routing"].numpy(),
        **{k: s[k] for k in _SEARCH_FIELDS},
    )
    return MethodResult(
        **doc["result"],
        assignment=np.asarray(doc["assignment"]),
        architectures=archs,
        report=_report(doc["report"], own),
        moe=moe,
        search=search,
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


__all__ = ["decode_result", "encode_result", "read_kept", "write_kept"]
