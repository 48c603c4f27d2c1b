"""The README's commands are the ones sgem has: every `sgem ...` line of its code blocks
(and of docs/) parses with the command line's own parser (a renamed flag fails here, not
for a user who copies it), every command has an example in the README, and `.ci/run` runs
exactly its set-up."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from sgem.cli.parser import _parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _code_lines(text: str) -> list[str]:
    """The lines of the bash code blocks, comments and blank lines left out."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [ln.split(" #")[0].strip() for block in blocks for ln in block.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def _sgem_commands(text: str = README) -> list[str]:
    commands = []
    for line in _code_lines(text):
        for part in line.split("&&"):
            if part.strip().startswith("sgem "):
                commands.append(part.strip())
    return commands


DOCS = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))


@pytest.mark.parametrize("line", _sgem_commands() + _sgem_commands(DOCS))
def test_every_readme_command_parses(line: str) -> None:
    try:
        args = _parser().parse_args(shlex.split(line)[1:])
    except SystemExit as exc:  # argparse's way of refusing
        raise AssertionError(f"README command no longer parses: {line}") from exc
    assert args.command == shlex.split(line)[1]


def test_every_command_has_a_readme_example() -> None:
    parser = _parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    shown = {shlex.split(line)[1] for line in _sgem_commands()}
    missing = sorted(set(sub.choices) - shown)
    assert not missing, f"commands without an example in the README: {missing}"


def test_ci_runs_exactly_the_readme_set_up() -> None:
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln and ln[0] != "#"]
    setup = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    assert [ln for ln in ci if not ln.startswith(("set ", "cd "))] == _code_lines(setup)
