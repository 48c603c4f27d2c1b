"""Is a table's scikit-learn member better refitted on every row? Each reference a user's
table saves (logistic / ridge regression, gradient boosting) fitted on 80 % of the
training rows (what a fit's train + validation hold) and on all of them (what `sgem fit`
saves since its members are refitted on the holdout too), scored on the same 20 % test rows,
over seeded splits: the learning curve behind `sgem.leaderboard.table_members._refit_on_every_row`.

    python benchmarks/refit_members.py --splits 8

Prints and saves benchmarks/results/refit_members.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np

from sgem.bench.user_tables import CLASSES, STATSMODELS_TABLES, TABLES, frame_of, scikit_learn

RESULTS = Path(__file__).resolve().parent / "results"


def curve(name: str, splits: int) -> list[dict]:
    """Per member: its mean test score fitted on 80 % and on 100 % of the training rows,
    and on how many splits the refit was better / worse."""
    from sklearn.model_selection import train_test_split

    frame, classes = frame_of(name), name in CLASSES
    scores: dict[str, list[tuple[float, float]]] = {}
    for seed in range(splits):
        stratify = frame["target"] if classes else None
        train, test = train_test_split(frame, test_size=0.2, random_state=seed, stratify=stratify)
        part, _ = train_test_split(
            train,
            test_size=0.2,
            random_state=100 + seed,
            stratify=train["target"] if classes else None,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            without, every = (scikit_learn(t, test, classes, seed) for t in (part, train))
        for member in without:
            scores.setdefault(member, []).append((without[member], every[member]))
    rows = []
    for member, pairs in scores.items():
        a, b = np.array(pairs).T
        gain = (b - a) if classes else (a - b)  # (positive: the refit is better)
        rows.append({
            "data": name,
            "member": member,
            "metric": "accuracy" if classes else "RMSE",
            "on_80_percent": round(float(a.mean()), 4),
            "on_every_row": round(float(b.mean()), 4),
            "refit_better": int((gain > 0).sum()),
            "refit_worse": int((gain < 0).sum()),
            "splits": splits,
        })  # fmt: skip
        print(" ".join(f"{k} {v}" for k, v in rows[-1].items()), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--splits", type=int, default=8)
    p.add_argument("--tables", nargs="+", default=[*TABLES, *STATSMODELS_TABLES])
    p.add_argument("--out", default=str(RESULTS / "refit_members.json"))
    args = p.parse_args()
    rows = [row for name in args.tables for row in curve(name, args.splits)]
    better = sum(r["refit_better"] > r["refit_worse"] for r in rows)
    sign = {"accuracy": 1.0, "RMSE": -1.0}
    mean_better = sum(
        sign[r["metric"]] * (r["on_every_row"] - r["on_80_percent"]) > 0 for r in rows
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    result = {
        "what": "scikit-learn members fitted on 80 % vs 100 % of a table's training rows, "
        "scored on the same 20 % test rows (seeds 0..splits-1 for the split, 100+seed for "
        "the 80 %)",
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit,
        "machine": platform.machine(),
        "rows": rows,
        "members_better_refitted_on_more_splits": f"{better} of {len(rows)}",
        "members_better_refitted_on_average": f"{mean_better} of {len(rows)}",
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(
        f"refitted on every row: better on more splits for {better} of {len(rows)} members, "
        f"better on average for {mean_better}"
    )
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
