"""The model directory: what a finished run leaves behind for `sgem.load`.

    model/
      model.json                 format + sgem versions, task facts (loss, classes, input
                                 shape), the space config, per expert its architecture and
                                 clusters, the cluster -> expert table, preprocessing
                                 settings, test metrics, and the SHA-256 of both weight files
      experts.safetensors        every trained expert's weights ("expert<k>.<param>")
      preprocessing.safetensors  centroids, standardisation, embedding statistics

Only JSON and safetensors are read back: loading never unpickles or executes anything from
the directory. Paths inside are relative (none are stored), so a copied directory loads
anywhere. A newer format version, a missing file, a changed weight file (checksum), a
weight of the wrong shape or a NaN / infinite value is refused with a message saying which.
model.json's `info` may hold `calibration` (`sgem.final.calibration`: plain numbers);
a model saved without it predicts with its raw outputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.numpy import load_file as load_numpy
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import load_file as load_torch
from safetensors.torch import save_file as save_torch
from torch import nn

from ..atomic import replace_dir
from ..errors import SgemUserError
from ..space.arch import Arch
from ..space.registry import build_space, space_config
from .artifact_checks import (
    RESAVE,
    bad,
    check_doc,
    check_preprocessing,
    check_weights,
    inside,
    on_meta,
)
from .averaged import AveragedExpert, n_networks
from .cluster_gated import ClusterGatedMoE
from .learnable_gate import LearnableGatedMoE, gate_for_shape
from .preprocess import Preprocessor, preprocessor_for_task, preprocessor_from_state

FORMAT = "sgem-model"
FORMAT_VERSION = 1
MODEL_JSON = "model.json"
EXPERTS_FILE = "experts.safetensors"
PREPROCESSING_FILE = "preprocessing.safetensors"
MEMBERS = "members.safetensors"  # a combination's scikit-learn members (optional)


@dataclass
class ModelSpec:
    """Everything about a saved model except its weights (the content of model.json)."""

    loss: str
    input_shape: list[int]
    n_out: int
    space: dict[str, Any]
    assignment: list[int]
    architectures: list[dict]
    preprocessing: dict[str, Any]
    n_classes: int | None = None
    classes: list | None = None
    task_name: str = "custom"
    gate: str = "cluster"
    cluster_sizes: list[int] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_experts(self) -> int:
        return len(self.architectures)

    @property
    def n_clusters(self) -> int:
        return len(self.assignment)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def json_safe(obj: Any) -> Any:
    """`obj` with numpy scalars and arrays as JSON's numbers and lists (keys as text)."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def save_model(
    path: str | os.PathLike,
    spec: ModelSpec,
    experts: list[nn.Module | None] | LearnableGatedMoE,
    preprocessor: Preprocessor,
    members: dict[str, np.ndarray] | None = None,
) -> Path:
    """Write a model directory at `path` (replaced whole, through a temporary sibling, so a
    crash never leaves half a model). Returns the path. `members`: the arrays of a saved
    combination's scikit-learn members (`sgem.moe.combination`), written to MEMBERS_FILE."""
    from .. import __version__

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would make a shared model unreadable to others
    weights: dict[str, torch.Tensor] = {}
    if isinstance(experts, LearnableGatedMoE):  # one module: gate and experts together
        for name, tensor in experts.state_dict().items():
            weights[f"gated.{name}"] = tensor.detach().to("cpu").clone().contiguous()
        trained, networks = [True] * spec.n_experts, [1] * spec.n_experts
    else:
        for k, expert in enumerate(experts):
            if expert is None:
                continue
            for name, tensor in expert.state_dict().items():
                weights[f"expert{k}.{name}"] = tensor.detach().to("cpu").clone().contiguous()
        trained = [e is not None for e in experts]
        networks = [n_networks(e) for e in experts]
    save_torch(weights, str(tmp / EXPERTS_FILE))
    state, arrays = preprocessor.state()
    save_numpy(
        {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in arrays.items()},
        str(tmp / PREPROCESSING_FILE),
    )
    doc: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "sgem_version": __version__,
        "task": {
            "name": spec.task_name,
            "loss": spec.loss,
            "input_shape": list(spec.input_shape),
            "n_out": spec.n_out,
            "n_classes": spec.n_classes,
            "classes": spec.classes,
        },
        "space": spec.space,
        "gate": spec.gate,
        "assignment": [int(a) for a in spec.assignment],
        "cluster_sizes": [int(s) for s in spec.cluster_sizes],
        "experts": [
            {
                "index": k,
                "architecture": arch,
                "key": Arch.from_json(arch).key,
                "clusters": [m for m, a in enumerate(spec.assignment) if a == k],
                "trained": trained[k],
                "networks": networks[k],  # more than 1: averaged (`sgem.moe.averaged`)
            }
            for k, arch in enumerate(spec.architectures)
        ],
        "preprocessing": state,
        "metrics": spec.metrics,
        "info": spec.info,
        "files": {
            EXPERTS_FILE: _sha256(tmp / EXPERTS_FILE),
            PREPROCESSING_FILE: _sha256(tmp / PREPROCESSING_FILE),
        },
    }
    if members is not None:
        save_numpy({k: np.ascontiguousarray(v) for k, v in members.items()}, str(tmp / MEMBERS))
        doc["files"][MEMBERS] = _sha256(tmp / MEMBERS)
    (tmp / MODEL_JSON).write_text(json.dumps(json_safe(doc), indent=1, allow_nan=False))
    return replace_dir(tmp, path)  # every file fsynced, then renamed into place


def read_model_json(path: str | os.PathLike) -> dict:
    """model.json of a model directory (or of `<run dir>/model`), checked for format."""
    path = Path(path)
    if (path / "model" / MODEL_JSON).is_file() and not (path / MODEL_JSON).is_file():
        path = path / "model"
    file = path / MODEL_JSON
    if not file.is_file():
        raise SgemUserError(
            f"{path} holds no saved model ({MODEL_JSON} is missing); give a run directory "
            "written by `sgem run`/`sgem fit` or its model/ folder"
        )
    inside(path, MODEL_JSON)  # a regular file, not a link out of the directory
    try:
        doc = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise SgemUserError(f"{file} is unreadable or not JSON: {exc}; {RESAVE}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SgemUserError(f"{file} is not an sgem model description")
    version = doc.get("format_version")
    if type(version) is not int or version < 1:
        raise SgemUserError(f"{file}: format_version must be an integer >= 1, got {version!r}")
    if version > FORMAT_VERSION:
        raise SgemUserError(
            f"{path} was written in model format {version!r} by sgem "
            f"{doc.get('sgem_version')}, newer than this sgem reads ({FORMAT_VERSION}); "
            "upgrade sgem (pip install -U sgem) to load it"
        )
    doc["_dir"] = str(path)
    return doc


def _read_weights(path: Path, name: str, expected_sha: str | None, reader) -> dict:
    file = inside(path, name)  # present, regular, and not a link out of the directory
    if expected_sha is not None and _sha256(file) != expected_sha:
        raise SgemUserError(
            f"{file} does not match the checksum in {MODEL_JSON}: the file was changed or "
            "damaged after the model was saved; copy the model directory again"
        )
    try:
        return reader(str(file))
    except (SafetensorError, OSError, ValueError, TypeError) as exc:
        raise SgemUserError(f"{file} is not a readable safetensors file: {exc}; {RESAVE}") from exc


def _refuse_non_finite(tensors: dict, file: Path) -> None:
    """safetensors reads NaN and inf as numbers: a model holding one (a diverged training,
    a damaged copy) would predict NaN silently, so loading stops at the first."""
    for name, value in tensors.items():
        t = torch.as_tensor(value)
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise SgemUserError(
                f"{file} holds NaN or infinite values in tensor {name!r}: the model is "
                "unusable; re-fit it (sgem fit / sgem run) or restore the model directory "
                "from an intact copy"
            )


def read_members(path: str | os.PathLike) -> dict[str, np.ndarray] | None:
    """A saved combination's member arrays (checksummed like the weights), or None. Their
    values are checked by `sgem.moe.portable` (a threshold may be infinite there)."""
    doc = read_model_json(path)
    files = doc.get("files", {})
    if MEMBERS not in files:
        return None
    return _read_weights(Path(doc["_dir"]), MEMBERS, files[MEMBERS], load_numpy)


def load_parts(path: str | os.PathLike) -> tuple[ModelSpec, nn.Module, Preprocessor]:
    """Rebuild (spec, the MoE module, preprocessor) from a model directory, on the CPU: a
    `ClusterGatedMoE`, or a `LearnableGatedMoE` for a model saved with a learnable gate."""
    doc = read_model_json(path)
    root = Path(doc["_dir"])
    check_doc(doc, root / MODEL_JSON, (EXPERTS_FILE, PREPROCESSING_FILE))  # all read below
    files = doc["files"]
    try:
        task = doc["task"]
        spec = ModelSpec(
            loss=task["loss"],
            input_shape=list(task["input_shape"]),
            n_out=int(task["n_out"]),
            space=doc["space"],
            assignment=[int(a) for a in doc["assignment"]],
            architectures=[e["architecture"] for e in doc["experts"]],
            preprocessing=doc["preprocessing"],
            n_classes=task.get("n_classes"),
            classes=task.get("classes"),
            task_name=task.get("name", "custom"),
            gate=doc.get("gate", "cluster"),
            cluster_sizes=doc.get("cluster_sizes", []),
            metrics=doc.get("metrics", {}),
            info=doc.get("info", {}),
        )
        trained = [bool(e.get("trained", True)) for e in doc["experts"]]
        networks = [int(e.get("networks", 1)) for e in doc["experts"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise SgemUserError(f"{root / MODEL_JSON} is missing a field or malformed: {exc}") from exc
    weights = _read_weights(root, EXPERTS_FILE, files.get(EXPERTS_FILE), load_torch)
    arrays = _read_weights(root, PREPROCESSING_FILE, files.get(PREPROCESSING_FILE), load_numpy)
    _refuse_non_finite(weights, root / EXPERTS_FILE)
    _refuse_non_finite(arrays, root / PREPROCESSING_FILE)
    check_preprocessing(doc, arrays, root / PREPROCESSING_FILE)  # bounds the input size
    try:
        space = build_space(spec.space)
        archs = [space.validate(Arch.from_json(a)) for a in spec.architectures]
        preprocessor = preprocessor_from_state(spec.preprocessing, arrays)
        # shapes first, on the meta device: a huge size in model.json allocates nothing
        built = on_meta(lambda: _networks(spec, space, archs, trained, networks))
        _check_parts(built, weights, root)
        nets = _networks(spec, space, archs, trained, networks)
    except SgemUserError as exc:
        if str(root) in str(exc):
            raise
        raise SgemUserError(f"{root / MODEL_JSON} cannot be used: {exc}") from exc
    except (KeyError, TypeError, ValueError, RuntimeError, OverflowError, IndexError) as exc:
        raise bad(root / MODEL_JSON, f"the networks it describes cannot be built ({exc})") from exc
    if isinstance(nets, LearnableGatedMoE):
        _load_weights(nets, weights, "gated.", root, "the learnable-gate MoE")
        return spec, nets.eval(), preprocessor
    experts: list[nn.Module | None] = []
    for k, net in enumerate(nets):
        if net is not None:
            _load_weights(net, weights, f"expert{k}.", root, f"expert {k} ({archs[k].key})")
            net = net.eval()
        experts.append(net)
    return spec, ClusterGatedMoE(experts, np.asarray(spec.assignment), archs).eval(), preprocessor


def _networks(
    spec: ModelSpec, space, archs: list[Arch], trained: list[bool], networks: list[int]
) -> LearnableGatedMoE | list[nn.Module | None]:
    """The untrained networks model.json describes: the learnable-gate MoE, or one network
    per trained expert (an `AveragedExpert` of as many as its entry says; None for an
    untrained one)."""
    in_dim = int(np.prod(spec.input_shape))

    def one(arch: Arch) -> nn.Module:
        return space.build(arch, in_dim, spec.n_out, np.zeros(in_dim), np.ones(in_dim))

    def build(arch: Arch, n: int = 1) -> nn.Module:
        return one(arch) if n == 1 else AveragedExpert([one(arch) for _ in range(n)], spec.loss)

    if spec.gate == "learnable":
        width = int(spec.info.get("gate_width", 16))
        gate = gate_for_shape(spec.input_shape, spec.n_experts, width)
        zeros = np.zeros(spec.input_shape, dtype=np.float32)
        return LearnableGatedMoE([build(a) for a in archs], gate, zeros, zeros + 1)
    return [
        build(a, n) if used else None for a, used, n in zip(archs, trained, networks, strict=True)
    ]


def _check_parts(networks, weights: dict, root: Path) -> None:
    """Every tensor of experts.safetensors belongs to a network and fits it exactly."""
    file = root / EXPERTS_FILE
    if isinstance(networks, LearnableGatedMoE):
        parts = {"gated.": (networks, "the learnable-gate MoE")}
    else:
        parts = {f"expert{k}.": (n, f"expert {k}") for k, n in enumerate(networks) if n}
    strays = sorted(n for n in weights if not n.startswith(tuple(parts)))
    if strays:
        raise bad(file, f"tensors {strays[:3]} belong to no expert of {MODEL_JSON}")
    for prefix, (net, what) in parts.items():
        check_weights(net, weights, prefix, file, what)


def _load_weights(module: nn.Module, weights: dict, prefix: str, root: Path, what: str) -> None:
    own = {n[len(prefix) :]: t for n, t in weights.items() if n.startswith(prefix)}
    try:
        module.load_state_dict(own, strict=True)
    except RuntimeError as exc:
        raise SgemUserError(
            f"the weights of {what} in {root / EXPERTS_FILE} do not fit its architecture: "
            f"{str(exc).splitlines()[0]} (a tampered or mismatched model directory)"
        ) from exc


def spec_for(
    task,
    space,
    assignment: np.ndarray,
    architectures: list[Arch],
    n_out: int,
    metrics: dict | None = None,
    info: dict | None = None,
    preprocessing: dict | None = None,
) -> ModelSpec:
    """The `ModelSpec` of a cluster-gated MoE trained on `task` in `space`."""
    return ModelSpec(
        loss=task.loss,
        input_shape=list(task.input_shape),
        n_out=int(n_out),
        space=space_config(space),
        assignment=[int(a) for a in assignment],
        architectures=[a.to_json() for a in architectures],
        preprocessing=preprocessing or {},
        n_classes=task.n_classes,
        classes=task.meta.get("classes"),
        task_name=task.name,
        cluster_sizes=task.cluster_sizes.tolist(),
        metrics=metrics or {},
        info=info or {},
    )


def save_final_moe(
    path: str | os.PathLike,
    task,
    space,
    moe: nn.Module,
    n_out: int,
    metrics: dict | None = None,
    info: dict | None = None,
    members: dict[str, np.ndarray] | None = None,
) -> Path:
    """Save a trained `ClusterGatedMoE` of `task` (the output of `train_final_moe`) with
    the task's preprocessing and routing, as a model directory at `path` (`members`: a
    combination's member arrays, see `save_model`)."""
    assignment = np.asarray(moe.assignment.cpu())
    experts = [e if used else None for e, used in zip(moe.experts, moe.used, strict=True)]
    archs = [Arch.from_json(a) if isinstance(a, dict) else a for a in moe.architectures]
    spec = spec_for(task, space, assignment, archs, n_out, metrics, info)
    return save_model(path, spec, experts, preprocessor_for_task(task), members)


def save_learnable_moe(
    path: str | os.PathLike,
    task,
    space,
    moe: LearnableGatedMoE,
    architectures: list[Arch],
    n_out: int,
    gate_width: int = 16,
    metrics: dict | None = None,
    info: dict | None = None,
) -> Path:
    """Save a `LearnableGatedMoE` (the output of `train_learnable_gate_moe`) the same way:
    its gate replaces the cluster table at predict time; clusters are still reported."""
    assignment = np.zeros(task.n_clusters, dtype=np.int64)  # unused by a learnable gate
    spec = spec_for(task, space, assignment, list(architectures), n_out, metrics, info)
    spec.gate = "learnable"
    spec.info = {**spec.info, "gate_width": int(gate_width)}
    return save_model(path, spec, moe, preprocessor_for_task(task))


__all__ = [
    "FORMAT_VERSION",
    "ModelSpec",
    "json_safe",
    "load_parts",
    "read_model_json",
    "save_final_moe",
    "save_learnable_moe",
    "save_model",
    "spec_for",
]
