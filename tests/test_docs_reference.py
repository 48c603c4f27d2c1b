"""docs/reference.md is generated from the code (docs/generate_reference.py): it must be up to
date, so the CLI and config reference cannot drift from the parser and the config classes."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "generate_reference", DOCS / "generate_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_is_up_to_date() -> None:
    text = _generator().render()
    assert (DOCS / "reference.md").read_text() == text, (
        "docs/reference.md is stale: run python docs/generate_reference.py"
    )


def test_reference_names_every_command_and_field() -> None:
    from sgem.cli import _parser
    from sgem.search.config import SearchConfig

    text = (DOCS / "reference.md").read_text()
    for action in _parser()._subparsers._group_actions:  # type: ignore[union-attr]
        for name in action.choices:
            assert f"### `sgem {name}`" in text
    for f in dataclasses.fields(SearchConfig):
        assert f"| `{f.name}` |" in text


def test_plain_meanings_name_real_fields() -> None:
    from sgem.run.runconfig import RunConfig
    from sgem.search.config import SearchConfig
    from sgem.surrogate.model import SurrogateConfig
    from sgem.train.trainer import TrainConfig

    classes = {c.__name__: c for c in (RunConfig, SearchConfig, SurrogateConfig, TrainConfig)}
    for key in _generator().PLAIN:
        cls, name = key.split(".")
        assert name in {f.name for f in dataclasses.fields(classes[cls])}, key
