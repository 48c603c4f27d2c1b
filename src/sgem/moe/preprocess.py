"""How a new sample becomes what the experts saw: the stored preprocessing and routing.

A saved model must route and preprocess a sample it has never seen without the training
data, exactly as the run treated its test samples: the same transform, then the nearest
stored centroid, then that cluster's expert. One class per modality; each splits into a
JSON-safe `state` (numbers, strings) and named float arrays (written as safetensors), and
is rebuilt from those alone (`from_state`), so loading never unpickles anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.clustering import assign_to_centroids
from ..data.task import ClusteredTask
from ..errors import SgemUserError

Arrays = dict[str, np.ndarray]


def _finite_2d(x: Any, who: str, n_features: int) -> np.ndarray:
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SgemUserError(f"{who}: features must be numeric, got {exc}") from exc
    if x.ndim == 1 and n_features > 1 and x.shape[0] == n_features:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != n_features:
        raise SgemUserError(
            f"{who}: expected an array of shape (n_samples, {n_features}) (the model was "
            f"trained on {n_features} features), got shape {x.shape}"
        )
    if len(x) == 0:
        raise SgemUserError(f"{who}: no samples given")
    bad = ~np.isfinite(x)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        cols = np.flatnonzero(bad.any(axis=0))
        raise SgemUserError(
            f"{who}: NaN or inf in {len(rows)} sample(s) (first rows {rows[:5].tolist()}, "
            f"feature columns {cols[:10].tolist()}); impute or drop them first"
        )
    return x


@dataclass
class TabularPreprocessor:
    """Features -> standardised features -> nearest centroid (fitted on training data).

    `mean`/`std` are the standardisation applied before clustering and training (zeros and
    ones when the task was built on raw features, as the toy task is).
    """

    mean: np.ndarray
    std: np.ndarray
    centroids: np.ndarray
    feature_names: list[str] | None = None
    kind: str = "tabular"

    @property
    def n_features(self) -> int:
        return len(self.mean)

    @classmethod
    def from_task(cls, task: ClusteredTask) -> TabularPreprocessor:
        if task.centroids is None:
            raise SgemUserError(
                "this task has no stored centroids (it was built with your own cluster ids), "
                "so new samples cannot be routed; build it with n_clusters=... to save a model"
            )
        d = int(np.prod(task.input_shape))
        pre = task.meta.get("standardisation") or {}
        return cls(
            mean=np.asarray(pre.get("mean", np.zeros(d)), dtype=np.float64),
            std=np.asarray(pre.get("std", np.ones(d)), dtype=np.float64),
            centroids=np.asarray(task.centroids, dtype=np.float64),
            feature_names=task.meta.get("feature_names"),
        )

    def features(self, x: Any, encoding: dict | None = None) -> Any:
        """Raw input -> the (n, d) features the standardisation reads, columns matched BY
        NAME (`sgem.data.table_contract`): with a table `encoding` (a model fitted on a
        table) as `encode_table` builds them (categories one-hot, missing values imputed or
        refused as at fit); without one, a DataFrame / dict selects the columns
        `feature_names` (x0, x1, ... when unnamed). A bare array is read by position."""
        from ..data.table_contract import as_frame, is_named, numeric_frame, select_columns

        if encoding:
            from ..data.files_tabular import encode_table

            return encode_table(x, encoding).astype(np.float64)
        if not is_named(x):
            return x
        names = self.feature_names or [f"x{i}" for i in range(self.n_features)]
        return numeric_frame(select_columns(as_frame(x, names, named=False), names))

    def transform(self, x: Any, encoding: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(model inputs float32, cluster id per sample) of raw input (see `features`)."""
        x = _finite_2d(self.features(x, encoding), "predict", self.n_features)
        z = (x - self.mean) / self.std
        return z.astype(np.float32), assign_to_centroids(z, self.centroids)

    def state(self) -> tuple[dict, Arrays]:
        return (
            {"kind": self.kind, "n_features": self.n_features, "feature_names": self.feature_names},
            {"mean": self.mean, "std": self.std, "centroids": self.centroids},
        )

    @classmethod
    def from_state(cls, state: dict, arrays: Arrays) -> TabularPreprocessor:
        return cls(arrays["mean"], arrays["std"], arrays["centroids"], state.get("feature_names"))


@dataclass
class ForecastPreprocessor:
    """A series' last `context` values -> scaled window -> descriptors -> nearest centroid.

    The scaling rule is the training windows' (`sgem.data.timeseries.make_windows`): divide
    by the context's mean |x|, floored at `floor_fraction` times the mean |x| of the whole
    history given (missing and filled values skipped); a scale <= `min_scale` becomes 1.

    Gaps and short histories are treated as the training series were
    (`sgem.data.series_gaps`): with `missing="impute"` gaps are filled (linear inside, the
    nearest value at the ends), and with `pad_short` a history shorter than the context is
    left-padded with its first value, so every series gets a forecast. A model saved
    before these settings existed reads `missing="error"` and `pad_short=False`: such
    series are refused, as they were then.
    """

    context: int
    horizon: int
    floor_fraction: float
    min_scale: float
    descriptor_mean: np.ndarray
    descriptor_std: np.ndarray
    centroids: np.ndarray
    missing: str = "impute"
    pad_short: bool = True
    kind: str = "forecast"

    @classmethod
    def from_task(cls, task: ClusteredTask) -> ForecastPreprocessor:
        meta = task.meta
        return cls(
            context=int(meta["context"]),
            horizon=int(meta["horizon"]),
            floor_fraction=float(meta.get("floor_fraction", 0.2)),
            min_scale=float(meta.get("min_scale", 1e-8)),
            descriptor_mean=np.asarray(meta["descriptor_mean"], dtype=np.float64),
            descriptor_std=np.asarray(meta["descriptor_std"], dtype=np.float64),
            centroids=np.asarray(meta["descriptor_centroids"], dtype=np.float64),
            missing=str(meta.get("missing", "impute")),
            pad_short=bool(meta.get("pad_short", True)),
        )

    def _history(self, i: int, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, observed) of series `i`: gaps filled and short histories padded as the
        model's settings say, or a `SgemUserError` where they say to refuse."""
        from ..data.series_gaps import fill_gaps, pad_left

        if s.ndim != 1:
            raise SgemUserError(
                f"forecast: series {i} has shape {s.shape}; each series must be 1-D "
                "(one value per time step)"
            )
        if self.missing == "impute":
            if not np.isfinite(s).any():
                raise SgemUserError(
                    f"forecast: series {i} has no value (empty or all missing); drop it or "
                    "give its history"
                )
            values, observed = fill_gaps(s)
        else:
            values, observed = s, np.isfinite(s)
        if len(values) < self.context:
            if not self.pad_short:
                raise SgemUserError(
                    f"forecast: series {i} has {len(s)} values, but the model reads a context "
                    f"of {self.context}; give at least {self.context} past values (a model "
                    "fitted with this version of sgem pads short histories itself)"
                )
            values, observed = pad_left(values, observed, self.context)
        if not np.isfinite(values[-self.context :]).all():
            raise SgemUserError(
                f"forecast: series {i} has NaN or inf among its last {self.context} values (the "
                "context the model reads); fill the gaps first (a model fitted with this "
                "version of sgem fills them itself)"
            )
        return values, observed

    @staticmethod
    def _series_list(series: Any) -> list | tuple:
        if isinstance(series, np.ndarray) and series.ndim == 2:
            series = list(series)
        elif isinstance(series, np.ndarray) and series.ndim == 1:
            series = [series]
        if not isinstance(series, list | tuple) or len(series) == 0:
            hint = (
                "; for a long-format DataFrame (unique_id, ds, y) use model.predict(df)"
                if type(series).__name__ == "DataFrame"
                else ""
            )
            raise SgemUserError(
                "forecast: give one series (1-D array) or a list of them (or a 2-D array, one "
                f"row per series){hint}"
            )
        return series

    def histories(self, series: Any) -> list[np.ndarray]:
        """Each series' whole history, gaps filled as for the context, without the padding
        of a short one: what a classical member of a combination refits on."""
        out = []
        for i, s in enumerate(self._series_list(series)):
            values, observed = self._history(i, np.asarray(s, dtype=np.float64))
            first = int(np.argmax(observed)) if observed.any() else 0
            out.append(values[first:])
        return out

    def windows(self, series: Any) -> tuple[np.ndarray, np.ndarray]:
        """(scaled contexts (n, context), scale (n,)) of the last `context` values."""
        series = self._series_list(series)
        ctx = np.empty((len(series), self.context))
        hist = np.empty(len(series))
        for i, s in enumerate(series):
            values, observed = self._history(i, np.asarray(s, dtype=np.float64))
            ctx[i] = values[-self.context :]
            known = values[observed & np.isfinite(values)]
            hist[i] = np.abs(known).mean() if len(known) else 0.0
        level = np.abs(ctx).mean(axis=1)
        scale = np.maximum(level, self.floor_fraction * hist)
        scale = np.where(scale > self.min_scale, scale, 1.0)
        return ctx / scale[:, None], scale

    def assign(self, scaled_context: np.ndarray) -> np.ndarray:
        from ..data.timeseries import clustering_features

        z = (clustering_features(scaled_context) - self.descriptor_mean) / self.descriptor_std
        return assign_to_centroids(z, self.centroids)

    def transform(self, series: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(model inputs float32, cluster ids, scale per series)."""
        scaled, scale = self.windows(series)
        return scaled.astype(np.float32), self.assign(scaled), scale

    def state(self) -> tuple[dict, Arrays]:
        return (
            {
                "kind": self.kind,
                "context": self.context,
                "horizon": self.horizon,
                "floor_fraction": self.floor_fraction,
                "min_scale": self.min_scale,
                "missing": self.missing,
                "pad_short": self.pad_short,
            },
            {
                "descriptor_mean": self.descriptor_mean,
                "descriptor_std": self.descriptor_std,
                "centroids": self.centroids,
            },
        )

    @classmethod
    def from_state(cls, state: dict, arrays: Arrays) -> ForecastPreprocessor:
        return cls(
            int(state["context"]),
            int(state["horizon"]),
            float(state["floor_fraction"]),
            float(state["min_scale"]),
            arrays["descriptor_mean"],
            arrays["descriptor_std"],
            arrays["centroids"],
            missing=str(state.get("missing", "error")),  # saved before gaps were filled
            pad_short=bool(state.get("pad_short", False)),
        )


_EMBEDDING_ARRAYS = ("filters", "center_", "components_", "scale_")


@dataclass
class ImagePreprocessor:
    """uint8 images (N, H, W, C) -> embedding -> nearest centroid; pixels -> /255 (and per
    channel standardisation) -> NCHW -> average-pooled to `image_size`.

    Only the built-in handcrafted embedding can be stored (its fitted statistics are plain
    arrays); a model clustered on your own embedding array routes new images only when you
    give their embeddings (`route(images, embeddings=...)`).
    """

    height: int
    width: int
    channels: int
    normalise: str
    image_size: int | None
    embedding: dict
    embedding_arrays: Arrays
    centroids: np.ndarray
    pixel_mean: list[float] | None = None
    pixel_std: list[float] | None = None
    kind: str = "image"

    @classmethod
    def from_task(cls, task: ClusteredTask) -> ImagePreprocessor:
        from ..data.embeddings import HandcraftedEmbedding

        meta = task.meta
        emb = meta.get("embedding_model")
        arrays: Arrays = {}
        if isinstance(emb, HandcraftedEmbedding):
            spec = {
                "name": "handcrafted",
                "n_components": emb.n_components,
                "n_filters": emb.n_filters,
                "whiten": emb.whiten,
                "seed": emb.seed,
                "n_blocks": len(emb.mean_),
            }
            arrays = {name: np.asarray(getattr(emb, name)) for name in _EMBEDDING_ARRAYS}
            for i, (mu, sd) in enumerate(zip(emb.mean_, emb.std_, strict=True)):
                arrays[f"block{i}_mean"], arrays[f"block{i}_std"] = mu, sd
        else:
            spec = {"name": str(meta.get("embedding", "unknown"))}
        h, w, c = meta["image_shape_hwc"]
        return cls(
            height=int(h),
            width=int(w),
            channels=int(c),
            normalise=str(meta.get("normalise", "unit")),
            image_size=meta.get("image_size"),
            embedding=spec,
            embedding_arrays=arrays,
            centroids=np.asarray(task.centroids, dtype=np.float64),
            pixel_mean=meta.get("pixel_mean"),
            pixel_std=meta.get("pixel_std"),
        )

    def _embedder(self):
        from ..data.embeddings import HandcraftedEmbedding

        spec = self.embedding
        if spec.get("name") != "handcrafted":
            raise SgemUserError(
                f"this model was clustered on the embedding {spec.get('name')!r}, which is not "
                "stored in the model; pass the new images' embeddings (route(images, "
                "embeddings=array))"
            )
        emb = HandcraftedEmbedding(
            n_components=spec["n_components"],
            n_filters=spec["n_filters"],
            whiten=spec["whiten"],
            seed=spec["seed"],
        )
        a = self.embedding_arrays
        emb.filters = a["filters"].astype(np.float32)
        emb.mean_ = [a[f"block{i}_mean"] for i in range(spec["n_blocks"])]
        emb.std_ = [a[f"block{i}_std"] for i in range(spec["n_blocks"])]
        emb.center_, emb.components_, emb.scale_ = a["center_"], a["components_"], a["scale_"]
        emb._fitted = True
        return emb

    def check(self, images: Any) -> np.ndarray:
        x = np.asarray(images)
        if x.ndim == 3 and self.channels == 1:
            x = x[..., None]
        expected = (self.height, self.width, self.channels)
        if x.ndim != 4 or tuple(x.shape[1:]) != expected:
            raise SgemUserError(
                f"images must have shape (n, {self.height}, {self.width}, {self.channels}) "
                f"(what the model was trained on), got {x.shape}; bring them to that size with "
                f"sgem.data.images.harmonise_images(x, size=({self.height}, {self.width}), "
                f"channels={self.channels}) (the CLI does this for image files)"
            )
        if x.dtype != np.uint8:
            raise SgemUserError(
                f"images must be uint8 pixels in 0..255, got dtype {x.dtype}; convert floats "
                "in [0, 1] with np.clip(x * 255, 0, 255).round().astype(np.uint8)"
            )
        if len(x) == 0:
            raise SgemUserError("no images given")
        return x

    def pixels(self, x: np.ndarray) -> np.ndarray:
        """uint8 NHWC -> the float NCHW inputs of the experts (as the task built them)."""
        import torch
        import torch.nn.functional as F

        xf = x.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255.0)
        if self.normalise == "standardise":
            mean = np.asarray(self.pixel_mean)[None, :, None, None]
            std = np.asarray(self.pixel_std)[None, :, None, None]
            xf = ((xf - mean) / std).astype(np.float32)
        xf = np.ascontiguousarray(xf, dtype=np.float32)
        if self.image_size is not None and self.image_size != self.height:
            xf = F.avg_pool2d(torch.from_numpy(xf), self.height // self.image_size).numpy()
            xf = np.ascontiguousarray(xf)
        return xf

    def transform(
        self, images: Any, embeddings: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        x = self.check(images)
        if embeddings is None:
            z = self._embedder().transform(x)
        else:
            z = np.asarray(embeddings, dtype=np.float64)
            if z.shape != (len(x), self.centroids.shape[1]):
                raise SgemUserError(
                    f"embeddings must have shape ({len(x)}, {self.centroids.shape[1]}), got "
                    f"{z.shape}"
                )
        return self.pixels(x), assign_to_centroids(z, self.centroids)

    def state(self) -> tuple[dict, Arrays]:
        state = {
            "kind": self.kind,
            "height": self.height,
            "width": self.width,
            "channels": self.channels,
            "normalise": self.normalise,
            "image_size": self.image_size,
            "embedding": self.embedding,
            "pixel_mean": self.pixel_mean,
            "pixel_std": self.pixel_std,
        }
        arrays = {f"embedding.{k}": v for k, v in self.embedding_arrays.items()}
        return state, {**arrays, "centroids": self.centroids}

    @classmethod
    def from_state(cls, state: dict, arrays: Arrays) -> ImagePreprocessor:
        emb = {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith("embedding.")}
        return cls(
            int(state["height"]),
            int(state["width"]),
            int(state["channels"]),
            str(state["normalise"]),
            state.get("image_size"),
            dict(state["embedding"]),
            emb,
            arrays["centroids"],
            state.get("pixel_mean"),
            state.get("pixel_std"),
        )


Preprocessor = TabularPreprocessor | ForecastPreprocessor | ImagePreprocessor
PREPROCESSORS: dict[str, type] = {
    "tabular": TabularPreprocessor,
    "forecast": ForecastPreprocessor,
    "image": ImagePreprocessor,
}


def preprocessor_for_task(task: ClusteredTask) -> Preprocessor:
    """The preprocessing and routing that built `task`, ready to be saved."""
    if task.loss == "student_t" and "descriptor_centroids" in task.meta:
        return ForecastPreprocessor.from_task(task)
    if "image_shape_hwc" in task.meta:
        return ImagePreprocessor.from_task(task)
    return TabularPreprocessor.from_task(task)


def preprocessor_from_state(state: dict, arrays: Arrays) -> Preprocessor:
    kind = state.get("kind")
    if kind not in PREPROCESSORS:
        raise SgemUserError(
            f"unknown preprocessing kind {kind!r} in the model directory (known: "
            f"{sorted(PREPROCESSORS)}); it was written by a newer or a modified sgem"
        )
    return PREPROCESSORS[kind].from_state(state, arrays)
