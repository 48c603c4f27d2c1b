"""The mutations of tests/loader_fuzz.py, deterministic (seeded), grouped in classes.

Model directories ("table": a fitted table's model; "combo": the same with a logistic member,
i.e. a combination with members.safetensors): truncation and flipped bytes with the stored
checksums as they are and recomputed (a buggy writer or an attacker writes consistent ones),
NaN / Inf, wrong dtypes and shapes in every tensor, missing and extra tensors, every JSON
value of model.json replaced by wrong types and sizes, hand-made inconsistencies, missing,
extra, special and symlinked files. Run directories: store.sqlite truncated, flipped and
edited through SQL, trace.jsonl torn, result.json and config.yaml damaged, files missing.
Valid edits (another finite weight, another valid expert index) make another model and are
not generated: nothing can tell them from a model saved that way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from loader_fuzz import MODEL_FILES, Case
from safetensors.numpy import load_file, save_file

SEED = 20240534
TENSOR_FILES = ("experts.safetensors", "preprocessing.safetensors", "members.safetensors")
#: JSON replacements: wrong types, negative / huge / non-finite numbers ("delete": the key goes)
WRONG = {
    "delete": None,
    "null": None,
    "str": "x",
    "list": [],
    "dict": {},
    "bool": True,
    "neg": -1,
    "huge_int": 10**12,
    "huge_float": 1e308,
    "nan": float("nan"),
}


def _offsets(size: int, rng: np.random.Generator, n: int = 5) -> list[int]:
    fixed = {0, 1, 8, 9, size // 3, size // 2, size - 1}
    return sorted({o for o in fixed | set(rng.integers(0, size, n).tolist()) if 0 <= o < size})


def rehash(root: Path) -> None:
    """Recompute model.json's checksums (a consistent, possibly malicious writer)."""
    doc = json.loads((root / "model.json").read_text())
    for name in list(doc.get("files", {})):
        if (root / name).is_file():
            doc["files"][name] = hashlib.sha256((root / name).read_bytes()).hexdigest()
    (root / "model.json").write_text(json.dumps(doc))


def _truncate(name: str, at: int, rehashed: bool) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        data = (root / name).read_bytes()
        (root / name).write_bytes(data[:at])
        if rehashed:
            rehash(root)

    return apply


def _flip(name: str, at: int, mask: int, rehashed: bool) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        data = bytearray((root / name).read_bytes())
        data[at] ^= mask
        (root / name).write_bytes(bytes(data))
        if rehashed:
            rehash(root)

    return apply


def _tensors(name: str, edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        arrays = load_file(str(root / name))
        edit(arrays)
        save_file(arrays, str(root / name))
        rehash(root)

    return apply


def _json(edit: Callable[[dict], Any], name: str = "model.json") -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        doc = json.loads((root / name).read_text())
        doc = edit(doc) or doc
        (root / name).write_text(json.dumps(doc, allow_nan=True))

    return apply


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key / index path of a JSON document (containers and leaves)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):  # the first three items of a list stand for all
            out += _paths(v, (*prefix, i))
    return out


def _set(path: tuple, value: Any, delete: bool = False) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        if delete:
            del node[path[-1]]
        else:
            node[path[-1]] = value

    return edit


# -- model directories --------------------------------------------------------------------------
def model_cases(base: str, root: Path) -> list[Case]:
    rng = np.random.default_rng([SEED, len(base)])
    files = ["model.json", *[f for f in TENSOR_FILES if (root / f).is_file()]]
    if base == "combo":  # the combination's own parts; the rest is the table's
        files = ["model.json", "members.safetensors"]
    cases: list[Case] = []
    for f in files:
        size = (root / f).stat().st_size
        for at in _offsets(size, rng):
            cases.append(Case("truncate", f"{base}:{f}@{at}", base, f, _truncate(f, at, False)))
            if f != "model.json":
                apply = _truncate(f, at, True)
                cases.append(Case("truncate+rehash", f"{base}:{f}@{at}", base, f, apply))
        for at in rng.integers(0, size, 8).tolist():
            mask = int(rng.integers(1, 256))
            expect = "refuse" if f != "model.json" else "either"
            apply = _flip(f, at, mask, False)
            cases.append(Case("flip", f"{base}:{f}@{at}^{mask}", base, f, apply, expect))
        if f != "model.json":  # flips inside the header (the data is covered by tensor edits)
            header = 8 + int.from_bytes((root / f).read_bytes()[:8], "little")
            for at in rng.integers(0, header, 8).tolist():
                mask = int(rng.integers(1, 256))
                apply = _flip(f, at, mask, True)
                cases.append(Case("flip-header+rehash", f"{base}:{f}@{at}", base, f, apply))
        if f != "model.json":
            cases += _tensor_cases(base, root, f)
    cases += _json_cases(base, root)
    if base == "table":
        cases += _semantic_cases(base) + _file_cases(base, root)
    return cases


def _tensor_cases(base: str, root: Path, f: str) -> list[Case]:
    arrays = load_file(str(root / f))
    cases: list[Case] = []

    def add(cls: str, what: str, edit: Callable[[dict], None], expect: str = "either") -> None:
        cases.append(Case(cls, f"{base}:{f}:{what}", base, f, _tensors(f, edit), expect))

    for name, value in sorted(arrays.items()):
        if value.dtype.kind == "f" and value.size:
            for bad in (np.nan, np.inf, -np.inf):
                if name.endswith("num_threshold") and bad == np.inf:
                    # a threshold scikit-learn writes itself (a split sending every value
                    # left and the missing ones right): only the checksum this case
                    # recomputes could tell it from the saved one
                    continue

                def nonfinite(a, name=name, bad=bad):
                    a[name] = a[name].copy()
                    a[name].reshape(-1)[0] = bad

                add("tensor-nonfinite", f"{name}={bad}", nonfinite, "refuse")
        for dtype in ("float16", "float32", "float64", "int32", "int64", "uint8", "bool"):
            if np.dtype(dtype) != value.dtype:

                def cast(a, name=name, dtype=dtype):
                    a[name] = a[name].astype(dtype)

                add("tensor-dtype", f"{name}:{dtype}", cast)
        shapes = {
            "flat": lambda v: v.reshape(-1),
            "lead": lambda v: v[None],
            "short": lambda v: v.reshape(-1)[:-1] if v.ndim < 2 else v[:-1],
            "long": lambda v: np.concatenate([v, v[-1:]]) if v.ndim else v[None],
            "empty": lambda v: v.reshape(-1)[:0],
            "transposed": lambda v: v.T,
        }
        for label, reshape in shapes.items():
            new = reshape(value)
            if new.shape != value.shape:

                def shaped(a, name=name, reshape=reshape):
                    a[name] = np.ascontiguousarray(reshape(a[name]))

                add("tensor-shape", f"{name}:{label}", shaped)

        def drop(a, name=name):
            del a[name]

        add("tensor-set", f"drop:{name}", drop, "refuse")
    for extra in ("expert0.extra", "expert9.head.weight", "gated.x", "m7.coef", "unrelated"):

        def plus(a, extra=extra):
            a[extra] = np.zeros(3, dtype=np.float32)

        add("tensor-set", f"add:{extra}", plus)
    return cases


def _json_cases(base: str, root: Path) -> list[Case]:
    doc = json.loads((root / "model.json").read_text())
    paths = _paths(doc)
    if base == "combo":
        paths = [p for p in paths if p[:2] == ("info", "combination") or p[:1] == ("files",)]
    skip = ("metrics", "cluster_sizes", "sgem_version")  # the card's facts, not used to predict
    paths = [p for p in paths if p[0] not in skip and p[:2] not in (("info", "leaderboard"),)]
    cases = []
    for path in paths:
        label = ".".join(map(str, path))
        for kind, value in WRONG.items():
            edit = _set(path, value, delete=kind == "delete")
            apply = _json(edit)
            optional = path in OPTIONAL and (kind == "delete" or not value)
            cases.append(
                Case(
                    "json-value",
                    f"{base}:{label}={kind}",
                    base,
                    "model.json",
                    apply,
                    accept=_as_saved_without if optional else None,
                )
            )
    return cases


#: optional parts of model.json: without them (deleted, null, empty) a model predicts as one
#: saved without them (raw probabilities, the MoE alone); model.json has no checksum of its own
OPTIONAL = {
    ("info", "calibration"),
    ("info", "calibration", "temperature"),
    ("info", "calibration", "floor"),
    ("info", "combination"),
}


def _as_saved_without(snap: dict, base: dict) -> bool:
    from loader_fuzz import same

    return all(same(snap[k], base[k]) for k in ("cluster", "expert", "outputs"))


def _semantic_cases(base: str) -> list[Case]:
    """Hand-made inconsistencies between model.json's parts (and with the tensors)."""

    def arch(ops, inputs):
        return lambda d: d["experts"][0].update(architecture={"ops": ops, "inputs": inputs})

    edits: dict[str, Callable[[dict], Any]] = {
        "assignment-expert-out-of-range": lambda d: d["assignment"].__setitem__(0, 2),
        "assignment-negative": lambda d: d["assignment"].__setitem__(0, -1),
        "assignment-short": lambda d: d["assignment"].pop(),
        "assignment-long": lambda d: d["assignment"].append(0),
        "assignment-float": lambda d: d["assignment"].__setitem__(0, 1.0),
        "assignment-bool": lambda d: d["assignment"].__setitem__(0, True),
        "experts-one-fewer": lambda d: d["experts"].pop(),
        "experts-one-more": lambda d: d["experts"].append(dict(d["experts"][0], index=2)),
        "experts-untrained-but-used": lambda d: d["experts"][0].update(trained=False),
        "arch-unknown-op": arch(["evil_op", "linear", "linear"], [0, 1, 1]),
        "arch-input-ahead": arch(["dropout", "linear", "linear"], [0, 5, 1]),
        "arch-input-negative": arch(["dropout", "linear", "linear"], [0, -1, 1]),
        "arch-too-few-nodes": arch(["linear"], [0]),
        "arch-extra-key": lambda d: d["experts"][0]["architecture"].update(exec="rm -rf /"),
        "arch-op-not-str": arch([1, 2, 3], [0, 1, 1]),
        "n_out-mismatch": lambda d: d["task"].update(n_out=3),
        "n_out-huge": lambda d: d["task"].update(n_out=10**9),
        "n_classes-mismatch": lambda d: d["task"].update(n_classes=3),
        "classes-one-more": lambda d: d["task"]["classes"].append("maybe"),
        "classes-duplicate": lambda d: d["task"].update(classes=["no", "no"]),
        "loss-unknown": lambda d: d["task"].update(loss="hinge"),
        "loss-student_t": lambda d: d["task"].update(loss="student_t"),
        "input_shape-wrong": lambda d: d["task"].update(input_shape=[5]),
        "input_shape-negative": lambda d: d["task"].update(input_shape=[-4]),
        "input_shape-huge": lambda d: d["task"].update(input_shape=[10**9]),
        "input_shape-2d": lambda d: d["task"].update(input_shape=[2, 2]),
        "space-hidden-huge": lambda d: d["space"].update(hidden=10**9),
        "space-hidden-zero": lambda d: d["space"].update(hidden=0),
        "space-n_nodes-huge": lambda d: d["space"].update(n_nodes=10**6),
        "space-unknown-setting": lambda d: d["space"].update(command="id"),
        "space-unknown-op": lambda d: d["space"]["ops"].append("evil_op"),
        "space-kind-darts": lambda d: d["space"].update(kind="darts"),
        "gate-learnable": lambda d: d.update(gate="learnable"),
        "gate-unknown": lambda d: d.update(gate="magic"),
        "format-other": lambda d: d.update(format="pickle"),
        "format_version-2": lambda d: d.update(format_version=2),
        "format_version-0": lambda d: d.update(format_version=0),
        "format_version-float": lambda d: d.update(format_version=1.0),
        "format_version-str": lambda d: d.update(format_version="1"),
        "preprocessing-kind-image": lambda d: d["preprocessing"].update(kind="image"),
        "preprocessing-kind-forecast": lambda d: d["preprocessing"].update(kind="forecast"),
        "preprocessing-n_features": lambda d: d["preprocessing"].update(n_features=5),
        "feature_names-short": lambda d: d["preprocessing"]["feature_names"].pop(),
        "encoding-column-dropped": lambda d: d["info"]["encoding"]["columns"].pop(),
        "encoding-unknown-kind": lambda d: d["info"]["encoding"]["columns"][0].update(kind="x"),
        "encoding-format": lambda d: d["info"]["encoding"].update(format="sgem.table/9"),
        "temperature-zero": lambda d: d["info"]["calibration"].update(temperature=0.0),
        "temperature-negative": lambda d: d["info"]["calibration"].update(temperature=-1.0),
        "floor-negative": lambda d: d["info"]["calibration"].update(floor=-0.01),
        "floor-above-half": lambda d: d["info"]["calibration"].update(floor=0.9),
        "floor-str": lambda d: d["info"]["calibration"].update(floor="0.01"),
        "calibration-list": lambda d: d["info"].update(calibration=[1, 2]),
        "target-std-zero": lambda d: d["info"].update(target_standardisation={"std": 0}),
        "files-unlisted": lambda d: d.update(files={}),
        "files-bad-sha": lambda d: d["files"].update({"experts.safetensors": "0" * 64}),
        "files-outside": lambda d: d["files"].update({"../../etc/passwd": "0" * 64}),
        "files-members-unlisted": lambda d: d["files"].update({"members.safetensors": "0"}),
        "combination-without-members": lambda d: d["info"].update(combination={"weights": [1]}),
        "top-level-list": lambda d: [d],
        "top-level-extra-key": lambda d: d.update(comment="a note"),
        "deep-nesting": lambda d: d["info"].update(note=json.loads("[" * 50 + "]" * 50)),
    }
    harmless = {"arch-extra-key", "top-level-extra-key", "deep-nesting", "target-std-zero"}
    harmless |= {"files-outside"}  # an entry for a file no loader reads
    return [
        Case(
            "json-semantic",
            f"{base}:{name}",
            base,
            "model.json",
            _json(edit),
            "either" if name in harmless else "refuse",
        )
        for name, edit in edits.items()
    ]


def _file_cases(base: str, root: Path) -> list[Case]:
    outside = root.parent / "outside"

    def symlink_out(name: str) -> Callable[[Path], None]:
        def apply(r: Path) -> None:
            outside.mkdir(exist_ok=True)
            shutil.copy(r / name, outside / name)  # an identical copy: checksums still match
            (r / name).unlink()
            (r / name).symlink_to(outside / name)

        return apply

    def replace(name: str, make: Callable[[Path], None]) -> Callable[[Path], None]:
        def apply(r: Path) -> None:
            (r / name).unlink()
            make(r / name)

        return apply

    def extra(name: str, data: bytes) -> Callable[[Path], None]:
        return lambda r: (r / name).write_bytes(data)

    cases = []
    for name in MODEL_FILES:
        cases += [
            Case("files", f"missing:{name}", base, name, lambda r, n=name: (r / n).unlink()),
            Case("files", f"empty:{name}", base, name, extra(name, b"")),
            Case("files", f"dir:{name}", base, name, replace(name, Path.mkdir)),
            Case("files", f"fifo:{name}", base, name, replace(name, os.mkfifo)),
            Case("symlink", f"outside:{name}", base, name, symlink_out(name), "refuse"),
            Case(
                "symlink",
                f"dangling:{name}",
                base,
                name,
                replace(name, lambda p: p.symlink_to(p.parent / "nowhere")),
                "refuse",
            ),
        ]
    cases.append(
        Case(
            "symlink",
            "/etc/passwd",
            base,
            "model.json",
            replace("model.json", lambda p: p.symlink_to("/etc/passwd")),
            "refuse",
        )
    )
    payload = b"\x80\x04\x95cos\nsystem\n(S'touch ../executed'\ntR."
    for name, data in {
        "README.txt": b"notes",
        "model.pkl": payload,
        "pytorch_model.bin": payload,
        "experts.pt": payload,
        ".hidden": b"x",
        "model.json.bak": b"{}",
    }.items():
        cases.append(Case("files", f"extra:{name}", base, name, extra(name, data), "load"))
    cases.append(Case("files", "extra:subdir", base, "sub", lambda r: (r / "sub").mkdir(), "load"))
    return cases


def all_cases(bases: dict[str, Path]) -> list[Case]:
    from loader_fuzz_run import run_cases

    cases: list[Case] = []
    for base in ("table", "combo"):
        if base in bases:
            cases += model_cases(base, bases[base])
    if "run" in bases:
        cases += run_cases(bases["run"])
    return cases


def sql(statements: list[str]) -> Callable[[Path], None]:
    """Edit store.sqlite of a run copy through SQL (a buggy writer's values)."""

    def apply(root: Path) -> None:
        with sqlite3.connect(root / "store.sqlite") as db:
            for s in statements:
                db.execute(s)
        db.close()

    return apply


def subset(cases: list[Case], per_class: int) -> list[Case]:
    """At most `per_class` cases of each class, spread evenly over it (deterministic)."""
    by_class: dict[str, list[Case]] = {}
    for case in cases:
        by_class.setdefault(case.cls, []).append(case)
    out: list[Case] = []
    for group in by_class.values():
        step = max(1, -(-len(group) // per_class))
        out += group[::step][:per_class]
    return out
