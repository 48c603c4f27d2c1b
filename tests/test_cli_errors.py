"""The CLI's bad-input battery: every case prints one `sgem: error:` line naming the
problem (exit code 2, no traceback) and claims no run directory."""

from __future__ import annotations

import pytest

from sgem.cli import main


@pytest.fixture
def files(tmp_path):
    (tmp_path / "bad.yaml").write_text("search: {n_iterations: [\n")
    (tmp_path / "zero.yaml").write_text("search:\n  gumbel_temperature: 0\n")
    (tmp_path / "quoted.yaml").write_text("search:\n  explore: 'no'\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "fake.zip").write_text("not a zip")
    (tmp_path / "fake.tsf").write_text("hello\n")
    (tmp_path / "t.csv").write_text("a,b,label\n1,2,x\n3,4,y\n")
    return tmp_path


CASES = [
    (["run", "toy", "--config", "{d}/bad.yaml"], "not valid YAML"),
    (["run", "toy", "--config", "{d}/missing.yaml"], "does not exist"),
    (["run", "toy", "--config", "{d}/zero.yaml"], "gumbel_temperature"),
    (["run", "toy", "--config", "{d}/quoted.yaml"], "explore"),
    (["run", "toy", "--config", "{d}/list.yaml"], "mapping"),
    (["run", "toy", "--seed", "-1"], "seed"),
    (["run", "toy", "--workers", "0", "--executor", "processes"], "--workers"),
    (["run", "nopreset"], "unknown preset"),
    (["resume", "{d}/nothing"], "does not exist"),
    (["fit", "{d}/fake.zip", "--horizon", "3"], "not a valid zip"),
    (["fit", "{d}/fake.tsf", "--horizon", "3"], "line 1"),
    (["fit", "{d}/t.csv"], "--target"),
    (["fit", "{d}/t.csv", "--target", "nope"], "nope"),
    (["fit", "{d}/t.csv", "--target", "label", "--time-budget", "soon"], "time budget"),
    # (a minus is read as the value, not as the next option: argparse said "expected one
    # argument", not what a budget accepts)
    (["fit", "{d}/t.csv", "--target", "label", "--time-budget", "-5m"], "cannot read the time"),
    (["fit", "{d}/t.csv", "--target", "label", "--experts", "0"], "n_experts"),
    (["fit", "{d}/missing.csv", "--target", "label"], "does not exist"),
    (["fit", "{d}/t.csv", "--target", "label", "--device", "tpu0"], "unknown device 'tpu0'"),
    (["run", "toy", "--device", "cuda:99"], "cuda:99"),
    (["show", "{d}"], "holds no saved model"),
    (["predict", "{d}", "{d}/t.csv", "--out", "{d}/p.csv"], "holds no saved model"),
]


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[" ".join(c[0][:3]) for c in CASES])
def test_user_errors_are_one_line(files, capsys, argv, message) -> None:
    out = files / "run"
    argv = [a.format(d=files) for a in argv]
    if argv[0] in ("run", "fit"):
        argv += ["--out", str(out), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("sgem: error:") and message in err
    assert "Traceback" not in err
    assert not out.exists()


def test_empty_and_unwritable_out(files, capsys) -> None:
    assert main(["run", "toy", "--out", "", "--quiet"]) == 2
    assert "output directory is empty" in capsys.readouterr().err
    assert main(["run", "toy", "--out", "/proc/sgem-run", "--quiet"]) == 2
    assert "cannot write the run directory" in capsys.readouterr().err


def test_the_cli_says_each_table_note_once() -> None:
    """A fit that tries several K reads its table once per K: its notes show once."""
    from sgem.data.table_contract import TableWarning
    from sgem.terminal import said_once

    shown: list[str] = []
    show = said_once(lambda message, category, *rest: shown.append(str(message)))
    for message in ("'id' left out", "'when': dates", "'id' left out"):
        show(TableWarning(message), TableWarning, "f.py", 1)
    show(UserWarning("'id' left out"), UserWarning, "f.py", 1)
    assert shown == ["'id' left out", "'when': dates", "'id' left out"]


def test_an_error_raised_inside_a_library_says_it_may_be_a_bug(monkeypatch, capsys) -> None:
    """A numpy ValueError no check of sgem's raised (an empty holdout once ended a fit with
    "cannot reshape array of size 0") read as the user's mistake: it now says it may be a
    bug and how to get the traceback."""
    import numpy as np

    import sgem.cli as cli

    def broken(args) -> int:
        np.zeros(0).reshape(0, -1)
        return 0

    monkeypatch.setitem(cli.COMMANDS, "show", broken)
    assert main(["show", "anywhere"]) == 2
    err = capsys.readouterr().err
    assert "cannot reshape" in err and "may be a bug" in err and "Traceback" not in err
    monkeypatch.setenv("SGEM_DEBUG", "1")
    assert main(["show", "anywhere"]) == 2
    assert "Traceback" in capsys.readouterr().err
