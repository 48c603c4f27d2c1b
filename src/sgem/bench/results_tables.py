"""How benchmarks/results_md.py turns one result JSON into a Markdown table: each `kind` named
in benchmarks/results/measurements.txt is a function here, `kind(data, argument) -> lines`."""

from __future__ import annotations

METRICS = ("test_nll", "rel_wql", "test_crps", "test_accuracy", "learnable_gate_accuracy",
           "oracle_match", "n_trained", "seconds")  # fmt: skip
SKIP = {"machine", "config", "configs", "versions", "meta", "args", "uptime", "platform",
        "current_src", "date", "commit"}  # fmt: skip


def fmt(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list) and all(isinstance(x, int | float) for x in v) and len(v) <= 8:
        return " / ".join(fmt(x) for x in v)
    return str(v).replace("|", "\\|")


def scalars(d: dict, prefix: str = "", named: frozenset = frozenset()) -> dict:
    """The scalar leaves of `d` (nested keys joined by '.'), bookkeeping keys left out, and
    text over 40 characters unless its key is one of the `named` columns."""
    out: dict = {}
    for k, v in d.items():
        numbers = isinstance(v, list) and v and all(isinstance(x, int | float) for x in v)
        short = len(str(v)) <= 40 or prefix + k in named
        if isinstance(v, dict) and k not in SKIP:
            out.update(scalars(v, f"{prefix}{k}.", named))
        elif k not in SKIP and (isinstance(v, int | float) or numbers or short):
            out[prefix + k] = v
    return out


def table(rows: list[dict], columns: list[str] | None = None) -> list[str]:
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]


def methods(d: dict, _: str) -> list[str]:
    rows = []
    for name, s in d["summary"].items():
        row = {"method": name, "seeds": len(s.get("seeds", []))}
        row.update({m: s[m]["mean"] if isinstance(s[m], dict) else s[m] for m in METRICS if m in s})
        rows.append(row)
    return ["Means over seeds.", "", *table(rows)]


def summary(d: dict, _: str) -> list[str]:
    s = d["summary"] if "summary" in d else d["summaries"]
    return table([scalars(r) for r in (s if isinstance(s, list) else [s])])


def paired(d: dict, _: str) -> list[str]:
    parts = {"": d} if "methods" in d else {k: v for k, v in d.items() if isinstance(v, dict)}
    rows = []
    for label, part in parts.items():
        for name, m in part["methods"].items():
            seeds = list(m["per_seed"].values())
            ci = m.get("window_nll_diff", {})
            row = {"comparison": label or "-", "baseline": name}
            row["baseline NLL"] = sum(s["baseline_nll"] for s in seeds) / len(seeds)
            row["SGEM NLL"] = sum(s["sgem_nll"] for s in seeds) / len(seeds)
            row["SGEM ahead on"] = f"{m['sgem_ahead_on']}/{m['seeds']}"
            row["window NLL diff"] = f"{fmt(ci.get('mean'))} [{fmt(ci.get('ci95'))}]"
            rows.append(row)
    note = "Test NLL, mean over seeds; window diff: paired bootstrap of SGEM minus the baseline."
    return [note, "", *table(rows)]


def records(d: dict, spec: str) -> list[str]:
    key, cols = spec.split(":")
    columns = cols.split(",")
    return table([scalars(r, named=frozenset(columns)) for r in d[key]], columns)


def keyed(d: dict, key: str) -> list[str]:
    obj = d[key] if key else {k: v for k, v in d.items() if isinstance(v, dict) and k not in SKIP}
    return table([{"": k, **scalars(v)} for k, v in obj.items()])


def flat(d: dict, _: str) -> list[str]:
    rows = [{"quantity": k, "value": v} for k, v in scalars(d).items() if ".timing." not in k]
    return table(rows[:24])
