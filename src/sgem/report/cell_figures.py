"""Draw each expert's searched cell as a small graph (what `sgem show` writes).

Two encodings share the `Arch` type: in the tabular and time-series spaces node i applies
`ops[i]` to state `inputs[i]` (state 0 is the cell input), and the leaves are summed into
the output; in the DARTS space node j sums two edges (2j, 2j + 1), each an op on a state,
and all nodes are concatenated. Both are drawn left to right: input, nodes, output.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..space.arch import Arch


def _edges(arch: Arch, darts: bool) -> tuple[list[str], list[tuple[int, int, str]], list[int]]:
    """(node labels, edges (src, dst, label), nodes feeding the output); state 0 = input."""
    if darts:
        n = arch.n_nodes // 2
        labels = ["input"] + [f"node {j + 1}" for j in range(n)]
        edges = [(arch.inputs[e], e // 2 + 1, arch.ops[e]) for e in range(arch.n_nodes)]
        return labels, edges, list(range(1, n + 1))
    labels = ["input", *arch.ops]
    edges = [(src, i + 1, "") for i, src in enumerate(arch.inputs)]
    return labels, edges, [leaf + 1 for leaf in arch.leaves]


def draw_cells(
    architectures: list[dict],
    path: str | os.PathLike,
    space_kind: str = "tabular",
    titles: list[str] | None = None,
) -> Path:
    """One panel per expert: the cell's DAG from input to output, ops as labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    darts = space_kind == "darts"
    archs = [Arch.from_json(a) for a in architectures]
    fig, axes = plt.subplots(
        1, len(archs), figsize=(4.2 * len(archs), 3.2), squeeze=False, constrained_layout=True
    )
    for k, (arch, ax) in enumerate(zip(archs, axes[0], strict=True)):
        labels, edges, to_out = _edges(arch, darts)
        n = len(labels)
        pos = {i: (i, (i % 2) * 0.6 - 0.3 if 0 < i < n else 0.0) for i in range(n)}
        pos[n] = (n, 0.0)  # the output
        for src, dst, label in edges:
            _arrow(ax, pos[src], pos[dst], label)
        for i in to_out:
            _arrow(ax, pos[i], pos[n], "")
        for i, text in enumerate([*labels, "sum" if not darts else "concat"]):
            colour = "#dde8f5" if 0 < i < n else "#eeeeee"
            ax.text(
                *pos[i],
                text if i < n else f"output\n({text})",
                ha="center",
                va="center",
                fontsize=9,
                bbox={"boxstyle": "round,pad=0.35", "fc": colour, "ec": "#44546a"},
            )
        ax.set_xlim(-0.7, n + 0.7)
        ax.set_ylim(-1.0, 1.0)
        ax.axis("off")
        ax.set_title(titles[k] if titles else f"expert {k}", fontsize=10)
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _arrow(ax, a: tuple[float, float], b: tuple[float, float], label: str) -> None:
    ax.annotate(
        "",
        xy=b,
        xytext=a,
        arrowprops={"arrowstyle": "->", "color": "#44546a", "shrinkA": 14, "shrinkB": 14},
    )
    if label:
        ax.text(
            (a[0] + b[0]) / 2,
            (a[1] + b[1]) / 2 + 0.12,
            label,
            ha="center",
            fontsize=7,
            color="#8b2d2d",
        )


__all__ = ["draw_cells"]
