"""A series table without the long format's columns is refused with the layout it has and its
fix: wide (one column per series) or one series under other names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sgem.data.files import read_long_series
from sgem.data.series_layout import layout_hint
from sgem.errors import SgemUserError


def _wide(columns: list[str], time: str = "date") -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({time: pd.date_range("2020-01-01", periods=24, freq="MS").astype(str)})
    for c in columns:
        frame[c] = rng.normal(size=24).cumsum()
    return frame


def test_a_wide_file_is_refused_with_the_melt_that_reads_it(tmp_path) -> None:
    path = tmp_path / "wide.csv"
    _wide(["north", "south", "east"]).to_csv(path, index=False)
    with pytest.raises(SgemUserError, match="one column per series") as err:
        read_long_series(path)
    text = str(err.value)
    assert "melt(id_vars='date'" in text and "3 series 'north', 'south', 'east'" in text
    # the fix it names reads the file
    melted = pd.read_csv(path).melt(id_vars="date", var_name="unique_id", value_name="y")
    data = read_long_series(melted.rename(columns={"date": "ds"}))
    assert len(data.series) == 3


def test_one_series_under_other_names_is_told_its_flags() -> None:
    hint = layout_hint(_wide(["sales"], time="Month"), "ds")
    assert "one series" in hint and "--time-col Month --value-col sales" in hint


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame({"store": ["a", "b"], "date": ["2020-01-01", "2020-01-02"], "v": [1, 2]}),
        pd.DataFrame({"date": ["soon", "later"], "v": [1.0, 2.0]}),  # no times in it
        pd.DataFrame({"x": [1.0, 2.0], "v": [1.0, 2.0]}),  # no time column at all
    ],
    ids=["text column", "not times", "no time column"],
)
def test_other_layouts_get_no_guess(frame) -> None:
    assert layout_hint(frame, "ds") == ""
