"""Readers for the user's own data ("bring your own data"): pure functions that return arrays
and metadata, no search logic.

* tables (CSV/TSV, Parquet, NPZ): `read_table`, and `encode_table` to encode a new table at
  predict time exactly as training did (`sgem.data.files_tabular`);
* time series (long-format CSV/Parquet, Monash .tsf): `read_long_series`, `default_context`,
  `check_series_lengths` (`sgem.data.files_series`, `sgem.data.series_lengths`);
* images (ImageFolder tree, NPZ, a folder to predict on): `read_image_folder`,
  `read_image_npz`, `read_images_for_predict` (`sgem.data.files_images`).

Anything the user can fix raises `sgem.errors.SgemUserError` with the fix in its message.
"""

from __future__ import annotations

from .files_images import (
    IMAGE_SUFFIXES,
    ImageData,
    read_image_folder,
    read_image_npz,
    read_images_for_predict,
)
from .files_series import (
    TSF_FREQUENCIES,
    SeriesData,
    default_context,
    read_long_series,
)
from .files_tabular import TabularData, encode_table, read_frame, read_table
from .series_lengths import check_series_lengths

__all__ = [
    "IMAGE_SUFFIXES",
    "TSF_FREQUENCIES",
    "ImageData",
    "SeriesData",
    "TabularData",
    "check_series_lengths",
    "default_context",
    "encode_table",
    "read_frame",
    "read_image_folder",
    "read_image_npz",
    "read_images_for_predict",
    "read_long_series",
    "read_table",
]
