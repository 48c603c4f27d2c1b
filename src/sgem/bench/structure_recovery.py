"""Whether a searched partition gives each known structure (a mixture's source) its own
experts, scored on test points (`benchmarks/mixed_csv.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

#: the share of a structure's (an expert's) test points that counts as its own
OWN = 0.9


def recovery(structure: np.ndarray, expert: np.ndarray) -> dict:
    """`recovery`: experts matched one-to-one to structures maximising matched points
    (Hungarian), matched / all points; `recovered`: every structure has >= `OWN` of its
    points on its matched expert. `separated` (what a K above the structures' count can
    meet): no expert mixes structures - every used expert's points are >= `OWN` one
    structure, and every structure has >= `OWN` of its points on experts it dominates."""
    structure, expert = np.asarray(structure), np.asarray(expert)
    n_s = int(structure.max()) + 1
    counts = np.zeros((n_s, int(expert.max()) + 1))
    np.add.at(counts, (structure, expert), 1)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    per = np.zeros(n_s)
    per[rows] = counts[rows, cols] / counts[rows].sum(1)
    used = counts.sum(0) > 0
    major = counts[:, used].argmax(0)  # each used expert's majority structure
    purity = counts[:, used].max(0) / counts[:, used].sum(0)
    owned = np.array([counts[s, used][major == s].sum() for s in range(n_s)]) / counts.sum(1)
    return {
        "recovery": round(float(counts[rows, cols].sum() / len(structure)), 4),
        "per_structure": [round(float(v), 4) for v in per],
        "recovered": bool((per >= OWN).all()),
        "separated": bool((purity >= OWN).all() and (owned >= OWN).all()),
    }


def write_csv(
    seed: int, root: Path, kinds: tuple[str, ...] = ("linear", "ring", "xor")
) -> tuple[Path, Path]:
    """A seeded mixture of `kinds` as a user meets it: train.csv (x1, x2, noise1, noise2,
    label; 1000 rows per structure) and test.csv (a fresh 500 per structure, with the
    structure)."""
    import pandas as pd

    from ..data.mixtures import sample_mixture

    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, n, stream in (("train", 1000, 0), ("test", 500, 1)):
        rng = np.random.default_rng([seed, stream, 32])
        x, y, source = sample_mixture(len(kinds), n, rng, layout_seed=seed, kinds=kinds)
        noise = rng.normal(0.0, 1.0, size=(len(x), 2))
        frame = pd.DataFrame(np.c_[x, noise], columns=["x1", "x2", "noise1", "noise2"])
        frame["label"] = y
        frame["structure"] = source  # dropped from train.csv below
        frame = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
        paths.append(root / f"{name}.csv")
        frame.drop(columns=[] if name == "test" else ["structure"]).to_csv(paths[-1], index=False)
    return paths[0], paths[1]


def saved_fit(rundir: Path, test: Path) -> dict:
    """A finished `sgem fit` run's saved model on a mixture's test file (its columns, the
    label and the structure): the experts its search used (K) of M clusters, the searched
    partition's `recovery` of the structures, and the saved model's accuracy."""
    import pandas as pd

    import sgem

    result = json.loads((rundir / "result.json").read_text())
    model = sgem.load(rundir / "model")
    frame = pd.read_csv(test)
    x = frame.drop(columns=["label", "structure"])
    searched = np.asarray(result["routing"])[model.route(x).cluster]
    return {
        "K": len(set(result["routing"])),
        "M": len(result["routing"]),
        **recovery(frame["structure"].to_numpy(), searched),
        "accuracy": round(float(np.mean(model.predict(x) == frame["label"].to_numpy())), 4),
    }


def each_k(rundir: Path, test: Path) -> dict[str, dict]:
    """Where a fit chose K among several (`result.json["experts_auto"]`), every K whose
    model is still there, scored as `saved_fit` (the first K's only where it was chosen:
    its run is the fit's own directory, which the winner replaces), with its holdout
    NLLs: what another choice of K would have saved."""
    auto = json.loads((rundir / "result.json").read_text()).get("experts_auto") or {}
    out = {}
    for row in auto.get("candidates", []):
        k = row["n_experts"]
        where = rundir / f"experts-{k}"
        if not (where / "model").is_dir():
            if k != auto["chosen"]:
                continue
            where = rundir
        holdout = {key: row.get(key) for key in ("choice_nll", "test_nll")}
        out[str(k)] = {**saved_fit(where, test), **holdout}
    return out


__all__ = ["OWN", "each_k", "recovery", "saved_fit", "write_csv"]
