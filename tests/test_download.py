"""`sgem download` / `sgem.data.download`: fetched from a local mirror (no network here), the
files are checksum-verified (MD5, SHA-256, or by content where no checksum is published),
extracted safely, marked complete only after a full extraction, and left exactly where
`load_source` and `load_domains` read them."""

from __future__ import annotations

import dataclasses
import io
import logging
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_images import rand_images, write_cifar100, write_mnist

from sgem.cli import main
from sgem.data import download as dl
from sgem.data.images import load_source
from sgem.data.timeseries import MONASH_FILES, load_domains
from sgem.data.tsf import TSFData, write_tsf


def _pin(monkeypatch, name: str, mirror: Path) -> None:
    """Point the registry's checksums (and sizes) at the fake files in `mirror`; a file with no
    checksum stays without one (verified by content)."""
    files = tuple(
        dataclasses.replace(
            f,
            md5=dl.md5sum(mirror / f.name) if f.md5 else None,
            sha256=dl.sha256sum(mirror / f.name) if f.sha256 else None,
            size=(mirror / f.name).stat().st_size if f.size else None,
        )
        for f in dl.DOWNLOADS[name]
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


def test_partial_extraction_is_redone(cifar100_mirror, tmp_path):
    dest = tmp_path / "data"
    dl.download_dataset("cifar100", dest, mirror=cifar100_mirror, progress=False)
    marker = dest / ".cifar-100-python.sgem-complete"
    assert marker.is_file()
    # an extraction interrupted half-way: the folder is there, a file and the marker are not
    marker.unlink()
    (dest / "cifar-100-python" / "test").unlink()
    paths = dl.download_dataset("cifar100", dest, mirror=tmp_path / "gone", progress=False)
    assert paths == [dest / "cifar-100-python"] and marker.is_file()
    x, _ = load_source("cifar100", dest, split="test")  # re-extracted from the kept archive
    assert x.shape == (5, 32, 32, 3)
    # the folder without its marker and without the archive: fetched and extracted again
    marker.unlink()
    (dest / "cifar-100-python.tar.gz").unlink()
    with pytest.raises(ConnectionError):
        dl.download_dataset("cifar100", dest, mirror=tmp_path / "gone", progress=False)
    assert dl.download_dataset("cifar100", dest, mirror=cifar100_mirror, progress=False)
    assert marker.is_file()


def test_https_everywhere():
    assert all(f.url.startswith("https://") for files in dl.DOWNLOADS.values() for f in files)


# -- Monash ---------------------------------------------------------------------------------


def _monash_zip(mirror: Path, tsf_name: str, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    series = [rng.normal(10, 1, size=300), rng.normal(5, 1, size=280)]
    series[1][7] = np.nan
    data = TSFData(
        series,
        [{"series_name": "T1"}, {"series_name": "T2"}],
        {"series_name": "string"},
        relation=tsf_name,
        frequency="hourly",
        horizon=24,
    )
    tsf = write_tsf(data, mirror / tsf_name)
    path = mirror / (tsf_name[: -len(".tsf")] + ".zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(tsf, tsf_name)
    tsf.unlink()
    return path


@pytest.fixture
def monash_mirror(tmp_path: Path, monkeypatch) -> Path:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for seed, (domain, tsf_name) in enumerate(MONASH_FILES.items()):
        _monash_zip(mirror, tsf_name, seed)
        _pin(monkeypatch, domain, mirror)
    return mirror


def test_monash_registry():
    assert dl.GROUPS["monash"] == tuple(MONASH_FILES)
    for domain, tsf_name in MONASH_FILES.items():
        (file,) = dl.DOWNLOADS[domain]
        assert file.contains == tsf_name and file.name == tsf_name.replace(".tsf", ".zip")
        assert file.url.startswith("https://zenodo.org/records/")
    # no checksum published for electricity_hourly: verified by content, never invented
    assert not dl.DOWNLOADS["electricity_hourly"][0].checksummed
    assert all(len(dl.DOWNLOADS[d][0].sha256) == 64 for d in ("kdd_cup_2018", "weather"))


def test_monash_download_where_load_domains_looks(monash_mirror, tmp_path, caplog):
    dest = tmp_path / "data"
    with caplog.at_level(logging.WARNING):
        paths = dl.download_dataset("monash", dest, mirror=monash_mirror, progress=False)
    assert [p.name for p in paths] == [f.replace(".tsf", ".zip") for f in MONASH_FILES.values()]
    assert "no checksum is published" in caplog.text and "verified by content" in caplog.text
    domains = load_domains(dest)
    assert list(domains) == list(MONASH_FILES)
    assert np.isnan(domains["weather"].series[1][7]) and domains["weather"].horizon == 24
    assert not list(dest.glob("*.part")) and not list(dest.glob("*.bad"))
    # all verified already: nothing fetched again, even with the mirror gone
    caplog.clear()
    again = dl.download_dataset("monash", dest, mirror=tmp_path / "gone", progress=False)
    assert again == paths and "no checksum" not in caplog.text


def test_monash_names_and_single_domains(monash_mirror, tmp_path):
    dest = tmp_path / "data"
    got = dl.download_dataset(
        "Monash", dest, names=["weather", "tourism-monthly"], mirror=monash_mirror, progress=False
    )
    assert [p.name for p in got] == ["weather_dataset.zip", "tourism_monthly_dataset.zip"]
    (got,) = dl.download_dataset("kdd-cup-2018", dest, mirror=monash_mirror, progress=False)
    assert got.name == "kdd_cup_2018_dataset_with_missing_values.zip"
    with pytest.raises(ValueError, match="monash has no \\['traffic'\\]"):
        dl.download_dataset("monash", dest, names=["traffic"], mirror=monash_mirror)
    with pytest.raises(ValueError, match="names= picks members of a group"):
        dl.download_dataset("weather", dest, names=["weather"], mirror=monash_mirror)


def test_monash_sha256_mismatch(monash_mirror, tmp_path, monkeypatch):
    (file,) = dl.DOWNLOADS["weather"]
    monkeypatch.setitem(dl.DOWNLOADS, "weather", (dataclasses.replace(file, sha256="0" * 64),))
    dest = tmp_path / "data"
    with pytest.raises(ValueError, match=r"SHA-256 .* does not match the published"):
        dl.download_dataset("weather", dest, mirror=monash_mirror, progress=False)
    assert not (dest / "weather_dataset.zip").exists()
    assert (dest / "weather_dataset.zip.bad").exists()


def test_unverifiable_file_without_checksum_is_refused(monash_mirror, tmp_path):
    # no checksum published: a zip that does not hold a parseable .tsf is not kept
    zipped = monash_mirror / "electricity_hourly_dataset.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("electricity_hourly_dataset.tsf", "@relation x\n@data\nT1:1,2,oops\n")
    dest = tmp_path / "data"
    with pytest.raises(ValueError, match="no checksum is published, and the content check fails"):
        dl.download_dataset("electricity_hourly", dest, mirror=monash_mirror, progress=False)
    assert not (dest / "electricity_hourly_dataset.zip").exists()
    assert not (dest / ".electricity_hourly_dataset.zip.sgem-complete").exists()
    zipped.write_bytes(b"PK not a zip")
    with pytest.raises(ValueError, match="not a readable zip"):
        dl.download_dataset("electricity_hourly", dest, mirror=monash_mirror, progress=False)


def test_cli_download_monash(monash_mirror, tmp_path, capsys):
    dest = tmp_path / "data"
    assert main(["download", "monash", str(dest), "--mirror", str(monash_mirror), "--quiet"]) == 0
    assert capsys.readouterr().out.count("ready:") == 4
