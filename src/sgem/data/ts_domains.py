"""The forecasting domains: which `.tsf` files hold them and where they are found.

`MONASH_FILES` names the paper's four Monash datasets in a directory the user points at,
`OFFLINE_FILES` the real public stand-ins shipped for offline runs (in
`OFFLINE_TIMESERIES_DIR`), and `load_domains` reads them as {domain name: TSFData}. Loading
never downloads: a missing file raises FileNotFoundError naming the file and where the
dataset is published. Everything here is also importable from `sgem.data.timeseries`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .paths import shared_data_dir
from .tsf import TSFData, read_tsf

__all__ = [
    "MONASH_FILES",
    "MONASH_SOURCE",
    "OFFLINE_FILES",
    "OFFLINE_TIMESERIES_DIR",
    "load_domains",
]

# -- the datasets -------------------------------------------------------------------------

#: The paper's four Monash datasets: domain name -> file name in the user's directory.
MONASH_FILES: dict[str, str] = {
    "electricity_hourly": "electricity_hourly_dataset.tsf",
    "kdd_cup_2018": "kdd_cup_2018_dataset_with_missing_values.tsf",
    "weather": "weather_dataset.tsf",
    "tourism_monthly": "tourism_monthly_dataset.tsf",
}

#: Offline stand-ins for the same four domains (real public data of the same character,
#: see the README next to them): domain name -> file name in `OFFLINE_TIMESERIES_DIR`.
OFFLINE_FILES: dict[str, str] = {
    "electricity_hourly": "electricity_pjm_hourly.tsf",
    "kdd_cup_2018": "air_quality_beijing_hourly.tsf",
    "weather": "weather_australia_daily.tsf",
    "tourism_monthly": "tourism_monthly.tsf",
}

#: Where the offline stand-ins live: `$SGEM_TIMESERIES_DATA`, else the `timeseries` folder
#: of the shared data directory (`sgem.data.paths.shared_data_dir`).
OFFLINE_TIMESERIES_DIR = Path(
    os.environ.get("SGEM_TIMESERIES_DATA", shared_data_dir() / "timeseries")
)

MONASH_SOURCE = (
    "the Monash Time Series Forecasting Archive (https://forecastingdata.org/; the files are "
    "published on Zenodo, https://zenodo.org/communities/forecasting)"
)


def _looks_like_path(entry: str) -> bool:
    return entry.lower().endswith((".tsf", ".zip")) or "/" in entry or os.sep in entry


def load_domains(
    directory: str | os.PathLike | None = None,
    names: Sequence[str] | None = None,
    offline: bool = False,
) -> dict[str, TSFData]:
    """Read the forecasting domains, in order, as {domain name: TSFData}.

    Args:
        directory: where the files are. Required unless `offline=True` (then it defaults
            to `OFFLINE_TIMESERIES_DIR`).
        names: which domains, by the names of `MONASH_FILES` (default: all four, in that
            order). An entry ending in `.tsf` or `.zip`, or containing a path separator, is
            a file path instead (relative to `directory` when one is given); its domain
            name is the file's stem.
        offline: read the stand-ins of `OFFLINE_FILES` instead of the Monash files.

    A Monash file may also sit in the directory as the `.zip` the archive distributes
    (same stem). A missing file raises FileNotFoundError naming the file and where the
    dataset is published.
    """
    paths_only = names is not None and all(_looks_like_path(str(n)) for n in names)
    if directory is None and not offline and not paths_only:
        raise ValueError(
            "give the directory holding the Monash .tsf files (load_domains('path/to/dir'))"
            ", or offline=True for the offline stand-ins"
        )
    base = (
        Path(directory) if directory is not None else (OFFLINE_TIMESERIES_DIR if offline else None)
    )
    table = OFFLINE_FILES if offline else MONASH_FILES
    out: dict[str, TSFData] = {}
    for entry in list(table) if names is None else list(names):
        entry = str(entry) if isinstance(entry, str) else os.fspath(entry)
        if entry in table:
            name, path = entry, _locate(base, table[entry], entry, offline)
        elif _looks_like_path(entry):
            path = Path(entry)
            if base is not None and not path.is_absolute():
                path = base / path
            if not path.is_file():
                raise FileNotFoundError(f"no such .tsf file: {path}")
            name = path.name.split(".")[0]
        else:
            raise ValueError(
                f"unknown domain {entry!r}; expected one of {', '.join(table)}, or a path to a "
                ".tsf file"
            )
        if name in out:
            raise ValueError(f"domain {name!r} is given twice")
        out[name] = read_tsf(path)
    if not out:
        raise ValueError("no domains to load: names is empty")
    return out


def _locate(base: Path | None, file_name: str, name: str, offline: bool) -> Path:
    assert base is not None
    path = base / file_name
    if path.is_file():
        return path
    zipped = path.with_suffix(".zip")
    if zipped.is_file():
        return zipped
    if offline:
        raise FileNotFoundError(
            f"offline stand-in for domain {name!r} not found: expected {path}. The offline "
            f"data lives in $SGEM_TIMESERIES_DATA (default {OFFLINE_TIMESERIES_DIR}); point "
            "SGEM_TIMESERIES_DATA at it, or load the Monash files with offline=False."
        )
    raise FileNotFoundError(
        f"Monash dataset {name!r} not found: expected {path} (or {zipped.name}). Download "
        f"{file_name} from {MONASH_SOURCE} and put it (zipped or not) in {base}; or use "
        "offline=True for the offline stand-ins."
    )
