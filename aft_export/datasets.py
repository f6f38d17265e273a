"""Labelled image sources: ImageFolder directories and tars, and named data sets
(``cifar10:train`` / ``cifar10:test``), decoded with :mod:`aft_export.data`.

Resolution order for CIFAR-10:

1. ``$AFT_CIFAR10_DIR/{train,test}.tar`` (ImageFolder JPEG tars, as this project's
   development data is shipped), then ``../shared/data/cifar10`` beside a checkout;
2. the official *binary* release in the cache (``$AFT_CACHE_DIR`` or
   ``~/.cache/aft-export``), downloaded once and checked against its published
   md5. The binary release is raw bytes: nothing is unpickled (the "python" release
   is a pickle and is never used).

The binary release holds the original pixels; the JPEG tars were re-encoded, so
accuracies differ slightly between the two (the zoo cards report the JPEG tars).
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
import urllib.request
from pathlib import Path

import numpy as np

from aft_export.data import (IMAGE_EXTENSIONS, LabelledImages, iter_folder, iter_tar, load_image, square_crop,
                              subset_indices)  # fmt: skip
from aft_export.errors import AFTExportError
from aft_export.fileio import cache_root

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
CIFAR10_MD5 = "c32a1d4ab5d03f1284b67883e8d87530"
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
_RECORD = 1 + 32 * 32 * 3
_BATCHES = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}


def cache_dir() -> Path:
    return cache_root()


def local_dirs() -> list[Path]:
    """Where local CIFAR-10 tars are looked for: $AFT_CIFAR10_DIR, then
    ``../shared/data/cifar10`` beside a source checkout (the project's CI layout)."""
    dirs = [Path(os.environ["AFT_CIFAR10_DIR"])] if os.environ.get("AFT_CIFAR10_DIR") else []
    return dirs + [Path(__file__).resolve().parents[2] / "shared" / "data" / "cifar10"]


def is_named(source: str | os.PathLike) -> bool:
    return str(source).startswith("cifar10:")


def resolve(source: str) -> str | LabelledImages:
    """``cifar10:SPLIT`` -> a local tar path, or decoded images from the binary release."""
    name, _, split = str(source).partition(":")
    if name != "cifar10" or split not in _BATCHES:
        raise AFTExportError(f"unknown data set {source!r}; use cifar10:train or cifar10:test")
    for folder in local_dirs():
        if (folder / f"{split}.tar").is_file():
            return str(folder / f"{split}.tar")
    archive = cache_dir() / "cifar-10-binary.tar.gz"
    if not archive.is_file():
        download(CIFAR10_URL, archive, CIFAR10_MD5)
    return read_cifar10_binary(archive, split)


def md5_file(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(url: str, dest: Path, md5: str) -> None:
    """Download to a temporary name, check the md5, then rename: never a partial file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    try:
        try:
            with urllib.request.urlopen(url, timeout=60) as resp, open(tmp, "wb") as out:
                while chunk := resp.read(1 << 20):
                    out.write(chunk)
        except OSError as exc:
            raise AFTExportError(
                f"cannot download {url} ({exc}); put the archive at {dest} or set AFT_CIFAR10_DIR"
            ) from None
        got = md5_file(Path(tmp))
        if got != md5:
            raise AFTExportError(f"download of {url} is corrupt: md5 {got}, expected {md5}; try again")
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)


def read_cifar10_binary(archive: Path, split: str) -> LabelledImages:
    """Decode the binary release: records of 1 label byte + 3072 bytes (R, G, B planes)."""
    if md5_file(archive) != CIFAR10_MD5:
        raise AFTExportError(f"{archive} does not match the CIFAR-10 binary md5; delete it and retry")
    return _decode_batches(archive, split)


def _decode_batches(archive: Path, split: str) -> LabelledImages:
    images, labels = [], []
    try:
        with tarfile.open(archive) as tar:
            members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            for name in _BATCHES[split]:
                if name not in members:
                    raise AFTExportError(f"{archive} has no {name}")
                raw = np.frombuffer(tar.extractfile(members[name]).read(), dtype=np.uint8)
                if raw.size % _RECORD:
                    raise AFTExportError(f"{name} in {archive} is truncated")
                records = raw.reshape(-1, _RECORD)
                labels.append(records[:, 0].astype(np.int64))
                images.append(records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    except (tarfile.TarError, OSError) as exc:
        raise AFTExportError(f"cannot read {archive}: {exc}") from None
    return LabelledImages(np.ascontiguousarray(np.concatenate(images)), np.concatenate(labels),
                          list(CIFAR10_CLASSES), f"cifar10:{split} ({archive})")  # fmt: skip


def load_labelled(source: str | os.PathLike, size: int, limit: int | None = None) -> LabelledImages:
    """Decode an ImageFolder directory or tar (``<class>/<image>`` inside) to memory.

    Classes are the folder names in sorted order, as torchvision's ImageFolder does.
    ``limit`` keeps a fixed pseudo-random subset of that many images (quick tests).
    ``cifar10:train`` / ``cifar10:test`` name the data set (see :mod:`aft_export.datasets`).
    """
    if limit is not None and limit < 1:
        raise AFTExportError(f"an image limit must be >= 1, got {limit}; leave it out to use every image")
    if is_named(source):
        resolved = resolve(str(source))
        if isinstance(resolved, LabelledImages):
            return _subset_resized(resolved, size, limit)
        source = resolved
    path = Path(source)
    if not path.exists():
        raise AFTExportError(f"data source {path} does not exist; {SOURCES}")
    if path.is_dir():
        items = iter_folder(path)
    elif _is_tar(path):
        items = iter_tar(path)
    else:
        raise AFTExportError(f"{path} is neither an ImageFolder directory nor a tar file; {SOURCES}")

    items = list(items)
    if limit is not None and limit < len(items):
        keep = subset_indices(len(items), limit)
        classes_all = sorted({cls for cls, _, _ in items})
        items = [items[i] for i in keep]
    else:
        classes_all = None
    images, names = [], []
    for cls, label, blob in items:
        images.append(load_image(blob, size, name=label))
        names.append(cls)
    if not images:
        raise AFTExportError(
            f"no images found in {path}; expected <class>/<image> with one of {IMAGE_EXTENSIONS}"
        )
    classes = classes_all or sorted(set(names))
    index = {c: i for i, c in enumerate(classes)}
    labels = np.array([index[c] for c in names], dtype=np.int64)
    return LabelledImages(np.stack(images), labels, classes, str(path))


SOURCES = "give an ImageFolder directory (<class>/<image>), a tar of one, or cifar10:train / cifar10:test"


def _is_tar(path: Path) -> bool:
    try:
        return path.is_file() and tarfile.is_tarfile(path)
    except OSError:
        return False


def _subset_resized(data: LabelledImages, size: int, limit: int | None) -> LabelledImages:
    data = data.subset(limit)
    images, labels = data.images, data.labels
    if images.shape[1:3] != (size, size):
        from PIL import Image

        images = np.stack([square_crop(Image.fromarray(im), size) for im in images])
    return LabelledImages(images, labels, data.classes, data.source)
