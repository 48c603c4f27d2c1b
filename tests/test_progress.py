"""Progress bars after the search (`sgem.execution.progress`): drawn only when a caller opts in."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import small_ts_space, small_ts_task

from sgem.execution.progress import shown, stage_bar
from sgem.final.expert_fit import ExpertJob, fit_expert_jobs
from sgem.train.trainer import TrainConfig, Trainer


@pytest.fixture(scope="module")
def trainer():
    task = small_ts_task(n_windows=120, n_clusters=3)
    return Trainer(task, small_ts_space(), TrainConfig(steps=2, lr=3e-3, batch_size=16))


def _jobs(trainer) -> list[ExpertJob]:
    arch = trainer.space.sample_many(1, np.random.default_rng(0))[0]
    m = trainer.task.n_clusters
    return [ExpertJob(k, arch, np.arange(m) == k, k, 2, None, None) for k in range(2)]


def test_final_stage_is_silent_unless_shown(trainer, capsys):
    fit_expert_jobs(trainer.task, trainer, _jobs(trainer), desc="final experts")
    assert "final experts" not in capsys.readouterr().err


def test_shown_draws_one_bar_per_stage_to_completion(trainer, capsys):
    with shown():
        fits = fit_expert_jobs(trainer.task, trainer, _jobs(trainer), desc="final experts")
    err = capsys.readouterr().err
    assert len(fits) == 2 and "final experts" in err and "2/2" in err


def test_shown_is_scoped_and_empty_stages_draw_nothing(capsys):
    with shown(), stage_bar(0, "nothing to do"):
        pass
    with stage_bar(3, "outside") as bar:
        bar.update(3)
    err = capsys.readouterr().err
    assert "nothing to do" not in err and "outside" not in err
