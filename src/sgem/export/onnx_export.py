"""`sgem export RUN --format onnx`: a saved model as ONE ONNX graph, run by onnxruntime alone.

What the graph holds (`sgem.export.graphs`): the stored preprocessing (standardisation,
missing-value imputation, categorical one-hot from strings with ONNX-ML's CategoryMapper,
or the series' gap filling and window scaling), routing (nearest stored centroid, or the
learnable gate), the experts, and the calibration `predict_proba` / `predict_quantiles` /
`forecast` apply by default. Inputs and outputs are named and described in the file's
metadata (`sgem.inputs`, `sgem.outputs`, ...), so a service needs nothing else.

A table model saved as a combination exports with its scikit-learn members and weights
(`sgem.export.combination_parts`). Refused, with the reason: image models (their router
reads an embedding computed with numpy or a pretrained backbone outside the network),
forecasters saved as a combination (their classical members refit at forecast time), and
learnable-gate models that are not classifiers.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..errors import SgemUserError
from ..moe.model import DEFAULT_QUANTILES, SgemModel
from ..moe.preprocess import ForecastPreprocessor, ImagePreprocessor, TabularPreprocessor
from .graphs import OUTPUTS, SeriesGraph, TableGraph

OPSET = 17
INSTALL = "pip install 'sgem[export]'"
#: the string that marks a missing categorical value in the `categories` input
MISSING_CATEGORY = ""


@dataclass
class ExportInfo:
    """What was written: the file, the kind, and each input / output with its meaning."""

    path: str
    kind: str
    inputs: dict[str, str]
    outputs: dict[str, str]
    metadata: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [f"wrote {self.path} ({self.kind}; run it with onnxruntime)"]
        if "sgem.model" in self.metadata:
            lines.append(f"  model: {self.metadata['sgem.model']}")
        lines.append("  inputs:")
        lines += [f"    {k}: {v}" for k, v in self.inputs.items()]
        lines.append("  outputs:")
        lines += [f"    {k}: {v}" for k, v in self.outputs.items()]
        return "\n".join(lines)


def require_onnx():
    """(onnx, onnxruntime), or a `SgemUserError` naming the install command."""
    try:
        import onnx
        import onnxruntime
    except ImportError as exc:
        raise SgemUserError(
            f"ONNX export needs the packages onnx and onnxruntime ({exc}); install them with "
            f"{INSTALL}"
        ) from exc
    return onnx, onnxruntime


def kind_of(model: SgemModel) -> str:
    """The exported kind, or a `SgemUserError` saying why this model cannot be exported."""
    if isinstance(model.preprocessor, ImagePreprocessor):
        raise SgemUserError(
            "image models cannot be exported to ONNX: their router reads an image embedding "
            "(handcrafted features + PCA computed with numpy, or a pretrained backbone that is "
            "not part of the model), which the graph cannot express; serve them with "
            "sgem.load(...).predict"
        )
    mix = model.combination
    if mix is not None and model.is_forecaster:
        raise SgemUserError(
            f"this model is saved as a combination of the MoE with other members "
            f"({', '.join(mix.names)}) and cannot be exported: a forecaster's classical "
            "members refit on each series at forecast time; serve it with "
            "sgem.load(...).forecast, or fit with --no-combination (sgem.fit(..., "
            "combine=False)) to save the MoE alone (a table's combination exports as it is)"
        )
    if model.learnable_gate and not model.is_classifier:
        raise SgemUserError(
            "a learnable-gate model is exported only as a classifier (its mixture of "
            "Student-t experts has no closed-form quantiles); serve it with sgem.load(...)"
        )
    if model.is_forecaster:
        return "forecaster"
    return "classifier" if model.is_classifier else "regressor"


def _check_quantiles(quantiles: Sequence[float]) -> tuple[float, ...]:
    qs = tuple(sorted({float(q) for q in quantiles}))
    if not qs or any(not 0.0 < q < 1.0 for q in qs):
        raise SgemUserError(f"quantiles must lie strictly between 0 and 1, got {quantiles}")
    return qs


def _columns(model: SgemModel) -> tuple[list[str], list[dict]]:
    """(numeric column names in `x` order, categorical column specs in `categories` order)."""
    encoding = model.spec.info.get("encoding")
    if not encoding:
        pre = model.preprocessor
        assert isinstance(pre, TabularPreprocessor)
        names = getattr(pre, "feature_names", None) or [f"x{i}" for i in range(len(pre.mean))]
        return list(names), []
    numeric = [c["name"] for c in encoding["columns"] if c["kind"] != "onehot"]
    return numeric, [c for c in encoding["columns"] if c["kind"] == "onehot"]


def _signature(model: SgemModel, kind: str, qs: tuple[float, ...]):
    """(module, example args, input names, dynamic axes, input docs, output docs)."""
    q_doc = f"quantiles {list(qs)} in ascending order"
    if kind == "forecaster":
        pre = model.preprocessor
        assert isinstance(pre, ForecastPreprocessor)
        c, h = pre.context, pre.horizon
        example: tuple[torch.Tensor, ...] = (
            torch.linspace(1.0, 2.0, 2 * (c + 3)).reshape(2, c + 3).double(),
        )
        inputs = {
            "history": f"float64 (n, L): each series' last L values (the last {c} are the "
            "context; all L set the scale's floor), oldest first; NaN = missing (gaps filled "
            "and short series padded as the model does them; left-pad shorter rows with NaN)"
        }
        outputs = {
            "quantiles": f"float64 (n, {len(qs)}, {h}): {q_doc}, per forecast step",
            "point": f"float64 (n, {h}): the point forecast (Student-t location)",
        }
        module = SeriesGraph(model, qs)
        axes = {"history": {0: "n", 1: "length"}}
    else:
        numeric, categorical = _columns(model)
        module = TableGraph(model, qs)
        tensors = [torch.zeros(2, len(numeric), dtype=torch.float64)]
        inputs = {"x": f"float64 (n, {len(numeric)}): columns {numeric}; NaN = missing"}
        axes = {"x": {0: "n"}}
        if categorical:
            tensors.append(torch.tensor([[0] * len(categorical), [1] * len(categorical)]))
            cat_names = [c["name"] for c in categorical]
            inputs["categories"] = (
                f"string (n, {len(cat_names)}): columns {cat_names} as text; "
                f"{MISSING_CATEGORY!r} = missing"
            )
            axes["codes"] = {0: "n"}
        example = tuple(tensors)
        if kind == "classifier":
            outputs = {
                "probabilities": f"float32 (n, {len(model.classes)}): classes {model.classes}",
                "label_index": "int64 (n,): index of the predicted class in the classes",
            }
        else:
            outputs = {
                "quantiles": f"float64 (n, {len(qs)}): {q_doc}, in the target's units",
                "point": f"{'float64' if model.combination else 'float32'} (n,): the point "
                "prediction, in the target's units",
            }
    outputs |= {"cluster": "int64 (n,): nearest stored centroid", "expert": "int64 (n,)"}
    names = ["x", "codes"][: len(example)] if kind != "forecaster" else ["history"]
    for name in OUTPUTS[kind]:
        axes[name] = {0: "n"}
    return module.eval(), example, names, axes, inputs, outputs


def _categories_to_codes(onnx, graph, categorical: list[dict]) -> None:
    """Replace the traced int64 input `codes` by a string input `categories` mapped with
    CategoryMapper (unseen -> -1, the missing marker -> len(categories))."""
    from onnx import TensorProto, helper

    nodes, parts = [], []
    for j, spec in enumerate(categorical):
        cats = [str(c) for c in spec["categories"]]
        strings, ints = list(cats), list(range(len(cats)))
        if MISSING_CATEGORY not in cats:
            strings.append(MISSING_CATEGORY)
            ints.append(len(cats))
        idx = f"sgem_cat_index_{j}"
        graph.initializer.append(helper.make_tensor(idx, TensorProto.INT64, [1], [j]))
        col, code = f"sgem_cat_column_{j}", f"sgem_cat_code_{j}"
        nodes.append(helper.make_node("Gather", ["categories", idx], [col], axis=1))
        nodes.append(
            helper.make_node(
                "CategoryMapper",
                [col],
                [code],
                domain="ai.onnx.ml",
                cats_strings=strings,
                cats_int64s=ints,
                default_int64=-1,
            )
        )
        parts.append(code)
    nodes.append(helper.make_node("Concat", parts, ["codes"], axis=1))
    kept = [i for i in graph.input if i.name != "codes"]
    del graph.input[:]
    graph.input.extend(kept)
    graph.input.append(
        helper.make_tensor_value_info("categories", TensorProto.STRING, ["n", len(categorical)])
    )
    old = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + old)


def export_onnx(
    model: SgemModel,
    path: str | os.PathLike,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
) -> ExportInfo:
    """Write `model` as one ONNX graph at `path`; returns what its inputs and outputs are.
    The graph is checked (onnx.checker) and run once by onnxruntime before it is kept."""
    onnx, ort = require_onnx()
    kind = kind_of(model)
    qs = _check_quantiles(quantiles)
    module, example, names, axes, in_doc, out_doc = _signature(model, kind, qs)
    buffer = io.BytesIO()
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused attention kernel has no ONNX op
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notes
            torch.onnx.export(
                module,
                example,
                buffer,
                dynamo=False,
                input_names=names,
                output_names=list(OUTPUTS[kind]),
                dynamic_axes=axes,
                opset_version=OPSET,
            )
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    proto = onnx.load_from_string(buffer.getvalue())
    _, categorical = _columns(model) if kind != "forecaster" else (None, [])
    if categorical:
        _categories_to_codes(onnx, proto.graph, categorical)
        proto.opset_import.append(onnx.helper.make_opsetid("ai.onnx.ml", 2))
    metadata = _metadata(model, kind, qs, in_doc, out_doc)
    for key, value in metadata.items():
        proto.metadata_props.add(key=key, value=value)
    proto.producer_name = "sgem"
    onnx.checker.check_model(proto)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = proto.SerializeToString()
    ort.InferenceSession(data, providers=["CPUExecutionProvider"])  # loads, or raises here
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return ExportInfo(str(path), kind, in_doc, out_doc, metadata)


def _metadata(model: SgemModel, kind: str, qs, in_doc: dict, out_doc: dict) -> dict[str, str]:
    from .. import __version__

    numeric, categorical = _columns(model) if kind != "forecaster" else ([], [])
    meta = {
        "sgem.kind": kind,
        "sgem.version": __version__,
        "sgem.task": str(model.spec.task_name),
        "sgem.inputs": json.dumps(in_doc),
        "sgem.outputs": json.dumps(out_doc),
        "sgem.quantiles": json.dumps(list(qs)),
        "sgem.model": _holds(model),
    }
    if kind == "classifier":
        meta["sgem.classes"] = json.dumps(model.classes, default=str)
    if kind == "forecaster":
        pre = model.preprocessor
        assert isinstance(pre, ForecastPreprocessor)
        meta |= {"sgem.context": str(pre.context), "sgem.horizon": str(pre.horizon)}
    else:
        meta["sgem.numeric_columns"] = json.dumps(numeric)
        meta["sgem.categorical_columns"] = json.dumps(
            {c["name"]: [str(v) for v in c["categories"]] for c in categorical}
        )
    return meta


def _holds(model: SgemModel) -> str:
    """What the graph computes: the MoE, or the saved combination with its weights; the
    network is "the global network" where selective routing sent every cluster to it
    (the leaderboard's `fallback_clusters`), as the leaderboard names it."""
    board = model.spec.info.get("leaderboard") or {}
    fallback = board.get("fallback_clusters") or []
    network = "the global network" if len(fallback) == model.spec.n_clusters else "the MoE"
    mix = model.combination
    if mix is None:
        return f"{network} alone"
    shares = zip([network, *mix.names], mix.weights, strict=True)
    return "a combination: " + ", ".join(f"{name} {w:.2f}" for name, w in shares)


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The sgem metadata of an exported file (inputs, outputs, classes, quantiles, ...)."""
    onnx, _ = require_onnx()
    with contextlib.suppress(Exception):
        return {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    raise SgemUserError(f"{path} is not a readable ONNX file")


__all__ = ["MISSING_CATEGORY", "ExportInfo", "export_onnx", "kind_of", "read_metadata"]
