"""What each domain asks of the architecture: the operation-effect table (paper Table ts_ops).

Every surrogate observation is a triple (architecture, training mask, per-cluster
validation loss), so a finished search already holds the material, at no extra training
cost. The analysis (`op_effects`):

1. keep the (observation, cluster) pairs whose cluster was in the training mask (the
   in-mask losses: how well the architecture fits data it was trained on);
2. give every cluster its domain (the majority domain, the task's `oracle_partition`);
3. standardise the losses within each domain (and run, when several runs are pooled),
   after winsorising them at the `clip_quantile` of the domain (a diverged training
   would otherwise set the scale): this removes the overall strength of an architecture
   and the difficulty of the domain, leaving only the domain's preference;
4. the effect of an op on a domain = mean standardised loss of pairs whose architecture
   contains the op - mean of those without it (negative = the op helps), with a 95%
   bootstrap interval over observations (pairs of one observation are resampled together);
5. the Spearman correlation of the ops' effects between every two domains (do the domains
   rank the ops alike?);
6. the architecture spread per domain: from the store, the std over distinct
   architectures of their mean in-mask loss on the domain (`spread_from_observations`);
   the paper's row (std of the real region NLL of random architectures under oracle
   routing) needs new trainings: `sgem.report.architecture_spread.measure_architecture_spread`.

`load_run` reads a run directory written by `sgem run` (through `RunDirectory` and the
observation store's read-only reader, `sgem.search.store.read_completed`);
`format_op_table` renders the result as markdown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
from scipy import stats

from ..run.rundir import CONFIG, RESULT, STORE, RunDirectory
from ..search.store import Observation, read_completed
from ..space.arch import Arch


@dataclass(frozen=True)
class RunObservations:
    """The completed observations of one run, with each cluster's domain."""

    archs: list[Arch]
    masks: np.ndarray  # (n, M) bool
    losses: np.ndarray  # (n, M)
    cluster_domain: np.ndarray  # (M,) domain id per cluster
    domain_names: list[str]
    op_names: tuple[str, ...] = ()  # the space's ops, in its order (table row order)

    def __post_init__(self) -> None:
        n, m = len(self.archs), len(self.cluster_domain)
        if self.masks.shape != (n, m) or self.losses.shape != (n, m):
            raise ValueError(
                f"expected masks and losses of shape (n_observations, M) = ({n}, {m}) for "
                f"{n} archs and {m} clusters, got masks {self.masks.shape} and losses "
                f"{self.losses.shape}"
            )


def load_run(run_dir: str | Path) -> RunObservations:
    """Completed observations of a run directory, clusters labelled by majority domain.

    Reads the run through `RunDirectory` (result.json, config.yaml) and the store's
    read-only reader (`sgem.search.store.read_completed`: schema version and cluster count
    checked); writes nothing, so a read-only run directory works."""
    rundir = RunDirectory(run_dir)
    for name in (RESULT, STORE):
        if not rundir.file(name).is_file():
            raise ValueError(f"{run_dir} is not a finished run directory: {name} missing")
    result = rundir.read_result()
    oracle = result.get("oracle_partition")
    if oracle is None:
        raise ValueError(
            f"{run_dir}: the run's task has no oracle partition (domain per cluster); the "
            "operation-effect analysis needs one"
        )
    cluster_domain = np.asarray(oracle, dtype=np.int64)
    names = result.get("domain_names") or [str(d) for d in range(int(cluster_domain.max()) + 1)]
    observations = completed_observations(rundir.file(STORE), len(cluster_domain))
    if not observations:
        raise ValueError(f"{rundir.file(STORE)} holds no completed observation")
    op_names: tuple[str, ...] = ()
    if rundir.file(CONFIG).is_file():
        space = rundir.read_config().get("run", {}).get("space", {})
        op_names = tuple(space.get("ops", ()))
    return RunObservations(
        [o.arch for o in observations],
        np.array([o.mask for o in observations], bool),
        np.array([o.losses for o in observations], float),
        cluster_domain,
        list(names),
        op_names,
    )


def completed_observations(path: str | Path, n_clusters: int) -> list[Observation]:
    """The completed trainings of a store file, each (architecture, mask) once (a retried or
    reused training counts once), in the order they were first recorded; read-only
    (`sgem.search.store.read_completed`), so a finished run can be analysed where it cannot be
    written."""
    return read_completed(path, n_clusters)


def _pairs(run: RunObservations, clip_quantile: float) -> dict[int, dict[str, np.ndarray]]:
    """Per domain id: standardised in-mask losses `z`, their observation `obs`."""
    out: dict[int, dict[str, np.ndarray]] = {}
    obs_idx, cluster = np.nonzero(run.masks)
    loss = run.losses[obs_idx, cluster]
    finite = np.isfinite(loss)
    obs_idx, cluster, loss = obs_idx[finite], cluster[finite], loss[finite]
    domain = run.cluster_domain[cluster]
    for d in np.unique(domain):
        sel = domain == d
        v = loss[sel]
        if clip_quantile < 1.0:
            v = np.minimum(v, np.quantile(v, clip_quantile))
        std = v.std()
        z = (v - v.mean()) / (std if std > 1e-12 else 1.0)
        out[int(d)] = {"z": z, "obs": obs_idx[sel], "cluster": cluster[sel]}
    return out


def spread_from_observations(run: RunObservations, domain: int) -> float:
    """Std over distinct architectures of their mean in-mask loss on the domain's clusters."""
    per_arch: dict[Arch, list[float]] = {}
    on_domain = run.cluster_domain == domain
    for arch, mask, loss in zip(run.archs, run.masks, run.losses, strict=True):
        sel = mask & on_domain & np.isfinite(loss)
        if sel.any():
            per_arch.setdefault(arch, []).extend(loss[sel].tolist())
    means = [float(np.mean(v)) for v in per_arch.values()]
    return float(np.std(means)) if len(means) > 1 else float("nan")


def op_effects(
    runs: RunObservations | Sequence[RunObservations],
    ops: Sequence[str] | None = None,
    n_bootstrap: int = 1000,
    clip_quantile: float = 0.99,
    seed: int = 0,
) -> dict:
    """The operation-effect table from one or several runs' observations (module docstring).

    Runs are pooled by domain name. Returns a dict with `ops`, `domains`, `effects`
    ({op: {domain: {effect, lo, hi, significant, n_with, n_without}}}), `spearman`
    ({"a vs b": rho}), `spread` ({domain: std}), `n_observations` and `n_pairs`.
    """
    runs = [runs] if isinstance(runs, RunObservations) else list(runs)
    if not runs:
        raise ValueError("op_effects needs at least one run")
    if not 0.5 < clip_quantile <= 1.0:
        raise ValueError(f"clip_quantile must lie in (0.5, 1], got {clip_quantile}")
    if ops is None:
        used = {op for r in runs for a in r.archs for op in a.ops}
        declared = [op for r in runs for op in r.op_names]
        ops = list(dict.fromkeys([*declared, *sorted(used)]))
    domains = list(dict.fromkeys(name for r in runs for name in r.domain_names))
    rng = np.random.default_rng(seed)
    effects: dict[str, dict[str, dict]] = {op: {} for op in ops}
    spread: dict[str, float] = {}
    n_pairs = 0
    for name in domains:
        # per domain: sums of z and counts per observation, with and without each op
        s_with, c_with, s_wo, c_wo = ([] for _ in range(4))
        spreads = []
        for run in runs:
            if name not in run.domain_names:
                continue
            d = run.domain_names.index(name)
            pairs = _pairs(run, clip_quantile).get(d)
            spreads.append(spread_from_observations(run, d))
            if pairs is None:
                continue
            n_obs = len(run.archs)
            n_pairs += len(pairs["z"])
            has = np.array([[op in a.ops for a in run.archs] for op in ops])  # (ops, n)
            z_sum = np.bincount(pairs["obs"], weights=pairs["z"], minlength=n_obs)
            count = np.bincount(pairs["obs"], minlength=n_obs).astype(float)
            s_with.append(has * z_sum)
            c_with.append(has * count)
            s_wo.append(~has * z_sum)
            c_wo.append(~has * count)
        spread[name] = float(np.nanmean(spreads)) if spreads else float("nan")
        if not s_with:
            continue
        sw, cw, so, co = (np.concatenate(v, axis=1) for v in (s_with, c_with, s_wo, c_wo))
        n_obs = sw.shape[1]
        weights = rng.multinomial(n_obs, np.full(n_obs, 1.0 / n_obs), size=n_bootstrap)
        for i, op in enumerate(ops):
            if cw[i].sum() == 0 or co[i].sum() == 0:
                effects[op][name] = {
                    "effect": float("nan"),
                    "lo": float("nan"),
                    "hi": float("nan"),
                    "significant": False,
                    "n_with": int(cw[i].sum()),
                    "n_without": int(co[i].sum()),
                }
                continue
            effect = sw[i].sum() / cw[i].sum() - so[i].sum() / co[i].sum()
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = weights @ sw[i] / (weights @ cw[i]) - weights @ so[i] / (weights @ co[i])
            boot = boot[np.isfinite(boot)]
            lo, hi = np.quantile(boot, [0.025, 0.975]) if len(boot) else (float("nan"),) * 2
            effects[op][name] = {
                "effect": float(effect),
                "lo": float(lo),
                "hi": float(hi),
                "significant": bool(lo > 0 or hi < 0),
                "n_with": int(cw[i].sum()),
                "n_without": int(co[i].sum()),
            }
    spearman: dict[str, float] = {}
    for a, b in combinations(domains, 2):
        ea = np.array([effects[op].get(a, {}).get("effect", np.nan) for op in ops])
        eb = np.array([effects[op].get(b, {}).get("effect", np.nan) for op in ops])
        ok = np.isfinite(ea) & np.isfinite(eb)
        rho = stats.spearmanr(ea[ok], eb[ok]).statistic if ok.sum() >= 3 else np.nan
        spearman[f"{a} vs {b}"] = float(rho)
    return {
        "ops": list(ops),
        "domains": domains,
        "effects": effects,
        "spearman": spearman,
        "spread": spread,
        "spread_definition": "std over distinct architectures of their mean in-mask "
        "validation loss on the domain's clusters (from the stored observations)",
        "n_observations": sum(len(r.archs) for r in runs),
        "n_pairs": n_pairs,
    }


def format_op_table(result: dict) -> str:
    """Markdown: op x domain effects (bold = 95% interval excludes 0), spread and rho."""
    domains = result["domains"]
    lines = [
        "| operation | " + " | ".join(domains) + " |",
        "|---|" + "---|" * len(domains),
    ]
    for op in result["ops"]:
        cells = []
        for d in domains:
            e = result["effects"][op].get(d)
            if e is None or not np.isfinite(e["effect"]):
                cells.append("n/a")
                continue
            text = f"{e['effect']:+.2f}"
            cells.append(f"**{text}**" if e["significant"] else text)
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    lines.append(
        "| architecture spread | "
        + " | ".join(f"{result['spread'].get(d, float('nan')):.3f}" for d in domains)
        + " |"
    )
    lines.append("")
    lines.append(
        f"{result['n_observations']} observations, {result['n_pairs']} in-mask (observation, "
        "cluster) pairs. Negative = the operation helps; bold: 95% bootstrap interval excludes "
        "0. Spread: " + result["spread_definition"] + "."
    )
    lines.append("")
    lines.append("Spearman correlation of op effects between domains:")
    lines.append("")
    for pair, rho in result["spearman"].items():
        lines.append(f"- {pair}: {rho:+.2f}")
    return "\n".join(lines)


__all__ = [
    "RunObservations",
    "completed_observations",
    "format_op_table",
    "load_run",
    "op_effects",
    "spread_from_observations",
]
