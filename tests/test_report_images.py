"""The cluster-representatives figure: medoids, nearest images, expert borders."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from test_darts_space import tiny_image_task

from sgem.report.image_figures import (
    cluster_representatives,
    plot_cluster_representatives,
    plot_run_representatives,
)


def test_medoid_and_nearest_members() -> None:
    # cluster 0: points on a line, the middle one is the medoid; cluster 1: two points
    feats = np.array([[0.0], [1.0], [2.0], [3.0], [10.0], [10.0], [11.0], [100.0]])
    cluster = np.array([0, 0, 0, 0, 1, 1, 1, 2])
    reps = cluster_representatives(feats, cluster, 4, n_neighbours=2)
    medoid, near = reps[0]
    assert medoid in (1, 2)  # both minimise the sum of distances on 0..3
    assert medoid not in near and len(near) == 2
    assert set(near) <= {0, 1, 2, 3}
    assert reps[1][0] == 4 or reps[1][0] == 5
    assert reps[2] == (7, reps[2][1]) and len(reps[2][1]) == 0
    assert reps[3][0] == -1
    with pytest.raises(ValueError, match="align"):
        cluster_representatives(feats, cluster[:3], 3)


def test_figure_is_written(tmp_path) -> None:
    task = tiny_image_task(n=96)
    out = plot_cluster_representatives(
        task, np.array([1, 1, 0, 0]), tmp_path / "reps.png", n_neighbours=3, title="tiny"
    )
    assert out.exists() and out.stat().st_size > 5_000
    with pytest.raises(ValueError, match="one expert per cluster"):
        plot_cluster_representatives(task, np.array([0, 1]), tmp_path / "x.png")
    with pytest.raises(ValueError, match="outside"):
        plot_cluster_representatives(task, np.zeros(4, int), tmp_path / "x.png", clusters=[7])


def test_drawn_from_a_run_directory(tmp_path) -> None:
    task = tiny_image_task(n=96)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"run": {"seed": 0, "task": {}}}))
    (run / "result.json").write_text(
        json.dumps({"routing": [0, 0, 1, 1], "seed": 0, "oracle_match": 1.0})
    )
    out = plot_run_representatives(run, task=task, n_neighbours=2)
    assert out == run / "cluster_representatives.png" and out.stat().st_size > 5_000
    (run / "result.json").write_text(json.dumps({"seed": 0}))
    with pytest.raises(ValueError, match="routing"):
        plot_run_representatives(run, task=task)
