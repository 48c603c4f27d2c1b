"""RESULTS.md's tables (`sgem.bench.results_tables`): named columns keep their text, other
long text is left out of the automatic columns."""

from __future__ import annotations

from sgem.bench.results_tables import records, scalars

LONG = "a combination (global network 0.40, logistic regression 0.04, gradient boosting 0.56)"


def test_a_named_column_keeps_long_text_and_an_unnamed_one_drops_it() -> None:
    data = {"rows": [{"data": "digits", "saved_model": LONG, "note": LONG, "score": 0.975}]}
    lines = records(data, "rows:data,saved_model,score")
    assert lines[0] == "| data | saved_model | score |"
    assert lines[2] == f"| digits | {LONG} | 0.975 |"
    assert "note" not in scalars(data["rows"][0])  # (no column asked for it)
    assert scalars({"deep": {"text": LONG}}, named=frozenset({"deep.text"})) == {"deep.text": LONG}
