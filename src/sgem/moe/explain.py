"""Why this expert: for each row (table, toy, image) or series, where the router sent it and
how sure that choice is, and what the fit measured about the expert it went to.

    model.explain(x)                 # DataFrame: cluster, distances, expert, validation NLLs
    model.explain_importance(x, y)   # tables: permutation importance per expert and column
    sgem explain RUN INPUT [--out explain.csv] [--importance]

Routing is a nearest-centroid rule in the clustering space (standardised features for a
table, scale-free descriptors of the last context window for a series, the stored embedding
for an image), so its honest explanation is the distance to every centroid: the chosen
cluster is the nearest, and the gap to the next one says how close the row came to another
expert. A learnable gate decides by its own probabilities, shown beside the distances. The
validation NLLs come from the fit's leaderboard (`per_cluster` of model.json's
"leaderboard": the searched expert and the fallback network on the cluster's validation
samples); a model saved before they were stored shows NaN there.

This module never imports `sgem.moe.model` (which imports it lazily): it reads a model
through `Explainable`.
"""

from __future__ import annotations

import warnings
from typing import Any, Protocol

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..data.table_contract import TableWarning
from ..errors import SgemUserError
from ..space.arch import Arch
from .artifact import ModelSpec
from .combination import sample_nll
from .preprocess import (
    ForecastPreprocessor,
    Preprocessor,
    TabularPreprocessor,
)


class Explainable(Protocol):
    """What explanations read of a loaded `SgemModel`."""

    spec: ModelSpec
    preprocessor: Preprocessor
    moe: nn.Module
    combination: Any

    @property
    def learnable_gate(self) -> bool: ...

    @property
    def is_classifier(self) -> bool: ...

    @property
    def classes(self) -> list: ...

    def route(self, x: Any, embeddings: np.ndarray | None = None) -> Any: ...


def _space(
    model: Explainable, x: Any, embeddings: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(coordinates in the clustering space, float64; the experts' inputs), computed as the
    preprocessor computes them when it routes (call after `route`, which validates `x`)."""
    pre = model.preprocessor
    if isinstance(pre, TabularPreprocessor):
        with warnings.catch_warnings():  # route() has already said what it had to
            warnings.simplefilter("ignore", TableWarning)
            feats = np.asarray(pre.features(x, model.spec.info.get("encoding")), np.float64)
        z = (feats.reshape(-1, pre.n_features) - pre.mean) / pre.std
        return z, z.astype(np.float32)
    if isinstance(pre, ForecastPreprocessor):
        from ..data.timeseries import clustering_features

        scaled, _ = pre.windows(x)
        z = (clustering_features(scaled) - pre.descriptor_mean) / pre.descriptor_std
        return z, scaled.astype(np.float32)
    images = pre.check(x)
    if embeddings is None:
        z = pre._embedder().transform(images)  # the stored embedding (route() used it too)
    else:
        z = np.asarray(embeddings, dtype=np.float64)
    return z.reshape(len(images), -1), pre.pixels(images)


def _distances(z: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """(n, clusters) Euclidean distances, one centroid at a time (bounded memory)."""
    return np.stack([np.linalg.norm(z - c, axis=1) for c in np.asarray(centroids)], axis=1)


def _per_cluster(model: Explainable) -> tuple[dict, set[int]]:
    board = model.spec.info.get("leaderboard") or {}
    return board.get("per_cluster") or {}, set(board.get("fallback_clusters") or [])


def explain(
    model: Explainable,
    x: Any,
    embeddings: np.ndarray | None = None,
    ids: list | None = None,
) -> pd.DataFrame:
    """One row per sample (or series): `cluster` and `expert` exactly as `predict` routes
    them, `distance_c{j}` to every centroid and `margin` (second nearest minus nearest), a
    learnable gate's `gate_e{k}` probabilities, the expert's `cell`, and the fit's
    validation NLL on the cluster of its searched expert (`expert_val_nll`) beside the
    fallback network's (`fallback_val_nll`), `rerouted` where the leaderboard sent the
    cluster to that network, and `val_n` validation samples behind both."""
    routing = model.route(x, embeddings=embeddings)
    z, x_model = _space(model, x, embeddings)
    cluster, expert = np.asarray(routing.cluster), np.asarray(routing.expert)
    n = len(cluster)
    if ids is not None and len(ids) != n:
        raise SgemUserError(f"{len(ids)} ids given for {n} samples")
    dist = _distances(z, model.preprocessor.centroids)
    key = "unique_id" if isinstance(model.preprocessor, ForecastPreprocessor) else "row"
    frame = pd.DataFrame({key: ids if ids is not None else np.arange(n)})
    frame["cluster"], frame["expert"] = cluster, expert
    cells = [Arch.from_json(a).key for a in model.spec.architectures]
    frame["cell"] = [cells[k] for k in expert]
    ordered = np.sort(dist, axis=1)
    frame["margin"] = ordered[:, 1] - ordered[:, 0] if dist.shape[1] > 1 else np.inf
    scores, rerouted = _per_cluster(model)
    frame["rerouted"] = [int(c) in rerouted for c in cluster]
    for col, field in (
        ("expert_val_nll", "expert_nll"),
        ("fallback_val_nll", "fallback_nll"),
        ("val_n", "n"),
    ):
        frame[col] = [(scores.get(str(c)) or {}).get(field, np.nan) for c in cluster]
    for j in range(dist.shape[1]):
        frame[f"distance_c{j}"] = dist[:, j]
    if model.learnable_gate:
        with torch.no_grad():
            gate = model.moe.gate_weights(torch.as_tensor(x_model)).numpy()
        for k in range(gate.shape[1]):
            frame[f"gate_e{k}"] = gate[:, k]
    return frame


def _column_groups(model: Explainable) -> list[tuple[str, list[int]]]:
    """Each input column and the model features it becomes (a categorical column: its
    one-hot block; a column with a missing-value indicator: both), in feature order."""
    pre = model.preprocessor
    assert isinstance(pre, TabularPreprocessor)
    encoding = model.spec.info.get("encoding")
    if not encoding:
        names = pre.feature_names or [f"x{i}" for i in range(pre.n_features)]
        return [(str(name), [i]) for i, name in enumerate(names)]
    groups, start = [], 0
    for spec in encoding["columns"]:
        width = (
            len(spec["categories"]) if spec["kind"] == "onehot" else 1 + bool(spec.get("indicator"))
        )
        groups.append((str(spec["name"]), list(range(start, start + width))))
        start += width
    return groups


def _targets(model: Explainable, y: Any, n: int) -> np.ndarray:
    """`y` in the units the experts were trained on (class indices; standardised targets)."""
    y = np.asarray(y)
    if len(y) != n:
        raise SgemUserError(f"x has {n} rows but y has {len(y)}")
    if model.is_classifier:
        if not model.spec.classes:
            return y.astype(np.int64)
        index = {str(c): i for i, c in enumerate(model.classes)}
        unknown = sorted({str(v) for v in y} - set(index))
        if unknown:
            raise SgemUserError(f"labels {unknown[:5]} are not the model's classes {model.classes}")
        return np.asarray([index[str(v)] for v in y], dtype=np.int64)
    target = model.spec.info.get("target_standardisation") or {"mean": 0.0, "std": 1.0}
    try:
        values = y.astype(np.float64)
    except ValueError as exc:
        raise SgemUserError(f"regression targets must be numbers: {exc}") from exc
    if not np.isfinite(values).all():
        raise SgemUserError("the targets hold NaN or inf; drop those rows first")
    return ((values - float(target["mean"])) / float(target["std"])).reshape(n, -1)


@torch.no_grad()
def _expert_nll(model: Explainable, k: int, x: np.ndarray, y: np.ndarray) -> float:
    out = model.moe.experts[k](torch.as_tensor(x)).double().numpy()
    return float(sample_nll(out, y, model.spec.loss).mean())


def permutation_importance(
    model: Explainable, x: Any, y: Any, n_repeats: int = 5, seed: int = 0
) -> pd.DataFrame:
    """Tables: for each expert, on the rows routed to it, how much its mean NLL rises when
    one input column is shuffled among those rows (`n_repeats` shuffles from `seed`; a
    categorical column's one-hot block moves together). Routing is held fixed: this is the
    expert's own use of the column, not the router's. Columns: expert, column, importance
    (mean NLL increase), std, rows; largest first within each expert."""
    _require_table(model)
    if n_repeats < 1:
        raise SgemUserError(f"n_repeats must be at least 1, got {n_repeats}")
    expert = np.asarray(model.route(x).expert)
    _, x_model = _space(model, x, None)
    y_model = _targets(model, y, len(x_model))
    rng = np.random.default_rng(seed)
    records = []
    for k in np.unique(expert):
        rows = np.flatnonzero(expert == k)
        xs, ys = x_model[rows], y_model[rows]
        base = _expert_nll(model, int(k), xs, ys)
        for name, cols in _column_groups(model):
            rises = []
            for _ in range(n_repeats):
                shuffled = xs.copy()
                shuffled[:, cols] = xs[rng.permutation(len(rows))][:, cols]
                rises.append(_expert_nll(model, int(k), shuffled, ys) - base)
            records.append(
                {
                    "expert": int(k),
                    "column": name,
                    "importance": float(np.mean(rises)),
                    "std": float(np.std(rises)),
                    "rows": len(rows),
                }
            )
    frame = pd.DataFrame.from_records(records)
    frame = frame.sort_values(["expert", "importance"], ascending=[True, False], kind="stable")
    return frame.reset_index(drop=True)


def _require_table(model: Explainable) -> None:
    if not isinstance(model.preprocessor, TabularPreprocessor):
        raise SgemUserError(
            "permutation importance is for table models (features in columns); this model "
            f"reads {model.preprocessor.kind} inputs"
        )


def targets_in(model: Explainable, x: Any, path: str | None = None) -> np.ndarray:
    """The true targets that came with an input: a table's target column (the fit's), or
    array 'y' of an NPZ file."""
    _require_table(model)
    if isinstance(x, pd.DataFrame):
        encoding = model.spec.info.get("encoding") or {}
        target = encoding.get("target") or model.spec.info.get("target")
        if not target or target not in x.columns:
            raise SgemUserError(
                f"--importance needs the true targets: the table has no column {target!r} "
                "(the model's target)"
            )
        return x[target].to_numpy()
    if path is not None and str(path).lower().endswith(".npz"):
        with np.load(path, allow_pickle=False) as data:
            if "y" in data:
                return data["y"]
    raise SgemUserError("--importance needs the true targets: array 'y' beside 'x' in the NPZ")


def _number(value: Any) -> str:
    return "-" if value is None or value != value else f"{float(value):.4f}"


def _count(value: Any) -> str:
    return "-" if value is None or value != value else str(int(value))


def explain_lines(
    model: Explainable,
    frame: pd.DataFrame,
    importance: pd.DataFrame | None = None,
    rows: int = 20,
) -> list[str]:
    """The explanation as text (`sgem explain`): per cluster seen, its expert and the
    validation NLLs behind the choice; the first `rows` rows with their nearest clusters;
    the importance table."""
    s = model.spec
    key = frame.columns[0]
    lines = [
        f"{len(frame)} {'series' if key == 'unique_id' else 'rows'} explained: {s.n_clusters} "
        f"clusters, {s.n_experts} experts ({s.gate}-gated); a row goes to its nearest cluster's "
        "expert"
        + (", a learnable gate picks by its probabilities" if model.learnable_gate else ""),
        "per cluster (validation NLL of its searched expert and of the fallback network; "
        "rerouted: the leaderboard sent the cluster to that network):",
        f"  {'cluster':>7s} {'n':>6s} {'expert':>6s} {'expert_val':>10s} {'fallback_val':>12s} "
        f"{'val_n':>5s}  rerouted",
    ]
    for c, group in frame.groupby("cluster", sort=True):
        r = group.iloc[0]
        lines.append(
            f"  {c:7d} {len(group):6d} {r['expert']:6d} {_number(r['expert_val_nll']):>10s} "
            f"{_number(r['fallback_val_nll']):>12s} {_count(r['val_n']):>5s}  "
            f"{'yes' if r['rerouted'] else 'no'}"
        )
    cells = frame.drop_duplicates("expert").sort_values("expert")
    lines.append("experts: " + "; ".join(f"{r.expert} = cell {r.cell}" for r in cells.itertuples()))
    dist = frame[[c for c in frame.columns if c.startswith("distance_c")]].to_numpy()
    shown = min(rows, len(frame))
    lines.append(f"first {shown} of {len(frame)} (--rows N shows more; --out writes all):")
    for i in range(shown):
        r = frame.iloc[i]
        near = ", ".join(f"c{j} {dist[i, j]:.3f}" for j in np.argsort(dist[i])[:3])
        gate = [c for c in frame.columns if c.startswith("gate_e")]
        gates = f"; gate {r[gate].to_numpy().round(3).tolist()}" if gate else ""
        lines.append(
            f"  {key} {r[key]}: cluster {r['cluster']} -> expert {r['expert']} "
            f"(nearest {near}; margin {r['margin']:.3f}{gates})"
        )
    if model.combination is not None:
        names = ", ".join(getattr(model.combination, "names", []))
        lines.append(f"note: predictions mix the routed expert with {names} (a combination)")
    if importance is not None and len(importance):
        lines.append("permutation importance (mean NLL rise when the column is shuffled):")
        for k, group in importance.groupby("expert", sort=True):
            top = ", ".join(f"{r.column} {r.importance:+.4f}" for r in group.head(8).itertuples())
            lines.append(f"  expert {k} ({group['rows'].iloc[0]} rows): {top}")
    return lines


__all__ = ["Explainable", "explain", "explain_lines", "permutation_importance", "targets_in"]
