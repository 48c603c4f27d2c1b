"""The catalogue of image datasets: where each is published, which files a named source
reads, and where the offline files live.

`load_source(name, directory, split)` finds the files of a named dataset in a directory
where you have put the original downloads and reads them with the readers of
`sgem.data.image_readers`. Loading never downloads: a missing file raises
`FileNotFoundError` naming the exact path it expected, where the dataset is published and
the opt-in `sgem download NAME DIR` (`sgem.data.download`) that fetches it where a network
exists. Everything here is also importable from `sgem.data.images`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .image_readers import read_cifar_pickle, read_mnist, read_npz, read_svhn_mat
from .paths import shared_data_dir

__all__ = ["OFFLINE_IMAGE_DIR", "PUBLISHERS", "load_source"]

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
