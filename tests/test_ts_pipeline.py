"""The forecasting presets end to end: `sgem run ts-offline` on a seconds-long config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sgem.cli import main
from sgem.data.timeseries import OFFLINE_FILES
from sgem.final.expert_fit import steps_for_epochs
from sgem.moe.cluster_gated import ClusterGatedMoE
from sgem.run.pipeline import PRESETS, build_space, build_task_from_config, load_config
from sgem.space.timeseries import TimeSeriesSpace

SMOKE = Path(__file__).resolve().parents[1] / "configs" / "ts-smoke.yaml"


@pytest.fixture(scope="module")
def ts_run(tmp_path_factory, shared_timeseries_dir) -> tuple[Path, dict, str]:
    out = tmp_path_factory.mktemp("runs") / "ts"
    threads = torch.get_num_threads()
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["run", "ts-offline", "--seed", "1", "--out", str(out), "--config",
                     str(SMOKE), "--quiet"])  # fmt: skip
    torch.set_num_threads(threads)
    assert code == 0
    return out, json.loads((out / "result.json").read_text()), buf.getvalue()


def test_cli_run_writes_forecasting_scores_and_recovery(ts_run):
    out, result, printed = ts_run
    assert "MoE test CRPS" in printed and "oracle match" in printed
    for key in ("test_nll", "test_crps", "test_crps_closed_form", "oracle_match"):
        assert np.isfinite(result[key]), key
    assert result["test_accuracy"] is None
    assert 0.0 <= result["oracle_match"] <= 1.0
    # the sample CRPS (20 samples in the smoke config) agrees with the closed form
    assert result["test_crps"] == pytest.approx(result["test_crps_closed_form"], rel=0.1)
    assert set(result["per_domain_test_nll"]) == set(OFFLINE_FILES)
    # every metric of the final MoE's row: MASE with the data's seasons, wQL, coverage
    assert result["test_mase"] > 0 and result["test_wql"] > 0
    assert set(result["per_domain_test_mase"]) == set(OFFLINE_FILES)
    assert 0.0 <= result["test_coverage_80"] <= 1.0
    assert result["domain_names"] == list(OFFLINE_FILES)
    assert len(result["routing"]) == result["n_clusters"] <= 6
    assert sum(result["n_windows"].values()) == 400
    assert (out / "store.sqlite").exists() and (out / "convergence.png").exists()
    # forecasting presets choose each final expert's length on validation, fine-tuning a
    # global network of its cell (0 steps: the global network was best on its region)
    chosen = [c for c in result["final_length"] if c is not None]
    assert chosen and len(result["final_steps"]) == len(result["architectures"])
    for choice, steps in zip(result["final_length"], result["final_steps"], strict=True):
        if choice is not None:
            assert steps == choice["refit_steps"] >= 0
            assert choice["curve"][0][0] == 0  # the warm start itself was scored first
    cells = {a for a, c in zip(result["architecture_keys"], result["final_length"], strict=True)
             if c is not None}  # fmt: skip
    assert set(result["global_networks"]) == cells


def test_presets_build_their_tasks_and_spaces():
    assert {"toy", "ts-offline", "ts-paper"} <= set(PRESETS)
    for name in ("ts-offline", "ts-paper"):
        cfg = load_config(name)
        assert isinstance(build_space(cfg["space"]), TimeSeriesSpace)
        assert cfg["search"]["n_experts"] == 4
    paper = load_config("ts-paper")
    assert paper["task"]["n_windows"] == 40_000 and paper["task"]["n_clusters"] == 30
    assert (paper["task"]["context"], paper["task"]["horizon"]) == (96, 24)
    assert paper["final_epochs"] == 50


def test_monash_task_without_a_directory_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv("SGEM_MONASH_DIR", raising=False)
    cfg = load_config("ts-paper")["task"]
    with pytest.raises(ValueError, match=r"task.directory.*SGEM_MONASH_DIR"):
        build_task_from_config(cfg, seed=0)
    with pytest.raises(ValueError, match="unknown time-series source"):
        build_task_from_config(cfg | {"source": "web"}, seed=0)
    with pytest.raises(ValueError, match="unknown space kind"):
        build_space({"kind": "graph", "ops": []})


def test_unknown_preset_is_a_clean_cli_error(capsys):
    assert main(["run", "ts-weekly", "--quiet", "--out", "/nonexistent/x"]) == 2
    assert "unknown preset 'ts-weekly'" in capsys.readouterr().err


def test_steps_for_epochs():
    assert steps_for_epochs(1000, 50, 100) == 500
    assert steps_for_epochs(30, 2, 100) == 2  # batch larger than the region: full batches
    assert steps_for_epochs(1000, 0.01, 100) == 1
    with pytest.raises(ValueError, match="epochs must be > 0"):
        steps_for_epochs(10, 0, 5)


def test_moe_output_stays_on_the_experts_device():
    experts = [torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)]
    moe = ClusterGatedMoE(experts, np.array([0, 1, 1]))
    out = moe(torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2]))
    assert out.shape == (6, 2) and out.device == experts[0].weight.device
