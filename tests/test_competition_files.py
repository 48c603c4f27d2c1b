"""The forecasting benchmarks' tourism collections made from the shared monthly file: the
monthly track's split, and its series summed over whole quarters and calendar years with
those tracks' horizons (8 and 4)."""

from __future__ import annotations

import numpy as np
import pytest

from sgem.bench.future_scores import competition_file


@pytest.mark.requires_shared_data("timeseries")
def test_the_tourism_collections_sum_whole_periods(shared_timeseries_dir, tmp_path) -> None:
    data = shared_timeseries_dir.parent / "competition"
    monthly = competition_file("tourism", data, tmp_path)
    quarterly = competition_file("tourism_quarterly", data, tmp_path)
    yearly = competition_file("tourism_yearly", data, tmp_path)
    assert (monthly.horizon, quarterly.horizon, yearly.horizon) == (24, 8, 4)
    assert (monthly.season, quarterly.season, yearly.season) == (12, 4, 1)
    months = monthly.train.groupby("unique_id").size() + monthly.horizon
    for f, per in ((quarterly, 3), (yearly, 12)):
        assert set(f.train["unique_id"]) == set(monthly.train["unique_id"])
        assert (f.test.groupby("unique_id").size() == f.horizon).all()  # every series scored
        lengths = f.train.groupby("unique_id").size() + f.horizon
        assert (lengths <= months // per).all() and (lengths >= months // per - 1).all()
    one = monthly.train["unique_id"].iloc[0]
    every = np.concatenate(
        [g[g["unique_id"] == one]["y"].to_numpy() for g in (monthly.train, monthly.test)]
    )
    year = yearly.train[yearly.train["unique_id"] == one].iloc[0]
    start = monthly.train[monthly.train["unique_id"] == one]["ds"].iloc[0]
    first_january = (12 - start.month + 1) % 12  # months before its first whole year
    np.testing.assert_allclose(year["y"], every[first_january : first_january + 12].sum())
    assert year["ds"].month == 1
