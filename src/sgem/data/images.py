"""Image data: readers for the original dataset files, mixtures of sources, image tasks.

Readers return ``(images, labels)``: images uint8 of shape (N, H, W, C), labels int64.

* `read_cifar_pickle`: the CIFAR-10 / CIFAR-100 "python version" pickles.
* `read_svhn_mat`: SVHN cropped digits, ``train_32x32.mat`` / ``test_32x32.mat``.
* `read_mnist`: MNIST IDX files (``*-images-idx3-ubyte`` + ``*-labels-idx1-ubyte``, gzipped
  or raw); `read_idx` reads any IDX file.
* `read_npz`: your own ``.npz`` with ``x`` uint8 (N, H, W[, C]) and integer ``y``.

`load_source(name, directory, split)` finds the files of a named dataset in a directory
where you have put the original downloads. Loading never downloads: a missing file raises
`FileNotFoundError` naming the exact path it expected, where the dataset is published and
the opt-in `sgem download NAME DIR` (`sgem.data.download`) that fetches it where a network
exists.

`build_image_mixture` joins several sources into one labelled pool (labels shifted so the
classes of different sources never collide, a source id per image, sizes and channels
harmonised), and `make_image_task` turns such a pool into a `ClusteredTask`, clustering in
an embedding space (see `sgem.data.embeddings`) while the task holds the pixels.
`make_offline_mixture_task` builds the CIFAR-10 + MNIST mixture from the offline files.
`build_image_task` builds the task of a run config's `task` section (the offline mixture or
CIFAR-100 + SVHN) and `downsample` average-pools a task's images after clustering.
"""

from __future__ import annotations

import gzip
import os
import pickle
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .clustering import (
    assign_to_centroids,
    cluster_purity,
    fit_kmeans,
    majority_source_partition,
    merge_clusters_without_samples,
)
from .embeddings import fit_embed, get_embedding
from .paths import shared_data_dir
from .task import MIN_CLUSTERS, ClusteredTask, Split

__all__ = [
    "OFFLINE_IMAGE_DIR",
    "PUBLISHERS",
    "ImageMixture",
    "build_image_mixture",
    "build_image_task",
    "downsample",
    "harmonise_images",
    "load_source",
    "make_image_task",
    "make_offline_mixture_task",
    "read_cifar_pickle",
    "read_idx",
    "read_mnist",
    "read_mnist_images",
    "read_mnist_labels",
    "read_npz",
    "read_svhn_mat",
]

#: where `make_offline_mixture_task` looks by default: $SGEM_IMAGE_DATA, else the `images`
#: folder of the shared data directory (`sgem.data.paths.shared_data_dir`)
OFFLINE_IMAGE_DIR = Path(os.environ.get("SGEM_IMAGE_DATA", shared_data_dir() / "images"))

#: where each dataset is published, and what to put where
PUBLISHERS = {
    "cifar10": (
        "https://www.cs.toronto.edu/~kriz/cifar.html",
        "download 'CIFAR-10 python version' (cifar-10-python.tar.gz) and extract it there",
    ),
    "cifar100": (
        "https://www.cs.toronto.edu/~kriz/cifar.html",
        "download 'CIFAR-100 python version' (cifar-100-python.tar.gz) and extract it there",
    ),
    "svhn": (
        "http://ufldl.stanford.edu/housenumbers/",
        "download Format 2 (cropped digits): train_32x32.mat / test_32x32.mat",
    ),
    "mnist": (
        "http://yann.lecun.com/exdb/mnist/ (the original Yann LeCun page; mirrors such as "
        "https://ossci-datasets.s3.amazonaws.com/mnist/ hold the same files)",
        "download the four *-idx?-ubyte.gz files (gzipped or extracted both work)",
    ),
}

MNIST_IMAGES_MAGIC = 2051
MNIST_LABELS_MAGIC = 2049
_GZIP_MAGIC = b"\x1f\x8b"
_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


# ---------------------------------------------------------------------------------------
# readers


def _labels(y, who: str, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or len(y) != n:
        raise ValueError(f"{who}: expected {n} labels (one per image), got shape {y.shape}")
    if n and not np.issubdtype(y.dtype, np.integer):
        if np.issubdtype(y.dtype, np.floating) and np.all(y == np.round(y)):
            y = y.astype(np.int64)
        else:
            raise ValueError(f"{who}: labels must be integers, got dtype {y.dtype}")
    y = y.astype(np.int64)
    if n and y.min() < 0:
        raise ValueError(f"{who}: labels must be >= 0, found {int(y.min())}")
    return y


def _numpy_private(module: str, name: str) -> Any:
    """numpy's array-rebuilding helpers live in numpy._core (2.x) or numpy.core (1.x)."""
    import importlib

    for prefix in ("numpy._core", "numpy.core"):
        try:
            return getattr(importlib.import_module(f"{prefix}.{module}"), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"numpy has no {module}.{name}")


_CIFAR_SAFE_BUILTINS = ("list", "dict", "tuple", "set", "frozenset", "bytes", "bytearray")


class _CifarUnpickler(pickle.Unpickler):
    """Admits only what a CIFAR batch is made of (numpy arrays, builtin containers): a
    pickle naming anything else (os.system, eval, ...) is refused before it can run."""

    def find_class(self, module: str, name: str) -> Any:
        if module in ("builtins", "__builtin__") and name in _CIFAR_SAFE_BUILTINS:
            return getattr(__import__("builtins"), name)
        if (module, name) == ("_codecs", "encode"):  # bytes in a Python 3 protocol-2 pickle
            import codecs

            return codecs.encode
        if module == "numpy" and name in ("ndarray", "dtype"):
            return getattr(np, name)
        for prefix in ("numpy._core.", "numpy.core."):
            if (module, name) == (prefix + "multiarray", "_reconstruct"):
                return _numpy_private("multiarray", "_reconstruct")
            if (module, name) == (prefix + "numeric", "_frombuffer"):
                return _numpy_private("numeric", "_frombuffer")
        raise pickle.UnpicklingError(
            f"refusing {module}.{name}: a CIFAR batch holds only numpy arrays and builtin "
            "containers, so this file is not one (or was tampered with)"
        )


def read_cifar_pickle(path: str | os.PathLike, label_key: str | None = None):
    """Read one CIFAR "python version" batch: CIFAR-100 ``train``/``test`` or CIFAR-10
    ``data_batch_i``/``test_batch``.

    The file is a pickled dict with ``b"data"`` (N, 3072) uint8, each row the red, green then
    blue 32 x 32 planes (CHW order), and labels under ``b"fine_labels"`` (CIFAR-100, used by
    default; ``label_key="coarse_labels"`` for the 20 superclasses) or ``b"labels"``
    (CIFAR-10). Pickles can run code when loaded, so the file is read with an unpickler that
    admits nothing but numpy arrays and builtin containers (`_CifarUnpickler`).

    Returns images uint8 (N, 32, 32, 3) and labels int64 (N,).
    """
    path = Path(path)
    with open(path, "rb") as f:
        try:
            d = _CifarUnpickler(f, encoding="bytes").load()
        except Exception as exc:
            raise ValueError(f"{path} is not a readable CIFAR pickle: {exc}") from exc
    if not isinstance(d, dict):
        raise ValueError(f"{path}: expected a pickled dict, got {type(d).__name__}")
    d = {k.decode() if isinstance(k, bytes) else k: v for k, v in d.items()}
    keys = [label_key] if label_key else ["fine_labels", "labels"]
    key = next((k for k in keys if k in d), None)
    if "data" not in d or key is None:
        raise ValueError(
            f"{path}: a CIFAR batch needs 'data' and one of {keys} entries, found {sorted(d)}"
        )
    data = np.asarray(d["data"])
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or data.dtype != np.uint8:
        raise ValueError(
            f"{path}: 'data' must be uint8 (N, 3072) (3 x 32 x 32, CHW), got {data.dtype} "
            f"{data.shape}"
        )
    x = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x), _labels(d[key], str(path), len(x))


def read_svhn_mat(path: str | os.PathLike):
    """Read SVHN cropped digits (``train_32x32.mat``, ``test_32x32.mat``, ``extra_32x32.mat``).

    ``X`` is (32, 32, 3, N) uint8 and ``y`` (N, 1) with digits 1..9 and 10 for the digit 0;
    label 10 is mapped to 0, so labels are the digits 0..9.

    Returns images uint8 (N, 32, 32, 3) and labels int64 (N,).
    """
    from scipy.io import loadmat

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SVHN file {path} not found")
    try:
        mat = loadmat(str(path))
    except Exception as exc:
        raise ValueError(f"{path} is not a readable .mat file: {exc}") from exc
    if "X" not in mat or "y" not in mat:
        found = sorted(k for k in mat if not k.startswith("__"))
        raise ValueError(f"{path}: an SVHN file needs 'X' and 'y', found {found}")
    big = np.asarray(mat["X"])
    if big.ndim != 4 or big.shape[2] != 3:
        raise ValueError(f"{path}: 'X' must be (32, 32, 3, N), got {big.shape}")
    x = np.ascontiguousarray(big.transpose(3, 0, 1, 2)).astype(np.uint8, copy=False)
    y = _labels(mat["y"], str(path), len(x))
    if len(y) and (y.min() < 0 or y.max() > 10):
        raise ValueError(
            f"{path}: SVHN labels must be 1..10 (10 = digit 0), found {y.min()}..{y.max()}"
        )
    y[y == 10] = 0
    return x, y


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except EOFError as exc:
            raise ValueError(f"{path} is a truncated gzip file ({exc}); download it again") from exc
        except OSError as exc:  # gzip.BadGzipFile and friends
            raise ValueError(f"{path} is a corrupt gzip file ({exc}); download it again") from exc
    return raw


def read_idx(path: str | os.PathLike, expected_magic: int | None = None) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzipped or raw; gzip is detected from the bytes.

    Header: two zero bytes, a type byte (0x08 = uint8, ...), the number of dimensions, then
    one big-endian uint32 per dimension. Raises ValueError for a wrong magic number (when
    `expected_magic` is given), a truncated file or trailing bytes.
    """
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise ValueError(f"{path} is truncated: {len(raw)} bytes, too short for an IDX header")
    magic = int.from_bytes(raw[:4], "big")
    if expected_magic is not None and magic != expected_magic:
        kind = {MNIST_IMAGES_MAGIC: "images (idx3-ubyte)", MNIST_LABELS_MAGIC: "labels"}
        raise ValueError(
            f"{path}: magic number {magic}, expected {expected_magic} for an IDX "
            f"{kind.get(expected_magic, 'file')} file"
            + (f"; {magic} is the magic of an MNIST {kind[magic]} file" if magic in kind else "")
            + ". Check that the images and labels files are not swapped or the wrong file."
        )
    if raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES or raw[3] == 0:
        raise ValueError(f"{path} is not an IDX file (bad header bytes {raw[:4].hex()})")
    dtype, ndim = _IDX_DTYPES[raw[2]], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path} is truncated: the IDX header alone needs {header} bytes")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    expected = int(np.prod(shape)) * dtype.itemsize
    got = len(raw) - header
    if got < expected:
        raise ValueError(
            f"{path} is truncated: the header declares shape {shape} ({expected} bytes of "
            f"data) but the file holds only {got}. Download it again."
        )
    if got > expected:
        raise ValueError(
            f"{path}: {got - expected} unexpected trailing bytes after the {shape} data; "
            "the file is corrupt or not an IDX file"
        )
    return (
        np.frombuffer(raw, dtype=dtype, offset=header)
        .reshape(shape)
        .astype(dtype.newbyteorder("="))
    )


def read_mnist_images(path: str | os.PathLike) -> np.ndarray:
    """MNIST images file (magic 2051) -> uint8 (N, 28, 28, 1)."""
    x = read_idx(path, MNIST_IMAGES_MAGIC)
    if x.ndim != 3 or x.dtype != np.uint8:
        raise ValueError(f"{path}: expected uint8 (N, rows, cols) images, got {x.dtype} {x.shape}")
    return np.ascontiguousarray(x[..., None])


def read_mnist_labels(path: str | os.PathLike) -> np.ndarray:
    """MNIST labels file (magic 2049) -> int64 (N,)."""
    y = read_idx(path, MNIST_LABELS_MAGIC)
    if y.ndim != 1:
        raise ValueError(f"{path}: expected a 1-D labels file, got shape {y.shape}")
    return y.astype(np.int64)


def read_mnist(images_path: str | os.PathLike, labels_path: str | os.PathLike):
    """Read an MNIST images + labels pair: uint8 (N, 28, 28, 1) and int64 (N,)."""
    x = read_mnist_images(images_path)
    y = read_mnist_labels(labels_path)
    if len(x) != len(y):
        raise ValueError(
            f"{images_path} holds {len(x)} images but {labels_path} holds {len(y)} labels; "
            "they are not a matching pair"
        )
    return x, y


def read_npz(path: str | os.PathLike):
    """Your own images: an ``.npz`` with ``x`` uint8 (N, H, W) or (N, H, W, C), C in 1 or 3,
    and integer labels ``y`` (N,). Other entries (e.g. ``class_names``) are ignored.

    Loaded with ``allow_pickle=False``. Returns images uint8 (N, H, W, C) and int64 labels.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"npz file {path} not found")
    try:
        with np.load(path, allow_pickle=False) as d:
            files = list(d.files)
            x = d["x"] if "x" in files else None
            y = d["y"] if "y" in files else None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path} is not a readable .npz of plain arrays: {exc}") from exc
    if x is None or y is None:
        raise ValueError(
            f"{path}: an image .npz needs arrays 'x' (images) and 'y' (labels), found {files}"
        )
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.shape[-1] not in (1, 3):
        raise ValueError(
            f"{path}: 'x' must be (N, H, W) or (N, H, W, C) with C = 1 or 3, got {x.shape}"
        )
    if x.dtype != np.uint8:
        raise ValueError(
            f"{path}: 'x' must be uint8 (0..255), got {x.dtype}. Save "
            "np.clip(x * 255, 0, 255).astype(np.uint8) if you have floats in [0, 1]."
        )
    return np.ascontiguousarray(x), _labels(y, f"{path} 'y'", len(x))


# ---------------------------------------------------------------------------------------
# finding a dataset in a directory


def _missing(name: str, expected: Path, directory: Path) -> FileNotFoundError:
    url, how = PUBLISHERS[name]
    return FileNotFoundError(
        f"{name}: expected file {expected} was not found. The dataset is published at {url}: "
        f"{how} into {directory}, or fetch it with `sgem download {name} {directory}` where a "
        "network exists (loading never downloads)."
    )


def _first_existing(candidates: Sequence[Path]) -> Path | None:
    return next((p for p in candidates if p.is_file()), None)


def load_source(name: str, directory: str | os.PathLike, split: str = "train"):
    """Load one dataset from the original files you have put in `directory`.

    Names and the files they read (``split`` is ``"train"`` or ``"test"``):

    * ``"cifar100"``: ``cifar-100-python/{train,test}`` (fine labels, 100 classes);
    * ``"cifar10"``: ``cifar-10-batches-py/data_batch_1..5`` or ``test_batch``;
    * ``"svhn"``: ``{train,test}_32x32.mat`` (also ``split="extra"``), digits 0..9;
    * ``"mnist"``: ``{train,t10k}-images-idx3-ubyte[.gz]`` and the matching
      ``-labels-idx1-ubyte[.gz]``, in `directory` or ``directory/MNIST/raw``;
    * ``"npz:<file>"``: your own npz (see `read_npz`); a relative path is taken in
      `directory`, and ``{split}`` in it is replaced by the split.

    For the CIFAR names, `directory` may also be the extracted folder itself. Returns images
    uint8 (N, H, W, C) and labels int64. A missing file raises FileNotFoundError naming the
    expected path and where the dataset is published; nothing is downloaded.
    """
    directory = Path(directory).expanduser()
    key = name.strip()
    if key.lower().startswith("npz:"):
        file = Path(key[4:].replace("{split}", split))
        path = file if file.is_absolute() else directory / file
        if not path.is_file():
            raise FileNotFoundError(
                f"npz source: expected file {path} was not found (give 'npz:<file>' relative "
                f"to {directory}, or an absolute path)"
            )
        return read_npz(path)
    key = key.lower().replace("-", "")
    if key not in PUBLISHERS:
        raise ValueError(
            f"unknown image source {name!r}: use one of {sorted(PUBLISHERS)} or 'npz:<file>'"
        )
    splits = ("train", "test", "extra") if key == "svhn" else ("train", "test")
    if split not in splits:
        raise ValueError(f"{key}: split must be one of {splits}, got {split!r}")

    if key in ("cifar10", "cifar100"):
        folder = "cifar-100-python" if key == "cifar100" else "cifar-10-batches-py"
        root = directory if directory.name == folder else directory / folder
        if key == "cifar100":
            files = [root / split]
        else:
            files = (
                [root / f"data_batch_{i}" for i in range(1, 6)]
                if split == "train"
                else [root / "test_batch"]
            )
        for f in files:
            if not f.is_file():
                raise _missing(key, f, directory)
        parts = [read_cifar_pickle(f) for f in files]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    if key == "svhn":
        path = directory / f"{split}_32x32.mat"
        if not path.is_file():
            raise _missing(key, path, directory)
        return read_svhn_mat(path)

    prefix = "train" if split == "train" else "t10k"
    found = []
    for stem in (f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"):
        candidates = [
            d / (stem + ext)
            for d in (directory, directory / "MNIST" / "raw")
            for ext in (".gz", "")
        ]
        path = _first_existing(candidates)
        if path is None:
            raise _missing(key, directory / (stem + ".gz"), directory)
        found.append(path)
    return read_mnist(*found)


# ---------------------------------------------------------------------------------------
# harmonising and mixing sources


def harmonise_images(
    x: np.ndarray,
    size: tuple[int, int] = (32, 32),
    channels: int = 3,
    method: str = "pad",
) -> np.ndarray:
    """Bring uint8 images (N, H, W[, C]) to (N, size[0], size[1], channels).

    Size: with ``method="pad"`` (default) images no larger than `size` are centred and
    zero-padded (black border; the extra pixel of an odd margin goes bottom / right), so
    MNIST 28 x 28 gains a 2-pixel border, which matches its black background exactly; larger
    images, or any with ``method="resize"``, are resized bilinearly (antialiased when
    shrinking). Channels: grey is repeated into R = G = B; colour to grey uses the ITU-R 601
    luma weights.
    """
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.dtype != np.uint8:
        raise ValueError(f"expected uint8 images (N, H, W[, C]), got {x.dtype} {x.shape}")
    if method not in ("pad", "resize"):
        raise ValueError(f"method must be 'pad' or 'resize', got {method!r}")
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels}")
    c = x.shape[-1]
    if c == 4:  # RGBA: drop alpha
        x, c = x[..., :3], 3
    if c != channels:
        if c == 1:
            x = np.repeat(x, channels, axis=-1)
        elif c == 3:
            luma = x.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
            x = np.clip(np.rint(luma), 0, 255).astype(np.uint8)[..., None]
        else:
            raise ValueError(f"cannot convert images with {c} channels (expected 1, 3 or 4)")
    h, w = x.shape[1:3]
    th, tw = int(size[0]), int(size[1])
    if (h, w) == (th, tw):
        return np.ascontiguousarray(x)
    if method == "pad" and h <= th and w <= tw:
        top, left = (th - h) // 2, (tw - w) // 2
        pad = ((0, 0), (top, th - h - top), (left, tw - w - left), (0, 0))
        return np.pad(x, pad)
    import torch
    import torch.nn.functional as F

    out = np.empty((len(x), th, tw, x.shape[-1]), dtype=np.uint8)
    shrink = th < h or tw < w
    with torch.no_grad():
        for start in range(0, len(x), 2048):
            t = torch.from_numpy(np.ascontiguousarray(x[start : start + 2048]))
            t = t.permute(0, 3, 1, 2).float()
            r = F.interpolate(
                t, size=(th, tw), mode="bilinear", align_corners=False, antialias=shrink
            )
            out[start : start + len(t)] = (
                r.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
            )
    return out


@dataclass(frozen=True, eq=False)
class ImageMixture:
    """Images of several sources in one pool.

    Attributes:
        x: uint8 (N, H, W, C) images, sources in order (source 0 first).
        y: int64 labels, source i's labels shifted by `class_offsets[i]`.
        source: int64 source id per image (0, 1, ...).
        n_classes: total number of classes (sum over sources).
        class_offsets: the shift applied to each source's labels.
        names: a name per source.
        index: per source, the indices of the images drawn from it (in `x`'s order).
    """

    x: np.ndarray
    y: np.ndarray
    source: np.ndarray
    n_classes: int
    class_offsets: tuple[int, ...]
    names: tuple[str, ...]
    index: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return len(self.x)


def _mixture_counts(
    sizes: list[int], proportions, counts, total, names: Sequence[str]
) -> list[int]:
    k = len(sizes)
    if counts is not None and proportions is not None:
        raise ValueError("give counts or proportions (with an optional total), not both")
    if counts is not None:
        if np.ndim(counts) == 0:
            counts = [int(counts)] * k
        if len(counts) != k:
            raise ValueError(f"counts has {len(counts)} entries for {k} sources")
        out = [int(c) for c in counts]
    elif proportions is not None:
        p = np.asarray(proportions, dtype=np.float64)
        if p.shape != (k,) or (p < 0).any() or p.sum() <= 0:
            raise ValueError(f"proportions must be {k} non-negative numbers, got {proportions}")
        p = p / p.sum()
        if total is None:  # the largest pool every source can supply without repeats
            total = int(min(n / q for n, q in zip(sizes, p, strict=True) if q > 0))
        raw = p * int(total)
        out = np.floor(raw).astype(int)
        for i in np.argsort(-(raw - out), kind="stable")[: int(total) - out.sum()]:
            out[i] += 1
        out = out.tolist()
    else:
        if total is not None:
            raise ValueError("total needs proportions")
        out = list(sizes)
    for c, n, name in zip(out, sizes, names, strict=True):
        if c < 0 or c > n:
            raise ValueError(
                f"source {name!r} has {n} images, cannot draw {c} (without replacement); "
                "lower its count or proportion"
            )
    return out


def build_image_mixture(
    sources: Sequence[tuple],
    proportions: Sequence[float] | None = None,
    counts: Sequence[int] | int | None = None,
    total: int | None = None,
    seed: int = 0,
    size: tuple[int, int] | None = None,
    channels: int | None = None,
    names: Sequence[str] | None = None,
) -> ImageMixture:
    """Mix image sources into one labelled pool.

    Args:
        sources: a list of ``(images, labels)`` or ``(images, labels, n_classes)``; images
            uint8 (N, H, W[, C]), labels 0..K-1. K defaults to ``labels.max() + 1`` over the
            whole source (before subsampling).
        proportions: fraction of the pool per source (normalised), with an optional `total`
            (default: the largest pool that needs no image twice). Or
        counts: images per source (an int means the same for every source). Neither: all.
        seed: draws the subsets (without replacement).
        size, channels: target (H, W) and C; default the largest H and W among the sources
            and 3 channels if any source is in colour. See `harmonise_images` (smaller images
            are zero-padded, e.g. MNIST 28x28x1 -> 32x32x3 with a 2-pixel border and the grey
            channel repeated).
        names: a name per source (default "source0", ...).

    Labels of later sources are shifted by the number of classes before them, e.g.
    CIFAR-100 + SVHN -> 110 classes (SVHN digit d -> 100 + d), CIFAR-10 + MNIST -> 20.
    """
    if len(sources) < 1:
        raise ValueError("give at least one source")
    names = tuple(names) if names is not None else tuple(f"source{i}" for i in range(len(sources)))
    if len(names) != len(sources):
        raise ValueError(f"{len(names)} names for {len(sources)} sources")
    imgs, labs, n_cls = [], [], []
    for i, src in enumerate(sources):
        if len(src) not in (2, 3):
            raise ValueError(f"source {names[i]!r}: expected (images, labels[, n_classes])")
        x = np.asarray(src[0])
        if x.ndim == 3:
            x = x[..., None]
        if x.ndim != 4 or x.dtype != np.uint8:
            raise ValueError(
                f"source {names[i]!r}: images must be uint8 (N, H, W[, C]), got {x.dtype} {x.shape}"
            )
        y = _labels(src[1], f"source {names[i]!r}", len(x))
        k = int(src[2]) if len(src) == 3 else (int(y.max()) + 1 if len(y) else 0)
        if len(y) and y.max() >= k:
            raise ValueError(
                f"source {names[i]!r}: labels reach {int(y.max())} but n_classes is {k}"
            )
        imgs.append(x)
        labs.append(y)
        n_cls.append(k)
    sizes = [len(x) for x in imgs]
    take = _mixture_counts(sizes, proportions, counts, total, names)
    if size is None:
        size = (max(x.shape[1] for x in imgs), max(x.shape[2] for x in imgs))
    if channels is None:
        channels = 3 if any(x.shape[-1] >= 3 for x in imgs) else 1
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(n_cls)[:-1]]))
    rng = np.random.default_rng(seed)
    xs, ys, ss, index = [], [], [], []
    for i, (x, y, c) in enumerate(zip(imgs, labs, take, strict=True)):
        idx = rng.choice(len(x), size=c, replace=False)
        index.append(idx)
        xs.append(harmonise_images(x[idx], size=size, channels=channels))
        ys.append(y[idx] + offsets[i])
        ss.append(np.full(c, i, dtype=np.int64))
    return ImageMixture(
        x=np.concatenate(xs),
        y=np.concatenate(ys).astype(np.int64),
        source=np.concatenate(ss),
        n_classes=int(sum(n_cls)),
        class_offsets=offsets,
        names=names,
        index=tuple(index),
    )


# ---------------------------------------------------------------------------------------
# tasks


def make_image_task(
    x: np.ndarray,
    y: np.ndarray,
    source: np.ndarray | None = None,
    embeddings="default",
    n_clusters: int = 30,
    split: tuple[float, float, float] = (0.70, 0.15, 0.15),
    seed: int = 0,
    n_classes: int | None = None,
    normalise: str = "unit",
    name: str = "images",
    source_names: Sequence[str] | None = None,
) -> ClusteredTask:
    """An image `ClusteredTask`: clustered on embeddings, holding the pixels.

    Args:
        x: uint8 images (N, H, W[, C]) (e.g. `ImageMixture.x`). y: int labels 0..C-1.
        source: optional source id per image (purity and oracle partition only).
        embeddings: the space k-means runs in: ``"default"`` (the built-in
            `HandcraftedEmbedding`), ``"timm:<model>"`` / ``"torchvision:<model>"`` (local
            weights only), your own (N, d) array (one row per image, same order), or an
            object with ``fit(images)`` / ``transform(images)``. It is fitted on the training
            images only.
        n_clusters: M. k-means (`fit_kmeans`) runs on the training embeddings only;
            validation and test images go to the nearest centroid. A cluster that gets no
            validation image is merged into its neighbours (its centroid dropped, every
            image re-assigned; `merge_clusters_without_samples`), so the task may have
            fewer clusters; ``meta["merged_clusters"]`` says how many went.
        split: train / validation / test fractions of a seeded random permutation.
        normalise: ``"unit"`` (default): pixels / 255, in [0, 1]; ``"standardise"``: per
            channel, minus the training mean, over the training std (both in `meta`).

    The task's ``x`` is float32 NCHW (N, C, H, W); ``centroids`` live in the embedding space.
    ``meta`` holds ``mean_purity`` / ``purity_per_cluster`` (training split, w.r.t.
    `source`), ``val_mean_purity``, ``test_mean_purity`` and a description of the embedding.
    """
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.dtype != np.uint8:
        raise ValueError(
            f"x must be uint8 images (N, H, W[, C]), got {x.dtype} {x.shape}; build it with "
            "build_image_mixture or harmonise_images"
        )
    n = len(x)
    y = _labels(y, "y", n)
    if source is not None:
        source = _labels(source, "source", n)
    fr = np.asarray(split, dtype=np.float64)
    if fr.shape != (3,) or (fr <= 0).any() or abs(fr.sum() - 1.0) > 1e-6:
        raise ValueError(
            f"split must be three positive fractions (train, val, test) summing to 1, got {split}"
        )
    if normalise not in ("unit", "standardise"):
        raise ValueError(f"normalise must be 'unit' or 'standardise', got {normalise!r}")
    if n_classes is None:
        n_classes = int(y.max()) + 1 if n else 0
    # resolve the embedding first: an unavailable backbone fails before any work
    embedding = get_embedding(embeddings, seed=seed)

    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    n_val, n_test = round(fr[1] * n), round(fr[2] * n)
    train_idx, val_idx, test_idx = np.split(perm, [n - n_val - n_test, n - n_test])
    if len(train_idx) < n_clusters:
        raise ValueError(
            f"cannot form {n_clusters} clusters from {len(train_idx)} training images; use "
            "more images or fewer clusters"
        )

    z = fit_embed(embedding, x, train_idx)
    centroids, train_clusters = fit_kmeans(z[train_idx], n_clusters, seed=seed)
    clusters = {
        "train": train_clusters,
        "val": assign_to_centroids(z[val_idx], centroids),
        "test": assign_to_centroids(z[test_idx], centroids),
    }
    by_split = {"train": z[train_idx], "val": z[val_idx], "test": z[test_idx]}
    centroids, clusters, merged = merge_clusters_without_samples(by_split, centroids, clusters)
    n_requested, n_clusters = n_clusters, len(centroids)
    if n_clusters < MIN_CLUSTERS:
        raise ValueError(
            f"only {n_clusters} of the {n_requested} clusters kept validation images after "
            "merging; use more images, fewer clusters or a larger validation fraction"
        )

    meta: dict = {
        "layout": "NCHW",
        "normalise": normalise,
        "embedding": getattr(embedding, "name", type(embedding).__name__),
        "embedding_dim": int(z.shape[1]),
        # what a saved model needs to route new images: the fitted embedding, the pixel size
        "embedding_model": embedding,
        "image_shape_hwc": [int(v) for v in x.shape[1:]],
        "centroid_space": "embedding",
        "n_clusters_requested": int(n_requested),
        "merged_clusters": merged,
    }
    pixels = x.transpose(0, 3, 1, 2)
    if normalise == "standardise":
        train_pixels = pixels[train_idx].astype(np.float64) / 255.0
        mean = train_pixels.mean(axis=(0, 2, 3))
        std = np.maximum(train_pixels.std(axis=(0, 2, 3)), 1e-6)
        meta["pixel_mean"], meta["pixel_std"] = mean.tolist(), std.tolist()

    def to_float(idx: np.ndarray) -> np.ndarray:
        xf = pixels[idx].astype(np.float32) / np.float32(255.0)
        if normalise == "standardise":
            xf = (xf - mean[None, :, None, None]) / std[None, :, None, None]
        return np.ascontiguousarray(xf, dtype=np.float32)

    splits = {}
    for part, idx in (("train", train_idx), ("val", val_idx), ("test", test_idx)):
        src = None if source is None else source[idx]
        splits[part] = Split(to_float(idx), y[idx], clusters[part], src)

    oracle = None
    if source is not None:
        tr = splits["train"]
        purity = cluster_purity(tr.cluster, tr.source, n_clusters)
        meta["purity_per_cluster"] = purity.round(4).tolist()
        meta["mean_purity"] = float(purity.mean())
        for part in ("val", "test"):
            p = cluster_purity(splits[part].cluster, splits[part].source, n_clusters)
            present = np.bincount(splits[part].cluster, minlength=n_clusters) > 0
            meta[f"{part}_mean_purity"] = float(p[present].mean()) if present.any() else None
        oracle = majority_source_partition(tr.cluster, tr.source, n_clusters)
        if source_names is not None:
            meta["source_names"] = list(source_names)
        meta["n_per_source"] = np.bincount(source).tolist()
    return ClusteredTask(
        name=name,
        train=splits["train"],
        val=splits["val"],
        test=splits["test"],
        n_clusters=int(n_clusters),
        loss="cross_entropy",
        n_classes=int(n_classes),
        oracle_partition=oracle,
        centroids=centroids,
        meta=meta,
    )


def make_offline_mixture_task(
    data_dir: str | os.PathLike | None = None,
    n_per_source: int = 3000,
    n_clusters: int = 30,
    seed: int = 0,
    embeddings="default",
    split: tuple[float, float, float] = (0.70, 0.15, 0.15),
    normalise: str = "unit",
) -> ClusteredTask:
    """The offline counterpart of the CIFAR-100 + SVHN mixture: CIFAR-10 + MNIST.

    Reads ``cifar10_subset_train.npz`` (the CIFAR pool, 15000 images) and the official MNIST
    10k test set ``t10k-{images-idx3,labels-idx1}-ubyte.gz`` (the only MNIST part available
    offline, used as the MNIST pool) from `data_dir` (default `OFFLINE_IMAGE_DIR`), draws
    `n_per_source` images from each, pads MNIST to 32 x 32 x 3 and builds the task with
    `make_image_task`: 20 classes (MNIST digit d -> 10 + d), source 0 = CIFAR-10, 1 = MNIST.
    """
    data_dir = Path(data_dir) if data_dir is not None else OFFLINE_IMAGE_DIR
    cifar = load_source("npz:cifar10_subset_train.npz", data_dir)
    mnist = load_source("mnist", data_dir, split="test")
    return _two_source_task(
        [(*cifar, 10), (*mnist, 10)],
        ("cifar10", "mnist"),
        n_per_source,
        seed,
        embeddings=embeddings,
        n_clusters=n_clusters,
        split=split,
        normalise=normalise,
    )


def _two_source_task(
    sources: Sequence[tuple[np.ndarray, np.ndarray, int]],
    names: tuple[str, str],
    n_per_source: int,
    seed: int,
    **task_kwargs: Any,
) -> ClusteredTask:
    """`n_per_source` images of each source, harmonised to 32 x 32 x 3, as one image task
    named "<first>+<second>" (later sources' labels shifted, see `build_image_mixture`)."""
    mix = build_image_mixture(
        sources,
        counts=[n_per_source] * len(sources),
        seed=seed,
        size=(32, 32),
        channels=3,
        names=names,
    )
    return make_image_task(
        mix.x,
        mix.y,
        mix.source,
        seed=seed,
        n_classes=mix.n_classes,
        name="+".join(names),
        source_names=mix.names,
        **task_kwargs,
    )


def build_image_task(cfg: Mapping[str, Any], seed: int) -> ClusteredTask:
    """The full-resolution image task of a run config's `task` section.

    Keys: ``source`` (``"offline"``: CIFAR-10 + MNIST from ``directory`` or
    `OFFLINE_IMAGE_DIR`, see `make_offline_mixture_task`; ``"cifar100+svhn"``: the paper's
    mixture, read from ``directory`` holding ``cifar-100-python/`` and ``train_32x32.mat``),
    ``n_per_source``, ``n_clusters``, and optionally ``directory``, ``embeddings`` (default
    ``"default"``) and ``split`` (default 0.7 / 0.15 / 0.15). Other keys (``name``,
    ``image_size``) are ignored here; apply ``image_size`` with `downsample`.
    The mixture draw, the split and the clustering depend on `seed`.
    """
    source = cfg["source"]
    common: dict[str, Any] = {
        "n_clusters": int(cfg["n_clusters"]),
        "seed": seed,
        "embeddings": cfg.get("embeddings", "default"),
        "split": tuple(cfg.get("split", (0.7, 0.15, 0.15))),
    }
    if source == "offline":
        return make_offline_mixture_task(
            cfg.get("directory") or OFFLINE_IMAGE_DIR,
            n_per_source=int(cfg["n_per_source"]),
            **common,
        )
    if source == "cifar100+svhn":
        directory = cfg.get("directory")
        if not directory:
            raise ValueError(
                "the CIFAR-100 + SVHN task reads CIFAR-100 (cifar-100-python/) and SVHN "
                "(train_32x32.mat) from task.directory (benchmarks/images_main.py: --data-dir)"
            )
        cifar = load_source("cifar100", directory)
        svhn = load_source("svhn", directory)
        return _two_source_task(
            [(*cifar, 100), (*svhn, 10)], ("cifar100", "svhn"), int(cfg["n_per_source"]), **common
        )
    raise ValueError(f"unknown image source {source!r}; expected 'offline' or 'cifar100+svhn'")


def downsample(task: ClusteredTask, size: int | None) -> ClusteredTask:
    """The same task (clusters, splits, labels) with its NCHW images average-pooled to
    `size` x `size`; `task` itself when `size` is None or already the image side.

    Clustering ran on the full-resolution embeddings; only what the networks see shrinks
    (what makes the offline scale affordable on a CPU). `size` must divide the image side.
    """
    h = task.input_shape[-1]
    if size is None or size == h:
        return task
    if size < 1 or h % size:
        raise ValueError(f"image_size {size} must divide the image side {h}")
    import torch
    import torch.nn.functional as F

    def pool(split: Split) -> Split:
        x = F.avg_pool2d(torch.from_numpy(split.x), h // size).numpy()
        return Split(np.ascontiguousarray(x), split.y, split.cluster, split.source)

    return replace(
        task,
        train=pool(task.train),
        val=pool(task.val),
        test=pool(task.test),
        meta={**task.meta, "image_size": int(size)},
    )
