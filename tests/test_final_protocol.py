"""The final stage's protocol (`sgem.final.protocol`) and the search's independence of it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from sgem.final import FINAL_LENGTHS, FinalProtocol, run_final
from sgem.final.length import resolve_length, tracking_rule
from sgem.search.config import SearchConfig

SRC = Path(__file__).resolve().parents[1] / "src" / "sgem"


@pytest.mark.parametrize("name", FINAL_LENGTHS)
def test_every_config_name_is_one_protocol_and_back(name: str) -> None:
    protocol = FinalProtocol.from_name(name, 50)
    assert protocol.length_name == name
    assert tracking_rule(protocol) == resolve_length(name)  # the rule the retrain gets


def test_config_to_protocol_reads_the_search_config_and_the_final_keys() -> None:
    cfg = SearchConfig(
        final_steps=123, champion_cells=4, final_check_partitions=2, final_check_archs=3
    )
    p = FinalProtocol.from_config(cfg, "validation-warm", final_epochs=5, crps_samples=7)
    assert (p.final_steps, p.final_epochs, p.crps_samples) == (123, 5, 7)
    assert (p.length, p.warm_start, p.refit) == ("tracked", True, True)
    assert (p.champion_cells, p.check_partitions, p.check_archs) == (4, 2, 3)
    assert p.uses_champion and not p.replace(warm_start=False).uses_champion
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.final_steps = 1  # type: ignore[misc]


def test_inconsistent_protocols_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="unknown final length 'long'"):
        FinalProtocol.from_name("long", 10)
    with pytest.raises(ValueError, match="need length='tracked'"):
        FinalProtocol(10, warm_start=True)
    with pytest.raises(ValueError, match="need length='tracked'"):
        FinalProtocol(10, refit=False)
    with pytest.raises(ValueError, match="final_steps >= 1"):
        FinalProtocol(0)
    with pytest.raises(ValueError, match="'fixed' or 'tracked'"):
        FinalProtocol(10, length="validation")  # type: ignore[arg-type]


def test_the_search_imports_neither_the_moe_nor_the_final_stage() -> None:
    """The search hands a routing and cells on; what is done with them is not its business."""
    for file in (SRC / "search").glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
            elif isinstance(node, ast.Import):
                module = ",".join(a.name for a in node.names)
            else:
                continue
            for banned in ("..moe", "..final", "sgem.moe", "sgem.final"):
                assert not module.startswith(banned), f"{file.name} imports {module}"


def test_run_final_needs_the_cells_of_a_routing_table() -> None:
    with pytest.raises(ValueError, match="needs its architectures"):
        run_final(None, None, np.zeros(3, dtype=int), None, FinalProtocol(5), seed=0)  # type: ignore[arg-type]
