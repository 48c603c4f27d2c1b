"""Fetch the original image datasets where a network exists (`sgem download NAME DIR`).

Loading never downloads (`sgem.data.images.load_source` only reads what is on disk); this
module is the explicit opt-in. Every file is checked against the MD5 its publisher's
archive is known to have before it is kept, written to ``<file>.part`` first so an
interrupted download never leaves a file that looks complete, and CIFAR archives are
extracted with tarfile's ``data`` filter (no absolute paths or links out of `directory`).
The layout it leaves is exactly what `load_source` reads.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .images import PUBLISHERS


@dataclass(frozen=True)
class RemoteFile:
    """One published file: where it is, its MD5, and (for archives) the folder it unpacks to."""

    url: str
    md5: str
    extracts_to: str | None = None

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[-1]


_MNIST = "https://ossci-datasets.s3.amazonaws.com/mnist/"
DOWNLOADS: dict[str, tuple[RemoteFile, ...]] = {
    "cifar10": (
        RemoteFile(
            "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
            "c58f30108f718f92721af3b95e74349a",
            "cifar-10-batches-py",
        ),
    ),
    "cifar100": (
        RemoteFile(
            "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
            "eb9058c3a382ffc7106e4002c42a8d85",
            "cifar-100-python",
        ),
    ),
    "svhn": (
        RemoteFile(
            "http://ufldl.stanford.edu/housenumbers/train_32x32.mat",
            "e26dedcc434d2e4c54c9b2d4a06d8373",
        ),
        RemoteFile(
            "http://ufldl.stanford.edu/housenumbers/test_32x32.mat",
            "eb5a983be6a315427106f1b164d9cef3",
        ),
    ),
    "mnist": (
        RemoteFile(_MNIST + "train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        RemoteFile(_MNIST + "train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
        RemoteFile(_MNIST + "t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        RemoteFile(_MNIST + "t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ),
}


def md5sum(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _source_url(file: RemoteFile, mirror: str | os.PathLike | None) -> str:
    """The publisher's URL, or the same file name under `mirror` (a URL or a local folder)."""
    if mirror is None:
        return file.url
    mirror = str(mirror)
    if "://" not in mirror:
        mirror = Path(mirror).resolve().as_uri()
    return mirror.rstrip("/") + "/" + file.name


def _fetch(url: str, target: Path, progress: bool) -> None:
    partial = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
            total = response.headers.get("Content-Length")
            with tqdm(
                total=int(total) if total else None,
                unit="B",
                unit_scale=True,
                desc=target.name,
                disable=not progress,
            ) as bar:
                while block := response.read(1 << 20):
                    out.write(block)
                    bar.update(len(block))
    except (urllib.error.URLError, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise ConnectionError(f"could not fetch {url}: {exc}") from exc
    partial.replace(target)


def download_dataset(
    name: str,
    directory: str | os.PathLike,
    *,
    mirror: str | os.PathLike | None = None,
    progress: bool = True,
) -> list[Path]:
    """Download (and, for CIFAR, extract) dataset `name` into `directory`.

    Files already there with the right MD5 are kept, so a rerun after an interruption only
    fetches what is missing. `mirror` replaces the publisher's location (a URL or a local
    folder holding the same file names). Returns the paths `load_source` will read.
    Raises ValueError for an unknown name or a checksum mismatch, ConnectionError (naming
    the manual route) when a file cannot be fetched.
    """
    key = name.strip().lower().replace("-", "")
    if key not in DOWNLOADS:
        raise ValueError(f"unknown dataset {name!r}: downloadable are {sorted(DOWNLOADS)}")
    directory = Path(directory).expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for file in DOWNLOADS[key]:
        target = directory / file.name
        if file.extracts_to and (directory / file.extracts_to).is_dir():
            out.append(directory / file.extracts_to)
            continue
        if not (target.is_file() and md5sum(target) == file.md5):
            url = _source_url(file, mirror)
            try:
                _fetch(url, target, progress)
            except ConnectionError as exc:
                page, how = PUBLISHERS[key]
                raise ConnectionError(
                    f"{exc}. Without a network: {how} into {directory} by hand (published "
                    f"at {page}), or pass a mirror."
                ) from exc
            got = md5sum(target)
            if got != file.md5:
                bad = target.with_name(target.name + ".bad")
                shutil.move(target, bad)
                raise ValueError(
                    f"{url}: MD5 {got} does not match the published {file.md5}; the download "
                    f"is corrupt or not the original file (kept as {bad} for inspection)"
                )
        if file.extracts_to:
            try:
                with tarfile.open(target, "r:gz") as archive:
                    archive.extractall(directory, filter="data")
            except tarfile.TarError as exc:
                raise ValueError(f"{target}: corrupt or unsafe archive ({exc})") from exc
            if not (directory / file.extracts_to).is_dir():
                raise ValueError(f"{target} did not unpack to {file.extracts_to}/ as expected")
            out.append(directory / file.extracts_to)
        else:
            out.append(target)
    return out


__all__ = ["DOWNLOADS", "RemoteFile", "download_dataset", "md5sum"]
