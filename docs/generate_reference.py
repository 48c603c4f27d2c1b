"""Write docs/reference.md from the code, so the reference cannot drift from it.

The CLI part is read off the argparse parser (`sgem.cli._parser`), the Python part off
`sgem.fit`'s options (`sgem.run.fit_setup.fit_config`), the config part off the typed config
dataclasses (`RunConfig`, `SearchConfig`, `TrainConfig`, `SurrogateConfig`): every field
with its type, default and the comment next to it in the source.

    python docs/generate_reference.py          # rewrite docs/reference.md
    python docs/generate_reference.py --check  # exit 1 if docs/reference.md is stale
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "reference.md"


def _cell(text: object) -> str:
    """One markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(value: object) -> str:
    if value is None or value is argparse.SUPPRESS:
        return ""
    return f"`{value!r}`" if not isinstance(value, bool) else f"`{str(value).lower()}`"


def cli_reference() -> list[str]:
    from sgem.cli import _parser

    parser = _parser()
    lines = ["## Command line", "", f"`sgem`: {parser.description}", ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name, cmd in sub.choices.items():
        lines += [f"### `sgem {name}`", "", helps.get(name, ""), ""]
        lines += ["| argument | default | meaning |", "|---|---|---|"]
        for action in cmd._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if action.option_strings:
                arg = ", ".join(action.option_strings)
                if action.nargs != 0:
                    arg += f" {action.metavar or action.dest.upper()}"
            else:
                arg = action.dest.upper() + (" ..." if action.nargs in ("+", "*") else "")
            meaning = action.help or ""
            if action.choices:
                meaning = f"one of {', '.join(map(str, action.choices))}. {meaning}".strip()
            if action.required and action.option_strings:
                meaning = f"(required) {meaning}"
            default = "" if action.nargs == 0 else _default(action.default)
            lines.append(f"| `{_cell(arg)}` | {default} | {_cell(meaning)} |")
        lines.append("")
    return lines


def fit_reference() -> list[str]:
    from sgem.run.fit_setup import fit_config

    lines = [
        "## `sgem.fit` options",
        "",
        "`sgem.fit(data, out=None, executor='inline', workers=2, n_experts=None, **options)`:",
        "`data` is a path, a DataFrame or `(X, y)`; the options are `fit_config`'s "
        "(the CLI flags of `sgem fit` under their Python names).",
        "",
        "| option | default |",
        "|---|---|",
    ]
    for p in list(inspect.signature(fit_config).parameters.values())[1:]:
        lines.append(f"| `{p.name}` | {_default(p.default)} |")
    return [*lines, ""]


#: Meanings of fields that have no comment in the source (the test checks each still exists).
PLAIN = {
    "RunConfig.task": "the data: `name` and its builder's keys",
    "RunConfig.space": "the cell search space: `kind` (tabular, timeseries, darts), ops and sizes",
    "RunConfig.search": "the search (section `search` below)",
    "RunConfig.torch_threads": "intra-op threads (part of the config: sums depend on it)",
    "RunConfig.device": "cpu, cuda or auto",
    "SearchConfig.n_experts": "K, the number of experts",
    "SearchConfig.n_iterations": "EM iterations",
    "SearchConfig.geometric_above": "M above which the size-adaptive defaults switch",
    "SearchConfig.routing_steps": "gradient steps of the routing M-step",
    "SearchConfig.routing_lr": "learning rate of the routing M-step",
    "SearchConfig.gumbel_temperature": "Gumbel-Softmax temperature of the routing M-step",
    "SearchConfig.jumps": "propose partition jumps in the exploration rounds",
    "SearchConfig.explore_every": "iterations between exploration rounds",
    "SearchConfig.explore_groups": "affinity groups trained as masks per round",
    "SearchConfig.final_check_archs": "candidate cells per region in the second look",
    "SearchConfig.lb_weight": "load-balancing weight (scalar-surrogate ablation)",
    "SearchConfig.lb_kind": "load balanced over clusters or samples",
    "SurrogateConfig.hidden": "GCN width",
    "SurrogateConfig.gcn_layers": "message-passing layers (0: none, an ablation)",
    "SurrogateConfig.clip_quantile": "target losses clipped at this quantile before fitting",
}


def _field_comments(cls: type) -> dict[str, str]:
    """The comment of each field in `cls`'s source: the `#` lines just above it and the
    one at the end of its line."""
    comments: dict[str, str] = {}
    above: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#:").strip())
            continue
        m = re.match(r"    (\w+): [^=]+(?:=.*?)?(?:  # (.*))?$", line)
        if m and not line.startswith("     "):
            comments[m.group(1)] = " ".join([*above, m.group(2) or ""]).strip()
        above = []
    return comments


def config_reference() -> list[str]:
    from sgem.run.runconfig import RunConfig
    from sgem.search.config import SearchConfig
    from sgem.surrogate.model import SurrogateConfig
    from sgem.train.trainer import TrainConfig

    lines = [
        "## Run config",
        "",
        "A run's `config.yaml` (and a preset, and a `--config FILE.yaml` override) has these",
        "sections. `task` and `space` are mappings checked by their builders; the rest is",
        "typed and range-checked when read: an unknown key or a wrong type is refused,",
        "naming the key.",
        "",
    ]
    sections = [
        ("top level", RunConfig),
        ("`search`", SearchConfig),
        ("`search.train`", TrainConfig),
        ("`search.surrogate`", SurrogateConfig),
    ]
    for title, cls in sections:
        doc = inspect.cleandoc(cls.__doc__ or "")
        if doc.startswith(f"{cls.__name__}("):  # the dataclass's generated signature
            doc = ""
        lines += [f"### {title} (`{cls.__name__}`)", ""] + ([doc, ""] if doc else [])
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        comments = _field_comments(cls)
        for f in dataclasses.fields(cls):
            if f.name == "keys":
                continue
            if f.default is not dataclasses.MISSING:
                default = _default(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = "(its section)"
            else:
                default = "(required)"
            ftype = f"`{_cell(f.type)}`"
            meaning = comments.get(f.name) or PLAIN.get(f"{cls.__name__}.{f.name}", "")
            lines.append(f"| `{f.name}` | {ftype} | {default} | {_cell(meaning)} |")
        lines.append("")
    return lines


def render() -> str:
    from sgem.presets import PRESET_NAMES

    head = [
        "# Reference",
        "",
        "Generated from the code by `python docs/generate_reference.py`; "
        "tests/test_docs_reference.py fails when this file is stale. Do not edit by hand.",
        "",
        f"Presets (`sgem run PRESET`): {', '.join(f'`{n}`' for n in PRESET_NAMES)}.",
        "",
    ]
    text = "\n".join(head + cli_reference() + fit_reference() + config_reference())
    return text.rstrip() + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = p.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run python docs/generate_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
