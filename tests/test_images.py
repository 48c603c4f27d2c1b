"""Image data layer: readers of the original formats, mixtures, embeddings, image tasks."""

from __future__ import annotations

import gzip
import importlib.util
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat

from sgem.data import ClusteredTask
from sgem.data.clustering import assign_to_centroids
from sgem.data.embeddings import (
    ArrayEmbedding,
    EmbeddingUnavailableError,
    HandcraftedEmbedding,
    PretrainedEmbedding,
    get_embedding,
    pretrained_available,
)
from sgem.data.images import (
    OFFLINE_IMAGE_DIR,
    build_image_mixture,
    harmonise_images,
    load_source,
    make_image_task,
    make_offline_mixture_task,
    read_cifar_pickle,
    read_idx,
    read_mnist,
    read_npz,
    read_svhn_mat,
)

OFFLINE = Path(OFFLINE_IMAGE_DIR)
needs_offline = pytest.mark.requires_shared_data("images")


def rand_images(n, h=32, w=32, c=3, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(n, h, w, c), dtype=np.uint8)


# --------------------------------------------------------------------------- file writers


def write_cifar100(root: Path, split: str, x: np.ndarray, fine: np.ndarray) -> Path:
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True, exist_ok=True)
    d = {
        b"filenames": [f"img{i}.png".encode() for i in range(len(x))],
        b"batch_label": b"training batch 1 of 1",
        b"fine_labels": [int(v) for v in fine],
        b"coarse_labels": [int(v) // 5 for v in fine],
        b"data": x.transpose(0, 3, 1, 2).reshape(len(x), -1),  # CHW rows, like the original
    }
    path = folder / split
    with open(path, "wb") as f:
        pickle.dump(d, f, protocol=2)
    return path


def idx_bytes(array: np.ndarray, magic: int | None = None) -> bytes:
    if magic is None:
        magic = 0x0800 + array.ndim
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", s) for s in array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_mnist(root: Path, prefix: str, x: np.ndarray, y: np.ndarray, gz: bool) -> tuple:
    paths = []
    for stem, arr in ((f"{prefix}-images-idx3-ubyte", x), (f"{prefix}-labels-idx1-ubyte", y)):
        data = idx_bytes(arr)
        path = root / (stem + (".gz" if gz else ""))
        path.write_bytes(gzip.compress(data) if gz else data)
        paths.append(path)
    return tuple(paths)


# --------------------------------------------------------------------------- readers


def test_cifar100_pickle_round_trip(tmp_path):
    x = rand_images(7, seed=1)
    fine = np.array([0, 99, 5, 42, 42, 1, 3])
    path = write_cifar100(tmp_path, "train", x, fine)
    xr, yr = read_cifar_pickle(path)
    assert xr.dtype == np.uint8 and xr.shape == (7, 32, 32, 3)
    assert yr.dtype == np.int64
    np.testing.assert_array_equal(xr, x)
    np.testing.assert_array_equal(yr, fine)  # fine labels, not coarse
    # the CHW layout: row r, column c of channel k is data[k*1024 + r*32 + c]
    with open(path, "rb") as f:
        raw = pickle.load(f, encoding="bytes")[b"data"]
    assert xr[3, 5, 17, 2] == raw[3, 2 * 1024 + 5 * 32 + 17]
    write_cifar100(tmp_path, "test", x[:2], fine[:2])
    xt, _ = load_source("cifar100", tmp_path, split="test")
    np.testing.assert_array_equal(xt, x[:2])
    # the extracted folder itself is accepted too
    xs, _ = load_source("cifar100", tmp_path / "cifar-100-python", split="train")
    np.testing.assert_array_equal(xs, x)


def test_cifar10_batches(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    xs = [rand_images(3, seed=i) for i in range(6)]
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for i, (name, x) in enumerate(zip(names, xs, strict=True)):
        d = {b"data": x.transpose(0, 3, 1, 2).reshape(3, -1), b"labels": [i, i, 9]}
        with open(folder / name, "wb") as f:
            pickle.dump(d, f)
    x, y = load_source("cifar10", tmp_path, "train")
    np.testing.assert_array_equal(x, np.concatenate(xs[:5]))
    assert y.tolist() == [0, 0, 9, 1, 1, 9, 2, 2, 9, 3, 3, 9, 4, 4, 9]
    x, y = load_source("cifar10", tmp_path, "test")
    np.testing.assert_array_equal(x, xs[5])


def test_svhn_mat_round_trip(tmp_path):
    x = rand_images(6, seed=2)
    y = np.array([[1], [10], [3], [10], [9], [5]], dtype=np.uint8)  # 10 means digit 0
    savemat(tmp_path / "train_32x32.mat", {"X": x.transpose(1, 2, 3, 0), "y": y})
    xr, yr = read_svhn_mat(tmp_path / "train_32x32.mat")
    np.testing.assert_array_equal(xr, x)
    assert yr.dtype == np.int64 and yr.tolist() == [1, 0, 3, 0, 9, 5]
    xs, ys = load_source("svhn", tmp_path, "train")
    np.testing.assert_array_equal(xs, x)
    np.testing.assert_array_equal(ys, yr)


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_idx_round_trip(tmp_path, gz):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    y = np.array([7, 2, 1, 0, 4], dtype=np.uint8)
    images, labels = write_mnist(tmp_path, "train", x, y, gz=gz)
    xr, yr = read_mnist(images, labels)
    assert xr.shape == (5, 28, 28, 1) and xr.dtype == np.uint8
    np.testing.assert_array_equal(xr[..., 0], x)
    assert yr.dtype == np.int64 and yr.tolist() == [7, 2, 1, 0, 4]
    xs, ys = load_source("mnist", tmp_path, "train")
    np.testing.assert_array_equal(xs, xr)
    np.testing.assert_array_equal(ys, yr)


def test_idx_errors(tmp_path):
    x = np.zeros((4, 28, 28), dtype=np.uint8)
    y = np.arange(4, dtype=np.uint8)
    images, labels = write_mnist(tmp_path, "t10k", x, y, gz=False)
    # swapped files: the magic numbers say which is which
    with pytest.raises(ValueError, match=r"magic number 2049, expected 2051"):
        read_mnist(labels, images)
    # truncated raw file
    cut = tmp_path / "cut-images-idx3-ubyte"
    cut.write_bytes(images.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"truncated.*shape \(4, 28, 28\)"):
        read_idx(cut, 2051)
    cut.write_bytes(images.read_bytes()[:10])
    with pytest.raises(ValueError, match=r"truncated"):
        read_idx(cut, 2051)
    # truncated gzip
    gz = tmp_path / "cut-images-idx3-ubyte.gz"
    gz.write_bytes(gzip.compress(images.read_bytes())[:-30])
    with pytest.raises(ValueError, match=r"truncated gzip"):
        read_idx(gz, 2051)
    # trailing garbage
    long = tmp_path / "long-images-idx3-ubyte"
    long.write_bytes(images.read_bytes() + b"\x00" * 7)
    with pytest.raises(ValueError, match=r"7 unexpected trailing bytes"):
        read_idx(long, 2051)
    # not an IDX file at all
    bad = tmp_path / "bad"
    bad.write_bytes(b"hello world, not idx")
    with pytest.raises(ValueError, match=r"magic number"):
        read_idx(bad, 2051)
    # images and labels that do not match
    _, short_labels = write_mnist(tmp_path, "train", x, y[:3], gz=True)
    with pytest.raises(ValueError, match=r"4 images .* 3 labels"):
        read_mnist(images, short_labels)


def test_npz_round_trip(tmp_path):
    x = rand_images(4, 20, 24, 1, seed=4)[..., 0]  # (N, H, W): grey without channel axis
    y = np.array([3, 1, 2, 0], dtype=np.int32)
    np.savez(tmp_path / "mine_train.npz", x=x, y=y, class_names=np.array(list("abcd")))
    xr, yr = read_npz(tmp_path / "mine_train.npz")
    assert xr.shape == (4, 20, 24, 1)
    np.testing.assert_array_equal(xr[..., 0], x)
    assert yr.dtype == np.int64 and yr.tolist() == [3, 1, 2, 0]
    xs, _ = load_source("npz:mine_{split}.npz", tmp_path, split="train")
    np.testing.assert_array_equal(xs, xr)
    xa, _ = load_source(f"npz:{tmp_path / 'mine_train.npz'}", "/nonexistent")
    np.testing.assert_array_equal(xa, xr)

    np.savez(tmp_path / "float.npz", x=x.astype(np.float32) / 255, y=y)
    with pytest.raises(ValueError, match=r"'x' must be uint8"):
        read_npz(tmp_path / "float.npz")
    np.savez(tmp_path / "keys.npz", images=x, labels=y)
    with pytest.raises(ValueError, match=r"needs arrays 'x' \(images\) and 'y'.*images"):
        read_npz(tmp_path / "keys.npz")
    np.savez(tmp_path / "obj.npz", x=x, y=np.array([1, "a", None, 2], dtype=object))
    with pytest.raises(ValueError, match=r"not a readable \.npz"):
        read_npz(tmp_path / "obj.npz")


@pytest.mark.parametrize(
    "name, split, expected, publisher",
    [
        ("cifar100", "train", "cifar-100-python/train", "www.cs.toronto.edu/~kriz/cifar.html"),
        ("cifar10", "test", "cifar-10-batches-py/test_batch", "www.cs.toronto.edu/~kriz/cifar"),
        ("svhn", "test", "test_32x32.mat", "ufldl.stanford.edu/housenumbers"),
        ("mnist", "train", "train-images-idx3-ubyte.gz", "yann.lecun.com/exdb/mnist"),
    ],
)
def test_missing_file_names_path_and_publisher(tmp_path, name, split, expected, publisher):
    with pytest.raises(FileNotFoundError) as info:
        load_source(name, tmp_path, split=split)
    msg = str(info.value)
    assert str(tmp_path / expected) in msg
    assert publisher in msg
    assert f"sgem download {name}" in msg


def test_missing_npz_and_bad_names(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"mine\.npz"):
        load_source("npz:mine.npz", tmp_path)
    for reader in (read_npz, read_svhn_mat, read_cifar_pickle, read_idx):
        with pytest.raises(FileNotFoundError):
            reader(tmp_path / "nothing")
    with pytest.raises(ValueError, match=r"unknown image source 'imagenet'"):
        load_source("imagenet", tmp_path)
    with pytest.raises(ValueError, match=r"split must be one of"):
        load_source("cifar100", tmp_path, split="valid")


# --------------------------------------------------------------------------- offline files


@pytest.fixture(scope="module")
def offline_sources():
    cifar = load_source("npz:cifar10_subset_train.npz", OFFLINE)
    mnist = load_source("mnist", OFFLINE, split="test")
    return cifar, mnist


@needs_offline
def test_real_offline_files(offline_sources):
    (cx, cy), (mx, my) = offline_sources
    assert cx.shape == (15000, 32, 32, 3) and cx.dtype == np.uint8
    assert cy.dtype == np.int64 and cy.min() == 0 and cy.max() == 9
    assert np.bincount(cy).tolist() == [1500] * 10
    xt, yt = load_source("npz:cifar10_subset_{split}.npz", OFFLINE, split="test")
    assert xt.shape == (5000, 32, 32, 3) and np.bincount(yt).tolist() == [500] * 10
    assert mx.shape == (10000, 28, 28, 1) and mx.dtype == np.uint8
    assert my.dtype == np.int64 and set(np.unique(my).tolist()) == set(range(10))
    assert my[:5].tolist() == [7, 2, 1, 0, 4]  # the well-known start of the MNIST test set
    assert mx.max() == 255 and (mx == 0).mean() > 0.7  # white digits on black
    # only the test part of MNIST is offline
    with pytest.raises(FileNotFoundError, match=r"train-images-idx3-ubyte"):
        load_source("mnist", OFFLINE, split="train")


# --------------------------------------------------------------------------- harmonising


def test_harmonise_pads_grey_to_colour():
    x = rand_images(3, 28, 28, 1, seed=5)
    out = harmonise_images(x, size=(32, 32), channels=3)
    assert out.shape == (3, 32, 32, 3) and out.dtype == np.uint8
    np.testing.assert_array_equal(out[:, 2:30, 2:30, 0], x[..., 0])
    assert (out[:, :2] == 0).all() and (out[:, 30:] == 0).all()
    assert (out[:, :, :2] == 0).all() and (out[:, :, 30:] == 0).all()
    assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()


def test_harmonise_resize_and_grey():
    x = np.full((2, 64, 48, 3), 77, dtype=np.uint8)
    out = harmonise_images(x, size=(32, 32), channels=3)
    assert out.shape == (2, 32, 32, 3) and (out == 77).all()
    up = harmonise_images(x[:, :16, :16], size=(32, 32), method="resize")
    assert up.shape == (2, 32, 32, 3) and (up == 77).all()
    grey = harmonise_images(np.full((1, 4, 4, 3), [255, 0, 0], np.uint8), (4, 4), channels=1)
    assert grey.shape == (1, 4, 4, 1) and (grey == 76).all()  # 0.299 * 255


# --------------------------------------------------------------------------- mixtures


def test_mixture_label_shift_and_source_ids():
    big = (rand_images(50, seed=6), np.arange(50) % 100, 100)  # "CIFAR-100": 100 classes
    digits = (rand_images(40, 28, 28, 1, seed=7), np.arange(40) % 10)  # "SVHN/MNIST": 10
    mix = build_image_mixture([big, digits], counts=[30, 20], seed=0, names=("c100", "d"))
    assert mix.n_classes == 110 and mix.class_offsets == (0, 100)
    assert mix.x.shape == (50, 32, 32, 3) and mix.x.dtype == np.uint8
    assert mix.source.tolist() == [0] * 30 + [1] * 20
    np.testing.assert_array_equal(mix.y[:30], big[1][mix.index[0]])
    np.testing.assert_array_equal(mix.y[30:], digits[1][mix.index[1]] + 100)
    assert mix.y[30:].min() >= 100 and mix.y.max() < 110
    # the pixels are the drawn images, padded
    np.testing.assert_array_equal(mix.x[30:, 2:30, 2:30, 1], digits[0][mix.index[1], ..., 0])
    np.testing.assert_array_equal(mix.x[:30], big[0][mix.index[0]])
    # reproducible
    again = build_image_mixture([big, digits], counts=[30, 20], seed=0)
    np.testing.assert_array_equal(again.x, mix.x)


def test_mixture_counts_and_proportions():
    a = (rand_images(100, 8, 8, seed=8), np.arange(100) % 10)
    b = (rand_images(30, 8, 8, seed=9), np.arange(30) % 10)
    mix = build_image_mixture([a, b], proportions=[0.5, 0.5], seed=1)
    assert np.bincount(mix.source).tolist() == [30, 30]  # largest pool without repeats
    mix = build_image_mixture([a, b], proportions=[3, 1], total=40, seed=1)
    assert np.bincount(mix.source).tolist() == [30, 10]
    mix = build_image_mixture([a, b], seed=1)  # everything
    assert np.bincount(mix.source).tolist() == [100, 30] and mix.n_classes == 20
    with pytest.raises(ValueError, match=r"has 30 images, cannot draw 31"):
        build_image_mixture([a, b], counts=[10, 31])
    with pytest.raises(ValueError, match=r"labels reach 9 but n_classes is 5"):
        build_image_mixture([(a[0], a[1], 5), b])


# --------------------------------------------------------------------------- embeddings


def test_handcrafted_embedding_deterministic():
    x = rand_images(40, seed=10)
    z1 = HandcraftedEmbedding(seed=3).fit_transform(x)
    z2 = HandcraftedEmbedding(seed=3).fit(x).transform(x)
    assert z1.shape == (40, 32) and np.isfinite(z1).all()
    np.testing.assert_array_equal(z1, z2)
    z3 = HandcraftedEmbedding(seed=4).fit_transform(x)
    assert not np.allclose(z1, z3)
    grey = HandcraftedEmbedding(n_components=8).fit_transform(rand_images(10, 28, 28, 1))
    assert grey.shape == (10, 8)
    with pytest.raises(ValueError, match=r"must be uint8"):
        HandcraftedEmbedding().fit(x.astype(np.float32))
    with pytest.raises(RuntimeError, match=r"call fit"):
        HandcraftedEmbedding().transform(x)


@pytest.mark.parametrize("library", ["timm", "torchvision"])
def test_pretrained_reports_not_available(library, tmp_path):
    installed = importlib.util.find_spec(library) is not None
    weights = tmp_path / "missing.pth" if installed else None
    ok, reason = pretrained_available(library, "resnet18", weights)
    assert not ok
    assert "not available" in reason
    assert ("does not exist" if installed else f"{library} is not installed") in reason
    with pytest.raises(EmbeddingUnavailableError, match=r"not available"):
        PretrainedEmbedding(library, "resnet18", weights=weights)
    if not installed:
        with pytest.raises(EmbeddingUnavailableError, match=r"embeddings='default'"):
            get_embedding(f"{library}:resnet18")
        with pytest.raises(EmbeddingUnavailableError):
            make_image_task(rand_images(20), np.arange(20) % 2, embeddings=f"{library}:x")


def test_get_embedding_specs():
    assert isinstance(get_embedding("default"), HandcraftedEmbedding)
    assert isinstance(get_embedding(np.zeros((3, 2))), ArrayEmbedding)
    with pytest.raises(ValueError, match=r"unknown embedding 'clip'"):
        get_embedding("clip")


# --------------------------------------------------------------------------- tasks


class SpyEmbedding:
    """Colour statistics; remembers what it was fitted on."""

    name = "spy"

    def fit(self, images):
        self.fitted_on = images.copy()
        return self

    def transform(self, images):
        f = images.astype(np.float64) / 255
        return np.concatenate([f.mean((1, 2)), f.std((1, 2))], axis=1)


def test_clustering_is_fitted_on_train_only():
    rng = np.random.default_rng(11)
    x = rand_images(90, 8, 8, seed=11)
    x[:30] //= 4  # three brightness groups
    x[30:60] = x[30:60] // 2 + 64
    y = rng.integers(0, 3, size=90)
    spy = SpyEmbedding()
    task = make_image_task(x, y, np.repeat([0, 1, 2], 30), spy, n_clusters=3, seed=0)
    assert task.train.x.shape == (62, 3, 8, 8) and len(task.val) == len(task.test) == 14
    back = {
        s: np.rint(getattr(task, s).x * 255).astype(np.uint8).transpose(0, 2, 3, 1)
        for s in ("train", "val", "test")
    }
    # fit saw exactly the training images
    assert spy.fitted_on.shape == back["train"].shape
    key = lambda a: sorted(row.tobytes() for row in a)  # noqa: E731
    assert key(spy.fitted_on) == key(back["train"])
    # centroids are a k-means fixed point of the training embeddings alone
    z_train = spy.transform(back["train"])
    for m in range(3):
        np.testing.assert_allclose(task.centroids[m], z_train[task.train.cluster == m].mean(0))
    for s in ("val", "test"):
        expected = assign_to_centroids(spy.transform(back[s]), task.centroids)
        np.testing.assert_array_equal(getattr(task, s).cluster, expected)


def test_image_task_with_own_array_and_standardise():
    n = 60
    source = np.arange(n) % 2
    emb = np.random.default_rng(12).normal(size=(n, 4)) * 0.1 + source[:, None] * 5
    task = make_image_task(
        rand_images(n, 8, 8, seed=12),
        np.arange(n) % 4,
        source,
        embeddings=emb,
        n_clusters=4,
        normalise="standardise",
    )
    assert isinstance(task, ClusteredTask) and task.n_classes == 4
    assert task.meta["mean_purity"] == 1.0 and task.meta["embedding"] == "array(dim=4)"
    np.testing.assert_allclose(task.train.x.mean(axis=(0, 2, 3)), 0.0, atol=1e-5)
    with pytest.raises(ValueError, match=r"60 images"):
        make_image_task(rand_images(60, 8, 8), np.zeros(60, int), embeddings=emb[:50])
    with pytest.raises(ValueError, match=r"split must be three positive fractions"):
        make_image_task(rand_images(60, 8, 8), np.zeros(60, int), split=(0.8, 0.2, 0.0))
    with pytest.raises(ValueError, match=r"x must be uint8 images"):
        make_image_task(np.zeros((60, 8, 8, 3)), np.zeros(60, int))


def test_cluster_without_validation_images_is_merged():
    """Two training-only images far from everything form their own k-means cluster; with no
    validation image it has no surrogate target, so it is merged into the nearest cluster."""
    n, seed = 80, 3
    perm = np.random.default_rng(seed).permutation(n)  # the task's own split permutation
    n_val = n_test = round(0.15 * n)
    train_idx = perm[: n - n_val - n_test]
    emb = np.random.default_rng(0).normal(size=(n, 3)) * 0.1 + (np.arange(n) % 3)[:, None] * 4
    emb[train_idx[:2]] = 100.0  # a remote pair, both in the training split
    task = make_image_task(
        rand_images(n, 8, 8, seed=1), np.arange(n) % 2, embeddings=emb, n_clusters=4, seed=seed
    )
    assert task.n_clusters == 3 and task.meta["merged_clusters"] == 1
    assert task.meta["n_clusters_requested"] == 4
    assert (np.bincount(task.val.cluster, minlength=3) > 0).all()
    assert len(task.centroids) == 3


@needs_offline
def test_offline_mixture_task_small():
    task = make_offline_mixture_task(n_per_source=600, n_clusters=10, seed=0)
    assert task.name == "cifar10+mnist" and task.loss == "cross_entropy"
    assert task.n_classes == 20 and task.n_clusters == 10
    assert len(task.train) + len(task.val) + len(task.test) == 1200
    assert task.train.x.shape[1:] == (3, 32, 32) and task.train.x.dtype == np.float32
    assert task.train.x.min() >= 0.0 and task.train.x.max() <= 1.0
    assert (task.cluster_sizes > 0).all() and (task.val_cluster_sizes > 0).all()
    # MNIST (source 1) labels are shifted to 10..19
    for s in (task.train, task.val, task.test):
        assert (s.y[s.source == 1] >= 10).all() and (s.y[s.source == 0] < 10).all()
    assert task.meta["mean_purity"] >= 0.95  # measured 0.998-1.0 over seeds 0..7
    assert min(task.meta["purity_per_cluster"]) >= 0.9
    assert task.meta["val_mean_purity"] >= 0.95 and task.meta["test_mean_purity"] >= 0.95
    assert sorted(set(task.oracle_partition.tolist())) == [0, 1]
    assert task.meta["source_names"] == ["cifar10", "mnist"]
    assert task.centroids.shape == (10, task.meta["embedding_dim"])
