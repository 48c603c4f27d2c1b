"""Readers for the original image dataset files.

Each returns ``(images, labels)``: images uint8 of shape (N, H, W, C), labels int64.

* `read_cifar_pickle`: the CIFAR-10 / CIFAR-100 "python version" pickles, read with a
  restricted unpickler (`_CifarUnpickler`) that admits only numpy arrays and builtin
  containers.
* `read_svhn_mat`: SVHN cropped digits, ``train_32x32.mat`` / ``test_32x32.mat``.
* `read_mnist`: MNIST IDX files (``*-images-idx3-ubyte`` + ``*-labels-idx1-ubyte``, gzipped
  or raw); `read_idx` reads any IDX file.
* `read_npz`: your own ``.npz`` with ``x`` uint8 (N, H, W[, C]) and integer ``y``.

Finding the files of a named dataset is `sgem.data.image_sources`; everything here is also
importable from `sgem.data.images`.
"""

from __future__ import annotations

import gzip
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "MNIST_IMAGES_MAGIC",
    "MNIST_LABELS_MAGIC",
    "read_cifar_pickle",
    "read_idx",
    "read_mnist",
    "read_mnist_images",
    "read_mnist_labels",
    "read_npz",
    "read_svhn_mat",
]

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
