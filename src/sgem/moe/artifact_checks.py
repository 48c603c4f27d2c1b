"""Checks of a model directory's content before anything is built from it.

Why: model.json and the safetensors files are data a user may copy, edit or receive from
someone else, and their checksums only say the files are the ones model.json names (a
buggy writer or an attacker writes consistent ones). So every JSON value `load_parts` and
predicting read is checked for type and range, the tensors' names, shapes and dtypes are
compared with the networks model.json describes (built on torch's "meta" device first, so
a huge size in model.json never allocates memory), the preprocessing arrays with the task,
and every file must be a regular file inside the directory (a symlink pointing outside is
refused). A failure raises `SgemUserError` naming the file and the fix, never another
exception or a silently different model.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import SgemUserError
from .averaged import MAX_NETWORKS
from .calibration import MAX_FLOOR

RESAVE = "re-save the model (sgem fit / sgem run) or restore the directory from an intact copy"
LOSSES = ("cross_entropy", "student_t")
GATES = ("cluster", "learnable")
#: the range `calibration.fit_temperature` searches (exp(+-4)), with a margin for rounding
TEMPERATURES = (0.018, 54.7)
_SHA256 = re.compile(r"[0-9a-f]{64}")


def bad(file: Path, what: str) -> SgemUserError:
    return SgemUserError(f"{file} is malformed: {what}; {RESAVE}")


def inside(root: Path, name: str) -> Path:
    """`root / name` if it is a regular file inside `root` (symlinks resolved), else refused."""
    file = root / name
    try:
        real = file.resolve(strict=True)
        base = root.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise SgemUserError(
            f"{file} is missing (or a broken link): the model directory is incomplete; {RESAVE}"
        ) from exc
    if not real.is_relative_to(base):
        raise SgemUserError(
            f"{file} points outside the model directory (to {real}); a model directory holds "
            "its own files: put the real file in place of the link, or re-save the model"
        )
    if not real.is_file():
        raise SgemUserError(f"{file} is not a regular file; {RESAVE}")
    return file


def is_int(value: Any, low: int = 0, high: int | None = None) -> bool:
    return (
        type(value) is int and value >= low and (high is None or value <= high)  # no bools
    )


def is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def check_doc(doc: dict, file: Path, required: tuple[str, ...]) -> None:
    """The types and ranges of everything in model.json that loading and predicting read;
    `required`: the files whose checksums it must list."""
    task = doc.get("task")
    if not isinstance(task, dict):
        raise bad(file, "'task' must be an object")
    if task.get("loss") not in LOSSES:
        raise bad(file, f"task.loss must be one of {LOSSES}, got {task.get('loss')!r}")
    shape = task.get("input_shape")
    if not isinstance(shape, list) or not shape or not all(is_int(s, 1) for s in shape):
        raise bad(file, f"task.input_shape must list sizes >= 1, got {shape!r}")
    n_out = task.get("n_out")
    if not is_int(n_out, 1):
        raise bad(file, f"task.n_out must be an integer >= 1, got {n_out!r}")
    assert isinstance(n_out, int)  # is_int checked it; tells the type checker
    n_classes, classes = task.get("n_classes"), task.get("classes")
    if task["loss"] == "cross_entropy":
        if not is_int(n_classes, 2) or n_classes != n_out:
            raise bad(file, f"a classifier's task.n_classes must equal n_out ({n_out})")
        if classes is not None and (
            not isinstance(classes, list)
            or len(classes) != n_classes
            or any(type(c) not in (int, str, float, bool) for c in classes)
            or any(type(c) is float and not math.isfinite(c) for c in classes)
            or len({str(c) for c in classes}) != len(classes)
        ):
            raise bad(file, f"task.classes must list {n_classes} distinct labels")
    elif n_classes is not None or classes not in (None, []) or n_out % 3:
        raise bad(file, "a Student-t model has no classes and 3 outputs per target")
    for key in ("name",):
        if key in task and not isinstance(task[key], str):
            raise bad(file, f"task.{key} must be a string")
    for key, kind in (("space", dict), ("preprocessing", dict), ("experts", list)):
        if not isinstance(doc.get(key), kind):
            raise bad(file, f"{key!r} must be a{'n object' if kind is dict else ' list'}")
    for key in ("info", "metrics"):
        if not isinstance(doc.get(key, {}), dict):
            raise bad(file, f"{key!r} must be an object")
    if doc.get("gate", "cluster") not in GATES:
        raise bad(file, f"gate must be one of {GATES}, got {doc.get('gate')!r}")
    experts = doc["experts"]
    if not experts or not all(isinstance(e, dict) for e in experts):
        raise bad(file, "'experts' must list at least one expert object")
    for k, e in enumerate(experts):
        arch = e.get("architecture")
        if not isinstance(arch, dict) or not isinstance(arch.get("ops"), list):
            raise bad(file, f"expert {k} has no architecture object with a list of ops")
        if not all(isinstance(op, str) for op in arch["ops"]):
            raise bad(file, f"expert {k}'s ops must be names (strings)")
        inputs = arch.get("inputs")
        if not isinstance(inputs, list) or len(inputs) != len(arch["ops"]):
            raise bad(file, f"expert {k}'s architecture needs one input per op")
        if not all(is_int(i, 0, n) for n, i in enumerate(inputs)):
            raise bad(file, f"expert {k}'s inputs must each name an earlier node")
        if type(e.get("trained", True)) is not bool:
            raise bad(file, f"expert {k}'s 'trained' must be true or false")
        if not is_int(e.get("networks", 1), 1, MAX_NETWORKS):
            raise bad(file, f"expert {k}'s 'networks' must be an integer from 1 to {MAX_NETWORKS}")
    assignment = doc.get("assignment")
    if not isinstance(assignment, list) or not assignment:
        raise bad(file, "'assignment' must list the expert of every cluster")
    if not all(is_int(a, 0, len(experts) - 1) for a in assignment):
        raise bad(file, f"'assignment' must hold expert indices 0..{len(experts) - 1}")
    if doc.get("gate", "cluster") == "cluster":
        idle = sorted({a for a in assignment if not experts[a].get("trained", True)})
        if idle:
            raise bad(file, f"clusters are assigned to the untrained expert(s) {idle}")
    _check_files(doc.get("files"), file, required)
    _check_info(doc.get("info", {}), file, task)


def _check_files(files: Any, file: Path, required: tuple[str, ...]) -> None:
    if not isinstance(files, dict):
        raise bad(file, "'files' must map file names to SHA-256 checksums")
    for name in required:
        if name not in files:
            raise bad(file, f"'files' lists no checksum for {name}")
    for name, sha in files.items():
        if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            raise bad(file, f"the checksum of {name} must be 64 hexadecimal digits")


def _check_info(info: dict, file: Path, task: dict) -> None:
    """What predicting reads from info: the calibration, target scaling and table encoding."""
    cal = info.get("calibration")
    if cal is not None:
        if not isinstance(cal, dict):
            raise bad(file, "info.calibration must be an object")
        t = cal.get("temperature")
        low, high = TEMPERATURES
        if t is not None and not (is_number(t) and low <= t <= high):
            raise bad(file, f"the calibration temperature must lie in [{low}, {high}], got {t!r}")
        floor = cal.get("floor")
        if floor is not None and not (is_number(floor) and 0 <= floor <= MAX_FLOOR):
            raise bad(file, f"the calibration floor must lie in [0, {MAX_FLOOR}], got {floor!r}")
        support = cal.get("support")
        if support is not None and not (
            isinstance(support, dict) and all(v is None or is_number(v) for v in support.values())
        ):
            raise bad(file, "info.calibration.support must hold numbers or nulls")
        if cal.get("intervals") is not None:
            from .calibration import IntervalCalibration

            try:
                IntervalCalibration.from_json(cal["intervals"])
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise bad(file, f"info.calibration.intervals is unusable ({exc})") from exc
    target = info.get("target_standardisation")
    if (
        target is not None
        and task["loss"] != "cross_entropy"
        and not (
            isinstance(target, dict)
            and is_number(target.get("mean"))
            and is_number(target.get("std"))
            and target["std"] > 0
        )
    ):
        raise bad(file, "info.target_standardisation needs a finite mean and a std > 0")
    for key in ("gate_width", "torch_threads"):
        if info.get(key) is not None and not is_int(info[key], 1, 4096):
            raise bad(file, f"info.{key} must be an integer in 1..4096")
    encoding = info.get("encoding")
    if encoding is not None:
        check_encoding(encoding, file)
        if task["loss"] == "cross_entropy" and encoding.get("classes") != task.get("classes"):
            raise bad(file, "task.classes differ from the classes of info.encoding")


def check_encoding(encoding: Any, file: Path) -> None:
    """A table's column encoding (`sgem.data.files_tabular`): every field `encode_table`
    reads, and feature names that follow from the columns."""
    from ..data.files_tabular import ENCODING_FORMAT, _feature_names
    from ..data.table_dates import DATE_PARTS, TIME_PART
    from ..data.table_missing import MISSING_POLICIES

    if not isinstance(encoding, dict) or encoding.get("format") != ENCODING_FORMAT:
        raise bad(file, f"info.encoding must be an object of format {ENCODING_FORMAT!r}")
    if encoding.get("missing", "error") not in MISSING_POLICIES:
        raise bad(file, f"info.encoding.missing must be one of {MISSING_POLICIES}")
    columns = encoding.get("columns")
    if not isinstance(columns, list) or not all(isinstance(c, dict) for c in columns):
        raise bad(file, "info.encoding.columns must list column objects")
    for c in columns:
        if not isinstance(c.get("name"), str) or c.get("kind") not in ("numeric", "bool", "onehot"):
            raise bad(file, "each encoded column needs a name and a kind (numeric, bool or onehot)")
        if c["kind"] == "onehot":
            cats = c.get("categories")
            if not isinstance(cats, list) or any(type(v) not in (str, int) for v in cats):
                raise bad(file, f"column {c['name']!r} must list its categories")
            continue
        if "date_of" in c and (
            not isinstance(c["date_of"], str)
            or c.get("part") not in (*DATE_PARTS, TIME_PART)
            or not isinstance(c.get("date_format"), str)
        ):
            raise bad(file, f"column {c['name']!r} must name its date column, part and format")
        if c.get("median") is not None and not is_number(c["median"]):
            raise bad(file, f"column {c['name']!r} has a non-numeric median")
        elif type(c.get("indicator", False)) is not bool:
            raise bad(file, f"column {c['name']!r}'s indicator must be true or false")
    for key in ("target", "source_format"):
        if encoding.get(key) is not None and not isinstance(encoding[key], str):
            raise bad(file, f"info.encoding.{key} must be a string")
    left_out = encoding.get("left_out", [])
    if not isinstance(left_out, list) or not all(isinstance(c, str) for c in left_out):
        raise bad(file, "info.encoding.left_out must list column names")
    if encoding.get("feature_names") != _feature_names(columns):
        raise bad(file, "info.encoding.feature_names do not follow from its columns")


def check_arrays(arrays: dict, file: Path, dtype: Any = np.float64) -> None:
    for name, value in arrays.items():
        if np.asarray(value).dtype != dtype:
            raise bad(file, f"array {name!r} has dtype {np.asarray(value).dtype}, not {dtype}")


def check_preprocessing(doc: dict, arrays: dict, file: Path) -> None:
    """The preprocessing state and arrays against the task: sizes, finite scales."""
    state, task = doc["preprocessing"], doc["task"]
    n_clusters = len(doc["assignment"])
    shape = task["input_shape"]
    check_arrays(arrays, file)

    def need(name: str, dims: tuple) -> np.ndarray:
        value = arrays.get(name)
        if value is None:
            raise bad(file, f"array {name!r} is missing")
        if value.shape != dims:
            raise bad(file, f"array {name!r} has shape {value.shape}, expected {dims}")
        return value

    kind = state.get("kind")
    if kind == "tabular":
        d = int(np.prod(shape))
        if len(shape) != 1 or state.get("n_features", d) != d:
            raise bad(file, f"a table's input_shape {shape} and n_features disagree")
        names = state.get("feature_names")
        if names is not None and (
            not isinstance(names, list)
            or len(names) != d
            or not all(isinstance(n, str) for n in names)
        ):
            raise bad(file, f"preprocessing.feature_names must list {d} names")
        need("mean", (d,))
        if not (need("std", (d,)) > 0).all():
            raise bad(file, "array 'std' must be > 0")
        need("centroids", (n_clusters, d))
    elif kind == "forecast":
        context, horizon = state.get("context"), state.get("horizon")
        if not is_int(context, 1) or not is_int(horizon, 1) or shape[-1] != context:
            raise bad(file, f"preprocessing context {context!r} does not fit input {shape}")
        if task["n_out"] != 3 * horizon:
            raise bad(file, f"n_out {task['n_out']} is not 3 x horizon {horizon}")
        for key in ("floor_fraction", "min_scale"):
            if not (is_number(state.get(key)) and state[key] >= 0):
                raise bad(file, f"preprocessing.{key} must be a number >= 0")
        if state.get("missing", "error") not in ("impute", "error"):
            raise bad(file, "preprocessing.missing must be 'impute' or 'error'")
        if type(state.get("pad_short", False)) is not bool:
            raise bad(file, "preprocessing.pad_short must be true or false")
        k = need("descriptor_mean", (len(arrays.get("descriptor_mean", ())),)).shape[0]
        if not (need("descriptor_std", (k,)) > 0).all():
            raise bad(file, "array 'descriptor_std' must be > 0")
        need("centroids", (n_clusters, k))
    elif kind == "image":
        for key in ("height", "width", "channels"):
            if not is_int(state.get(key), 1, 1 << 14):
                raise bad(file, f"preprocessing.{key} must be a size >= 1")
        if state.get("normalise") not in ("unit", "standardise"):
            raise bad(file, "preprocessing.normalise must be 'unit' or 'standardise'")
        size = state.get("image_size")
        if size is not None and not (is_int(size, 1) and state["height"] % size == 0):
            raise bad(file, "preprocessing.image_size must divide the image height")
        if not isinstance(state.get("embedding"), dict):
            raise bad(file, "preprocessing.embedding must be an object")
        centroids = arrays.get("centroids")
        if centroids is None or centroids.ndim != 2 or len(centroids) != n_clusters:
            raise bad(file, f"array 'centroids' must have {n_clusters} rows")
    # an unknown kind is refused by preprocess.preprocessor_from_state


def check_weights(module: nn.Module, weights: dict, prefix: str, file: Path, what: str) -> None:
    """The tensors under `prefix` against `module`'s own (built on the meta device):
    the same names, shapes and dtypes."""
    own = {n[len(prefix) :]: t for n, t in weights.items() if n.startswith(prefix)}
    expected = module.state_dict()
    missing = sorted(set(expected) - set(own))
    extra = sorted(set(own) - set(expected))
    problem = ""
    if missing or extra:
        problem = f"missing tensors {missing[:3]}, unknown tensors {extra[:3]}"
    for name, want in expected.items():
        got = own.get(name)
        if (
            not problem
            and got is not None
            and (tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype)
        ):
            problem = (
                f"tensor {prefix}{name} is {got.dtype} {tuple(got.shape)}, the architecture "
                f"needs {want.dtype} {tuple(want.shape)}"
            )
    if problem:
        raise SgemUserError(
            f"the weights of {what} in {file} do not fit its architecture: {problem} (a "
            f"tampered or mismatched model directory); {RESAVE}"
        )


def check_combination(comb: Any, doc: dict, file: Path) -> None:
    """A combination (`sgem.moe.combination`) against the model it mixes with: the same
    loss and classes, members that read the model's inputs and give its class codes."""
    task = doc["task"]
    if comb.loss != task["loss"]:
        raise bad(file, f"the combination's loss {comb.loss!r} is not the model's")
    d = int(np.prod(task["input_shape"]))
    for name, member in zip(comb.names, comb.members, strict=True):
        if getattr(member, "n_features", d) != d:
            raise bad(file, f"member {name!r} reads {member.n_features} features, not {d}")
        if task["loss"] != "cross_entropy":
            continue
        codes = getattr(member, "classes", None) or []
        if not all(is_int(c, 0, task["n_classes"] - 1) for c in codes):
            raise bad(file, f"member {name!r} must give class codes 0..{task['n_classes'] - 1}")
    if task["loss"] == "cross_entropy" and comb.n_classes != task["n_classes"]:
        raise bad(
            file, f"the combination mixes {comb.n_classes!r} classes, not {task['n_classes']}"
        )
    if task["loss"] != "cross_entropy" and not all(is_number(v) and v > 0 for v in comb.scales):
        raise bad(file, "the combination's member scales must be numbers > 0")


def on_meta(build):
    """`build()` on torch's meta device: shapes without memory, so a size from model.json is
    compared with the file's tensors before anything of that size is allocated."""
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.filterwarnings("ignore", "Initializing zero-element tensors")
        return build()


__all__ = [
    "check_arrays",
    "check_combination",
    "check_doc",
    "check_encoding",
    "check_preprocessing",
    "check_weights",
    "inside",
    "on_meta",
]
