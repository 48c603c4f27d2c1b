"""The image benchmark (Table cifar_main): its scales and methods.

SGEM and the baselines run under one protocol (`sgem.baselines.MethodBudget`: the same
candidate training, the same final retraining on train + validation, test once), each
optionally also under a learnable gate; `sgem.bench.images_run` runs them over seeds.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import yaml

from ..baselines import get_baseline
from ..baselines.darts import DartsConfig, DartsOracleMoE, DartsXK
from ..baselines.decomposition import decomposition_settings
from ..data.task import ClusteredTask
from ..errors import SgemUserError
from ..final.expert_fit import steps_for_epochs
from ..methods.budget import MethodBudget
from ..methods.sgem import SgemMethod
from ..moe.learnable_gate import train_learnable_gate_moe
from ..search.config import SearchConfig
from ..space import Arch
from ..train import TrainConfig
from .config import CONFIGS

METHODS = ["random_moe", "darts_x_k", "sgem", "darts_oracle"]
LABELS = {
    "random_moe": "Random-MoE",
    "darts_x_k": "DARTS×K (same arch)",
    "sgem": "**SGEM (ours)**",
    "darts_oracle": "DARTS oracle MoE *(uses source labels)*",
    "decomp_random_split_full_arch": "(i) random split, full-mix arch",
    "decomp_oracle_split_full_arch": "(i)/(ii) oracle split, full-mix arch",
    "decomp_oracle_split_source0_arch": "(ii) oracle split, source-0 arch",
    "decomp_oracle_split_source1_arch": "(ii) oracle split, source-1 arch",
}


def load_scale(scale: str) -> dict:
    """The run config of a scale (configs/images-<scale>.yaml)."""
    path = CONFIGS / f"images-{scale}.yaml"
    if not path.exists():
        raise SgemUserError(f"no configuration for scale {scale!r}: {path} is missing")
    return yaml.safe_load(path.read_text())


def search_config(cfg: dict) -> SearchConfig:
    return SearchConfig.from_dict(copy.deepcopy(cfg["search"]))


def darts_config(cfg: dict, train: TrainConfig) -> DartsConfig:
    """The DARTS baselines' search settings, their weights trained like the candidates."""
    d = dict(cfg["darts"])
    weights = dataclasses.replace(
        train,
        epochs=int(d.pop("epochs")),
        batch_size=int(d.pop("batch_size", train.minibatch)),
        lr=float(d.pop("lr", 0.025)),
        nesterov=False,
    )
    return DartsConfig(weights=weights, **d)


def run_sgem(task: ClusteredTask, cfg: dict, setup: MethodBudget, save_models: Path | None) -> dict:
    """SGEM's search and final MoE as a row (the model saved under `save_models`)."""
    space = setup.require_space("SGEM")
    result = SgemMethod(search_config(cfg)).fit_evaluate(task, setup)
    if save_models is not None:
        result.save(save_models / f"sgem-seed{setup.seed}", task, space)
    return result.row(task)


def run_method(
    method: str,
    task: ClusteredTask,
    cfg: dict,
    setup: MethodBudget,
    save_models: Path | None = None,
) -> dict:
    """One method's row on the task (SGEM, the DARTS baselines, a decomposition row or a
    baseline of `sgem.baselines`)."""
    if method == "sgem":
        return run_sgem(task, cfg, setup, save_models)
    dcfg = darts_config(cfg, setup.train)
    if method == "darts_x_k":
        return DartsXK(dcfg).fit_evaluate(task, setup).row(task)
    if method == "darts_oracle":
        return DartsOracleMoE(dcfg).fit_evaluate(task, setup).row(task)
    if method.startswith("decomp_"):
        for row in decomposition_settings(task, dcfg):
            if row.name == method:
                return row.fit_evaluate(task, setup).row(task)
        raise SgemUserError(f"unknown decomposition setting {method!r}")
    return get_baseline(method).fit_evaluate(task, setup).row(task)


def learnable_gate(task: ClusteredTask, setup: MethodBudget, row: dict) -> dict:
    """The method's experts (its architectures) retrained jointly under a learnable gate."""
    trainer = setup.trainer(task, "the learnable gate")
    seed = setup.seed
    n = len(task.train) + len(task.val)
    steps = (
        setup.final_steps
        if setup.final_epochs is None
        else steps_for_epochs(n, setup.final_epochs, setup.train.minibatch)
    )
    archs = [Arch.from_key(k) for k in row["architectures"]]
    _, report = train_learnable_gate_moe(task, trainer, archs, seed=seed, steps=steps)
    return report.to_json()
