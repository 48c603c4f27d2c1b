"""Read a user's images: an ImageFolder tree, an NPZ, or a folder of images to predict on.

* `read_image_folder`: torchvision's ImageFolder layout, one sub-folder per class (its name
  the class name, classes sorted by name), images anywhere below it. Every image is read with
  Pillow and converted to RGB; images of another size than the target size are resized.
* `read_image_npz`: arrays `x` uint8 (N, H, W) or (N, H, W, C) and `y` (N,), loaded without
  pickle; an optional string array `class_names`.
* `read_images_for_predict`: every image below a folder (flat, or class folders), or a single
  image file, with the file names, for prediction.

Every problem the user can fix raises `sgem.errors.SgemUserError` naming the file or folder.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..errors import SgemUserError
from .npz import read_xy_npz

log = logging.getLogger(__name__)

#: a training folder's unreadable images are left out, with a warning, where they are at most
#: this share of its images (one corrupt download among thousands need not stop a fit); more
#: are refused, naming them: then the folder, not a file, is likely at fault
MAX_UNREADABLE_SHARE = 0.1
#: the image suffixes read (torchvision's IMG_EXTENSIONS), case-insensitive
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


@dataclass(eq=False)
class ImageData:
    """Labelled images.

    Attributes:
        x: uint8 (N, H, W, C) images (C = 3 from a folder; as stored, 1 or 3, from an NPZ).
        y: int64 (N,) class codes into `class_names`.
        class_names: the class of each code (a folder's sub-folder names, sorted).
        files: each image's path relative to the folder read (None for an NPZ).
        n_resized: how many images were resized to the common size.
    """

    x: np.ndarray
    y: np.ndarray
    class_names: list[str]
    files: list[str] | None = None
    n_resized: int = 0

    def __len__(self) -> int:
        return len(self.x)


def _size(image_size: int | tuple[int, int] | None) -> tuple[int, int] | None:
    """`image_size` as (height, width)."""
    if image_size is None:
        return None
    if isinstance(image_size, int | np.integer):
        size = (int(image_size), int(image_size))
    else:
        size = tuple(int(s) for s in image_size)
    if len(size) != 2 or min(size) < 1:
        raise SgemUserError(f"image_size={image_size!r}: give a positive int or (height, width)")
    return size  # type: ignore[return-value]


def _is_image(path: Path) -> bool:
    return (
        path.is_file() and not path.name.startswith(".") and path.suffix.lower() in IMAGE_SUFFIXES
    )


def _images_below(folder: Path) -> list[Path]:
    return sorted(
        (p for p in folder.rglob("*") if _is_image(p) and not _hidden(p.relative_to(folder))),
        key=lambda p: p.relative_to(folder).as_posix(),
    )


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _unreadable(path: Path, exc: Exception) -> SgemUserError:
    return SgemUserError(f"{path}: not a readable image ({exc}); replace or delete the file")


_IMAGE_ERRORS = (
    UnidentifiedImageError,
    OSError,
    ValueError,
    SyntaxError,
    Image.DecompressionBombError,
)


def _size_of(path: Path) -> tuple[int, int]:
    """(height, width) from the image's header, without decoding it."""
    try:
        with Image.open(path) as image:
            return image.height, image.width
    except _IMAGE_ERRORS as exc:
        raise _unreadable(path, exc) from exc


def _load(path: Path) -> Image.Image:
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except _IMAGE_ERRORS as exc:
        raise _unreadable(path, exc) from exc


def _stack(
    paths: list[Path],
    image_size: int | tuple[int, int] | None,
    where: Path,
    skip_unreadable: bool = False,
) -> tuple[np.ndarray, int, np.ndarray]:
    """Read `paths` as RGB and stack them at one size: `image_size`, else the most common;
    with `skip_unreadable`, those that do not read are left out (`_left_out`). Returns the
    images, how many were resized, and which of `paths` they are (a bool mask).

    Two passes: the sizes from the headers first, then each image decoded straight into the
    output array (never all decoded images in memory at once)."""
    bad: list[tuple[Path, SgemUserError]] = []
    keep = np.ones(len(paths), dtype=bool)

    def read(i: int, reader):
        try:
            return reader(paths[i])
        except SgemUserError as exc:
            if not skip_unreadable:
                raise
            keep[i] = False
            bad.append((paths[i], exc))
            return None

    sizes = [s for s in (read(i, _size_of) for i in range(len(paths))) if s]
    if not sizes:  # (every one unreadable: refused)
        _left_out(bad, len(paths), where)
    size = _size(image_size) or Counter(sizes).most_common(1)[0][0]
    height, width = size
    out = np.empty((len(paths), height, width, 3), dtype=np.uint8)
    resized = 0
    for i in range(len(paths)):
        image = read(i, _load) if keep[i] else None
        if image is None:
            continue
        if (image.height, image.width) != (height, width):
            image = image.resize((width, height), Image.Resampling.BILINEAR)
            resized += 1
        out[i] = np.asarray(image, dtype=np.uint8)
    if bad:
        _left_out(bad, len(paths), where)
        out = out[keep]
    if resized:
        log.warning(
            "%s: resized %d of %d images to %dx%d (height x width)%s",
            where,
            resized,
            len(paths),
            height,
            width,
            "" if image_size is not None else ", the most common size",
        )
    return out, resized, keep


def _left_out(bad: list[tuple[Path, SgemUserError]], n: int, where: Path) -> None:
    """Warn of a training folder's unreadable images (each with its error); refuse them
    where they are more than `MAX_UNREADABLE_SHARE` of its `n` images."""
    named = "; ".join(str(path) for path, _ in bad[:5])
    more = ", ..." if len(bad) > 5 else ""
    if len(bad) > MAX_UNREADABLE_SHARE * n:
        if len(bad) == 1:
            raise bad[0][1]
        raise SgemUserError(
            f"{where}: {len(bad)} of {n} images are not readable ({named}{more}; e.g. {bad[0][1]})"
        )
    log.warning("%s: left out %d unreadable of %d images: %s%s", where, len(bad), n, named, more)


def _folder(path: str | os.PathLike) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise SgemUserError(f"{path}: no such folder; check the path")
    if not path.is_dir():
        raise SgemUserError(f"{path} is not a folder; give the folder holding the images")
    return path


def read_image_folder(
    path: str | os.PathLike, image_size: int | tuple[int, int] | None = None
) -> ImageData:
    """Read an ImageFolder tree: ``path/<class name>/**/<image>``.

    Classes are the sub-folders (hidden ones skipped), sorted by name; files that are not
    images (by suffix, see `IMAGE_SUFFIXES`) are skipped. Images are converted to RGB and
    resized (bilinear) to `image_size` (an int or (height, width)), or when None to the most
    common size, logging how many were resized. Unreadable images are left out with a
    warning (more than `MAX_UNREADABLE_SHARE` of them: refused); a folder without class
    sub-folders, a class folder without (readable) images or fewer than two classes raise
    `SgemUserError`.
    """
    root = _folder(path)
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        loose = [p.name for p in root.iterdir() if _is_image(p)]
        layout = "root/<class name>/<image files>"
        if loose:
            raise SgemUserError(
                f"{root} holds {len(loose)} images but no class folders; training needs one "
                f"sub-folder per class ({layout})"
            )
        raise SgemUserError(f"{root} is empty; put one sub-folder per class in it ({layout})")
    paths: list[Path] = []
    labels: list[int] = []
    empty: list[str] = []
    for code, name in enumerate(classes):
        found = _images_below(root / name)
        if not found:
            empty.append(name)
        paths.extend(found)
        labels.extend([code] * len(found))
    if empty:
        raise SgemUserError(
            f"{root}: class folders {empty} hold no images ({', '.join(IMAGE_SUFFIXES)}); "
            "put images in them or remove them"
        )
    if len(classes) < 2:
        raise SgemUserError(
            f"{root} has a single class folder {classes[0]!r}; a classifier needs at least two"
        )
    x, resized, keep = _stack(paths, image_size, root, skip_unreadable=True)
    y = np.asarray(labels, dtype=np.int64)[keep]
    if lost := [name for code, name in enumerate(classes) if code not in set(y.tolist())]:
        raise SgemUserError(f"{root}: class folders {lost} hold no readable image")
    files = [p.relative_to(root).as_posix() for p, k in zip(paths, keep, strict=True) if k]
    return ImageData(x, y, classes, files, resized)


def read_image_npz(path: str | os.PathLike) -> ImageData:
    """Read arrays `x` uint8 (N, H, W) or (N, H, W, C) with C in 1, 3 and `y` (N,) from an
    `.npz` (no pickle). (N, H, W) gains a channel axis. Labels are re-coded 0..K-1 over their
    sorted distinct values, unless the file holds `class_names` (K strings) and `y` already
    codes into them."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise SgemUserError(f"{path}: no such file; check the path")
    arrays = read_xy_npz(path, "images", "labels", "np.savez(path, x=images, y=labels)")
    x, y = arrays["x"], arrays["y"]
    if x.dtype != np.uint8:
        raise SgemUserError(
            f"{path}: x has dtype {x.dtype}; expected uint8 pixels 0..255 (for floats in [0, 1]: "
            "(x * 255).round().astype(np.uint8))"
        )
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.shape[-1] not in (1, 3):
        raise SgemUserError(f"{path}: x has shape {x.shape}; expected (N, H, W) or (N, H, W, 1|3)")
    if y.ndim != 1 or len(y) != len(x) or len(x) == 0:
        raise SgemUserError(
            f"{path}: x holds {len(x)} images and y has shape {y.shape}; expected (N,)"
        )
    names = arrays.get("class_names")
    if (
        names is not None
        and np.issubdtype(y.dtype, np.integer)
        and names.ndim == 1
        and len(y)
        and y.min() >= 0
        and y.max() < len(names)
    ):
        return ImageData(x, y.astype(np.int64), [str(n) for n in names])
    classes, codes = np.unique(y, return_inverse=True)
    return ImageData(x, codes.astype(np.int64), [str(c.item()) for c in classes])


def read_images_for_predict(
    path: str | os.PathLike, image_size: int | tuple[int, int] | None = None
) -> tuple[np.ndarray, list[str]]:
    """Every image below `path` (a flat folder or class folders, recursively; or one image
    file) as uint8 (N, H, W, 3) RGB at `image_size` (or the most common size), with each
    image's path relative to `path` (the file name itself for a single file), sorted."""
    path = Path(path).expanduser()
    if path.is_file():
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            raise SgemUserError(f"{path}: not an image file ({', '.join(IMAGE_SUFFIXES)})")
        x, _, _ = _stack([path], image_size, path)
        return x, [path.name]
    root = _folder(path)
    paths = _images_below(root)
    if not paths:
        raise SgemUserError(f"{root} holds no images ({', '.join(IMAGE_SUFFIXES)})")
    x, _, _ = _stack(paths, image_size, root)
    return x, [p.relative_to(root).as_posix() for p in paths]


__all__ = [
    "IMAGE_SUFFIXES",
    "ImageData",
    "read_image_folder",
    "read_image_npz",
    "read_images_for_predict",
]
