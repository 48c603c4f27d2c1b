"""Fetch the original datasets where a network exists (`sgem download NAME DIR`).

Loading never downloads (`sgem.data.images.load_source` and `sgem.data.timeseries.load_domains`
only read what is on disk); this module is the explicit opt-in. It knows the original image
datasets (cifar10, cifar100, svhn, mnist) and the four Monash forecasting files of the
benchmark (`MONASH_FILES`: electricity_hourly, kdd_cup_2018, weather, tourism_monthly; the
group name "monash" fetches all four, or the ones `names=` lists).

Every file is written to ``<file>.part`` first, so an interrupted download never leaves a file
that looks complete, and is checked before it is kept: against its publisher's SHA-256 where
one is published (the Monash zips on Zenodo), else the MD5 its archive is known to have (the
image datasets). A file with no published checksum (`md5` and `sha256` both None; the Monash
electricity_hourly zip) is verified by content instead: the zip opens, its CRCs check, it
holds the expected `.tsf` and `sgem.data.tsf.read_tsf` parses it; a warning says so.

CIFAR archives are extracted with tarfile's ``data`` filter (no absolute paths or links out of
`directory`), and a completion marker ``.<folder>.sgem-complete`` is written beside the folder
only once the extraction has finished and been checked: a folder without its marker (an
interrupted extraction) is extracted again. The Monash zips stay zipped (`load_domains` and
`read_tsf` read them as they are). The layout left is exactly what the loaders read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .images import PUBLISHERS
from .timeseries import MONASH_FILES
from .tsf import read_tsf

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RemoteFile:
    """One published file: where it is, how it is checked, and what it unpacks to.

    `md5` / `sha256`: the checksums it must have (either may be None; SHA-256 is used where
    the publisher gives one). `size`: its size in bytes where known (a quick first check).
    `extracts_to`: for a tar archive, the folder it unpacks to. `contains`: for a zip, the
    member it must hold; with no checksum at all, the file is verified by content (the zip
    opens and tests clean, holds `contains`, and that `.tsf` parses).
    """

    url: str
    md5: str | None = None
    extracts_to: str | None = None
    sha256: str | None = None
    size: int | None = None
    contains: str | None = None

    @property
    def name(self) -> str:
        """The file name: the URL's last path segment, without any query."""
        return urllib.parse.urlsplit(self.url).path.rsplit("/", 1)[-1]

    @property
    def checksummed(self) -> bool:
        return self.md5 is not None or self.sha256 is not None


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
            "https://ufldl.stanford.edu/housenumbers/train_32x32.mat",
            "e26dedcc434d2e4c54c9b2d4a06d8373",
        ),
        RemoteFile(
            "https://ufldl.stanford.edu/housenumbers/test_32x32.mat",
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

#: The Monash zips on Zenodo: domain -> (record id, SHA-256, size in bytes). The record ids are
#: the archive's (forecastingdata.org links to them); the SHA-256s and sizes are those recorded
#: for the same Zenodo files by the Hugging Face `monash_tsf` dataset script
#: (datasets/monash_tsf/dataset_infos.json). None published for electricity_hourly (that
#: script does not carry it): verified by content. No network here, so none of this was
#: fetched to check: the URLs and digests are as published, not re-measured.
MONASH_RECORDS: dict[str, tuple[str, str | None, int | None]] = {
    "electricity_hourly": ("4656140", None, None),
    "kdd_cup_2018": (
        "4656719",
        "3d0d2dbec3621b20c7a8ae6e6f00a63bfaebb962dca34d9f60f0ddbbde03e9bd",
        2456948,
    ),
    "weather": (
        "4654822",
        "adc9195b4b842673892fec1ba22cced9c42d5c4cba9a261f455ffbe96db7847b",
        38820451,
    ),
    "tourism_monthly": (
        "4656096",
        "6e434ad8a0ef6acb55ebee0e1d1ffe22707ea4e62c05e091326267f3a5b4a93c",
        199791,
    ),
}

for _domain, _tsf in MONASH_FILES.items():
    _record, _sha256, _size = MONASH_RECORDS[_domain]
    _zip = _tsf[: -len(".tsf")] + ".zip"
    DOWNLOADS[_domain] = (
        RemoteFile(
            f"https://zenodo.org/records/{_record}/files/{_zip}?download=1",
            sha256=_sha256,
            size=_size,
            contains=_tsf,
        ),
    )

#: names that fetch several datasets: group -> its members
GROUPS: dict[str, tuple[str, ...]] = {"monash": tuple(MONASH_FILES)}


def _publisher(key: str) -> tuple[str, str]:
    """(where `key` is published, what to download by hand)."""
    if key in MONASH_RECORDS:
        file = DOWNLOADS[key][0]
        return (
            f"https://zenodo.org/records/{MONASH_RECORDS[key][0]} (Monash Time Series "
            "Forecasting Archive, https://forecastingdata.org/)",
            f"download {file.name} and leave it zipped",
        )
    return PUBLISHERS[key]


def _digest(path: Path, algorithm: str, chunk: int = 1 << 20) -> str:
    digest = hashlib.new(algorithm, usedforsecurity=False)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def md5sum(path: Path, chunk: int = 1 << 20) -> str:
    return _digest(path, "md5", chunk)


def sha256sum(path: Path, chunk: int = 1 << 20) -> str:
    return _digest(path, "sha256", chunk)


def _checksum_problem(file: RemoteFile, path: Path) -> str | None:
    """Why `path` is not `file` by its published size and checksums, or None."""
    if file.size is not None and path.stat().st_size != file.size:
        return f"size {path.stat().st_size} bytes does not match the published {file.size}"
    if file.sha256 is not None and (got := sha256sum(path)) != file.sha256:
        return f"SHA-256 {got} does not match the published {file.sha256}"
    if file.md5 is not None and (got := md5sum(path)) != file.md5:
        return f"MD5 {got} does not match the published {file.md5}"
    return None


def _content_problem(file: RemoteFile, path: Path) -> str | None:
    """Why `path` is not a sound zip holding a parseable `file.contains`, or None."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.namelist()
            if file.contains not in members:
                return f"the zip holds {members}, not {file.contains}"
            broken = archive.testzip()
            if broken is not None:
                return f"{broken} in the zip fails its CRC check"
        read_tsf(path)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        return f"not a readable zip archive ({exc})"
    except ValueError as exc:  # TSFFormatError
        return f"its .tsf does not parse ({exc})"
    return None


def _marker(directory: Path, what: str) -> Path:
    """The completion marker of `what` (an extracted folder or a content-verified file)."""
    return directory / f".{what}.sgem-complete"


def _stamp(path: Path) -> dict:
    stat = path.stat()
    return {"name": path.name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _marked(directory: Path, what: str, stamp: dict | None = None) -> bool:
    marker = _marker(directory, what)
    if not marker.is_file():
        return False
    if stamp is None:
        return True
    try:
        return json.loads(marker.read_text()) == stamp
    except ValueError:
        return False


def _mark(directory: Path, what: str, stamp: dict) -> None:
    marker = _marker(directory, what)
    partial = marker.with_name(marker.name + ".part")
    partial.write_text(json.dumps(stamp))
    partial.replace(marker)


def _source_url(file: RemoteFile, mirror: str | os.PathLike | None) -> str:
    """The publisher's URL, or the same file name under `mirror` (a URL or a local folder)."""
    if mirror is None:
        return file.url
    mirror = str(mirror)
    if "://" not in mirror:
        mirror = Path(mirror).resolve().as_uri()
    return mirror.rstrip("/") + "/" + file.name


def _fetch(url: str, partial: Path, progress: bool) -> None:
    """Stream `url` into `partial` (a ``.part`` file); on failure remove it."""
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
            total = response.headers.get("Content-Length")
            with tqdm(
                total=int(total) if total else None,
                unit="B",
                unit_scale=True,
                desc=partial.name.removesuffix(".part"),
                disable=not progress,
            ) as bar:
                while block := response.read(1 << 20):
                    out.write(block)
                    bar.update(len(block))
    except (urllib.error.URLError, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise ConnectionError(f"could not fetch {url}: {exc}") from exc


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "").replace("_", "")


_KEYS = {_key(k): k for k in (*DOWNLOADS, *GROUPS)}


def downloadable() -> list[str]:
    """Every name `download_dataset` accepts (datasets and groups)."""
    return sorted((*DOWNLOADS, *GROUPS))


def _resolve(name: str, names: Sequence[str] | None) -> list[str]:
    key = _KEYS.get(_key(name))
    if key is None:
        raise ValueError(f"unknown dataset {name!r}: downloadable are {downloadable()}")
    if key not in GROUPS:
        if names:
            raise ValueError(f"names= picks members of a group ({sorted(GROUPS)}), not of {key!r}")
        return [key]
    if not names:
        return list(GROUPS[key])
    members = {_key(m): m for m in GROUPS[key]}
    unknown = [n for n in names if _key(n) not in members]
    if unknown:
        raise ValueError(f"{key} has no {unknown}: its datasets are {list(GROUPS[key])}")
    return list(dict.fromkeys(members[_key(n)] for n in names))


def _obtain(key: str, file: RemoteFile, directory: Path, mirror, progress: bool) -> Path:
    """`directory/file.name`, verified: kept when already there and sound, else fetched."""
    target = directory / file.name
    if target.is_file():
        if file.checksummed:
            if _checksum_problem(file, target) is None:
                return target
        elif _marked(directory, file.name, _stamp(target)):
            return target
        elif _content_problem(file, target) is None:
            _mark(directory, file.name, _stamp(target))
            return target
    url = _source_url(file, mirror)
    partial = target.with_name(target.name + ".part")
    try:
        _fetch(url, partial, progress)
    except ConnectionError as exc:
        page, how = _publisher(key)
        raise ConnectionError(
            f"{exc}. Without a network: {how} into {directory} by hand (published at {page}), "
            "or pass a mirror."
        ) from exc
    problem = _checksum_problem(file, partial) if file.checksummed else None
    if problem is None:
        partial.replace(target)
        if not file.checksummed:
            # a zip must be named .zip to be read; it is not marked complete until it parses
            problem = _content_problem(file, target)
            if problem is None:
                _mark(directory, file.name, _stamp(target))
                log.warning(
                    "%s: no checksum is published for this file; verified by content instead "
                    "(the zip opens and tests clean, holds %s, and it parses as .tsf)",
                    target,
                    file.contains,
                )
                return target
            problem = f"no checksum is published, and the content check fails: {problem}"
            partial = target
    if problem is not None:
        bad = target.with_name(target.name + ".bad")
        shutil.move(partial, bad)
        raise ValueError(
            f"{url}: {problem}; the download is corrupt or not the original file (kept as "
            f"{bad} for inspection)"
        )
    return target


def _extract(archive_path: Path, file: RemoteFile, directory: Path) -> Path:
    """Extract a verified tar archive over `directory` and mark the folder complete."""
    assert file.extracts_to is not None
    folder = directory / file.extracts_to
    _marker(directory, file.extracts_to).unlink(missing_ok=True)
    try:
        with tarfile.open(archive_path, "r:*") as archive:
            archive.extractall(directory, filter="data")
    except tarfile.TarError as exc:
        raise ValueError(f"{archive_path}: corrupt or unsafe archive ({exc})") from exc
    if not folder.is_dir():
        raise ValueError(f"{archive_path} did not unpack to {file.extracts_to}/ as expected")
    _mark(directory, file.extracts_to, {"archive": archive_path.name})
    return folder


def download_dataset(
    name: str,
    directory: str | os.PathLike,
    *,
    names: Sequence[str] | None = None,
    mirror: str | os.PathLike | None = None,
    progress: bool = True,
) -> list[Path]:
    """Download (and, for CIFAR, extract) dataset `name` into `directory`.

    Args:
        name: a dataset (cifar10, cifar100, svhn, mnist, electricity_hourly, kdd_cup_2018,
            weather, tourism_monthly; case, '-' and '_' ignored) or a group ("monash": the
            four forecasting files).
        directory: where to put the files (created if need be).
        names: for a group, which of its datasets (default: all).
        mirror: a URL or local folder holding the same file names, instead of the publisher.
        progress: show progress bars.

    Files already there and verified are kept, so a rerun after an interruption only fetches
    (or extracts) what is missing or incomplete. Returns the paths the loaders read: the
    extracted folder for CIFAR, the file otherwise (a Monash `.zip`, which `load_domains`
    finds in `directory`). Raises ValueError for an unknown name or a file that fails its
    check (moved aside as ``<file>.bad``), ConnectionError (naming the manual route) when a
    file cannot be fetched.
    """
    keys = _resolve(name, names)
    directory = Path(directory).expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for key in keys:
        for file in DOWNLOADS[key]:
            if file.extracts_to is None:
                out.append(_obtain(key, file, directory, mirror, progress))
                continue
            folder = directory / file.extracts_to
            if folder.is_dir() and _marked(directory, file.extracts_to):
                out.append(folder)
                continue
            out.append(_extract(_obtain(key, file, directory, mirror, progress), file, directory))
    return out


__all__ = [
    "DOWNLOADS",
    "GROUPS",
    "MONASH_RECORDS",
    "RemoteFile",
    "download_dataset",
    "downloadable",
    "md5sum",
    "sha256sum",
]
