"""`sgem download` / `sgem.data.download`: fetched from a local mirror (no network here), the
files are MD5-checked, extracted safely and left exactly where `load_source` reads them."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from test_images import rand_images, write_cifar100, write_mnist

from sgem.cli import main
from sgem.data import download as dl
from sgem.data.images import load_source


def _pin(monkeypatch, name: str, mirror: Path) -> None:
    """Point the registry's checksums at the fake files in `mirror`."""
    files = tuple(
        dl.RemoteFile(f.url, dl.md5sum(mirror / f.name), f.extracts_to) for f in dl.DOWNLOADS[name]
    )
    monkeypatch.setitem(dl.DOWNLOADS, name, files)


@pytest.fixture
def cifar100_mirror(tmp_path: Path, monkeypatch) -> Path:
    staging, mirror = tmp_path / "staging", tmp_path / "mirror"
    mirror.mkdir()
    for split, n in (("train", 12), ("test", 5)):
        write_cifar100(staging, split, rand_images(n, seed=n), np.arange(n) % 100)
    with tarfile.open(mirror / "cifar-100-python.tar.gz", "w:gz") as archive:
        archive.add(staging / "cifar-100-python", arcname="cifar-100-python")
    _pin(monkeypatch, "cifar100", mirror)
    return mirror


def test_cifar100_download_extracts_where_the_reader_looks(cifar100_mirror, tmp_path):
    dest = tmp_path / "data"
    paths = dl.download_dataset("CIFAR-100", dest, mirror=cifar100_mirror, progress=False)
    assert paths == [dest / "cifar-100-python"]
    x, y = load_source("cifar100", dest, split="train")
    assert x.shape == (12, 32, 32, 3) and y.tolist() == list(range(12))
    # extracted already: a second call fetches nothing, even with the mirror gone
    assert dl.download_dataset("cifar100", dest, mirror=tmp_path / "gone", progress=False)


def test_mnist_download_and_resume(tmp_path, monkeypatch):
    mirror, dest = tmp_path / "mirror", tmp_path / "data"
    mirror.mkdir()
    for prefix, n in (("train", 9), ("t10k", 4)):
        x = rand_images(n, 28, 28, 1)[..., 0]
        write_mnist(mirror, prefix, x, np.arange(n) % 10, gz=True)
    _pin(monkeypatch, "mnist", mirror)
    dest.mkdir()
    (dest / "train-images-idx3-ubyte.gz").write_bytes(
        (mirror / "train-images-idx3-ubyte.gz").read_bytes()
    )
    (dest / "t10k-labels-idx1-ubyte.gz").write_bytes(b"half a file")  # an interrupted earlier try
    dl.download_dataset("mnist", dest, mirror=mirror, progress=False)
    x, y = load_source("mnist", dest, split="test")
    assert x.shape == (4, 28, 28, 1) and y.tolist() == [0, 1, 2, 3]
    assert not list(dest.glob("*.part"))


def test_checksum_mismatch_is_refused(cifar100_mirror, tmp_path, monkeypatch):
    wrong = tuple(dl.RemoteFile(f.url, "0" * 32, f.extracts_to) for f in dl.DOWNLOADS["cifar100"])
    monkeypatch.setitem(dl.DOWNLOADS, "cifar100", wrong)
    dest = tmp_path / "data"
    with pytest.raises(ValueError, match="does not match the published"):
        dl.download_dataset("cifar100", dest, mirror=cifar100_mirror, progress=False)
    assert not (dest / "cifar-100-python").exists()
    assert not (dest / "cifar-100-python.tar.gz").exists()


def test_unsafe_archive_is_refused(tmp_path, monkeypatch):
    mirror, dest = tmp_path / "mirror", tmp_path / "data"
    mirror.mkdir()
    with tarfile.open(mirror / "cifar-100-python.tar.gz", "w:gz") as archive:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 3
        archive.addfile(info, io.BytesIO(b"bad"))
    _pin(monkeypatch, "cifar100", mirror)
    with pytest.raises(ValueError, match="unsafe archive"):
        dl.download_dataset("cifar100", dest, mirror=mirror, progress=False)
    assert not (tmp_path / "escaped.txt").exists()


def test_unreachable_source_names_the_manual_route(tmp_path):
    with pytest.raises(ConnectionError, match="by hand") as info:
        dl.download_dataset("svhn", tmp_path / "data", mirror=tmp_path / "nowhere", progress=False)
    assert "ufldl.stanford.edu/housenumbers" in str(info.value)
    assert not list((tmp_path / "data").glob("*.part"))


def test_cli_download(cifar100_mirror, tmp_path, capsys):
    dest = tmp_path / "data"
    assert (
        main(["download", "cifar100", str(dest), "--mirror", str(cifar100_mirror), "--quiet"]) == 0
    )
    assert "ready:" in capsys.readouterr().out
    assert main(["download", "imagenet", str(dest)]) == 2
    assert "downloadable are" in capsys.readouterr().err
