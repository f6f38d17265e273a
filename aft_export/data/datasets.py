"""Labelled image sources: ImageFolder directories and tars, and named data sets
(``cifar10:train`` / ``cifar10:test``), decoded with :mod:`aft_export.data.images`.

Resolution order for CIFAR-10:

1. ``$AFT_CIFAR10_DIR/{train,test}.tar`` (ImageFolder JPEG tars, as this project's
   development data is shipped), then ``../shared/data/cifar10`` beside a checkout of
   aft-export: the one the package runs from (an editable install), and the one the
   current directory is in (a wheel used inside a clone);
2. the official *binary* release in the cache (``$AFT_CACHE_DIR`` or
   ``~/.cache/aft-export``), downloaded once and checked against its published
   md5. The binary release is raw bytes: nothing is unpickled (the "python" release
   is a pickle and is never used).

When none of them has it, :class:`DataNotFound` says every place that was tried.
Artifacts name their data with :func:`data_label`: a named set by its name, never an
absolute path of the machine that wrote them.

The binary release holds the original pixels; the JPEG tars were re-encoded, so
accuracies differ slightly between the two (the zoo cards report the JPEG tars).
"""

from __future__ import annotations

import dataclasses
import os
import tarfile
import tempfile
import urllib.request
from pathlib import Path

import numpy as np

from aft_export.data.images import (IMAGE_EXTENSIONS, LabelledImages, iter_folder, load_image, square_crop, tar_images,
                              subset_indices)  # fmt: skip
from aft_export.errors import AFTExportError
from aft_export.fileio import cache_root, file_digest, relative_name

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
CIFAR10_MD5 = "c32a1d4ab5d03f1284b67883e8d87530"
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
_RECORD = 1 + 32 * 32 * 3
_BATCHES = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}


def cache_dir() -> Path:
    return cache_root()


class DataNotFound(AFTExportError):
    """A named data set is nowhere: ``tried`` lists each place looked at, with why it did not do."""

    def __init__(self, source: str, tried: list[str]) -> None:
        self.source, self.tried = source, tried
        archive = CIFAR10_URL.rsplit("/", 1)[1]
        super().__init__(f"{source} was not found: {'; '.join(tried)}; set AFT_CIFAR10_DIR to a folder "
                         f"holding train.tar and test.tar (ImageFolder tars), or put {archive} in {cache_dir()}")


def _is_checkout(folder: Path) -> bool:
    """A source checkout of aft-export: its pyproject.toml names the project, the package beside it."""
    try:
        text = (folder / "pyproject.toml").read_text(errors="replace")
    except OSError:
        return False
    return (folder / "aft_export").is_dir() and '\nname = "aft-export"' in text


def checkouts() -> list[Path]:
    """The aft-export checkouts whose ``../shared`` may hold data: the one this package runs
    from (an editable install), then the one the current directory is in (a wheel used inside
    a clone; only a folder that is a checkout of this project, so a stray ``../shared`` elsewhere
    is never read)."""
    found = [p for p in (Path(__file__).resolve().parents[2],) if _is_checkout(p)]
    try:
        here = Path.cwd().resolve()
    except OSError:  # the current directory was removed
        return found
    found += [next((p for p in (here, *here.parents) if _is_checkout(p)), None)]
    return list(dict.fromkeys(p for p in found if p is not None))


def local_dirs() -> list[Path]:
    """Where local CIFAR-10 tars are looked for: $AFT_CIFAR10_DIR, then
    ``../shared/data/cifar10`` beside a checkout (the project's CI layout; :func:`checkouts`)."""
    dirs = [Path(os.environ["AFT_CIFAR10_DIR"])] if os.environ.get("AFT_CIFAR10_DIR") else []
    return list(dict.fromkeys(dirs + [root.parent / "shared" / "data" / "cifar10" for root in checkouts()]))


def is_named(source: str | os.PathLike) -> bool:
    return str(source).startswith("cifar10:")


def resolve(source: str) -> str | LabelledImages:
    """``cifar10:SPLIT`` -> a local tar path, or decoded images from the binary release;
    :class:`DataNotFound`, naming every place tried, where there is neither."""
    name, _, split = str(source).partition(":")
    if name != "cifar10" or split not in _BATCHES:
        raise AFTExportError(f"unknown data set {source!r}; use cifar10:train or cifar10:test")
    for folder in local_dirs():
        if (folder / f"{split}.tar").is_file():
            return str(folder / f"{split}.tar")
    archive = cache_dir() / "cifar-10-binary.tar.gz"
    if not archive.is_file():
        try:
            download(CIFAR10_URL, archive, CIFAR10_MD5)
        except DownloadFailed as exc:
            tried = _tried(split, f"the download into {archive.parent} failed ({exc.reason})")
            raise DataNotFound(source, tried) from None
    return read_cifar10_binary(archive, split)


def named_set_at(path: str | os.PathLike) -> str | None:
    """The named set whose local tar ``path`` is, if any (``cifar10:test`` for ``$AFT_CIFAR10_DIR/test.tar``)."""
    folders = local_dirs()
    for split in _BATCHES:
        for folder in folders:
            try:
                if (folder / f"{split}.tar").is_file() and os.path.samefile(folder / f"{split}.tar", path):
                    return f"cifar10:{split}"
            except OSError:
                continue
    return None


def data_label(source: str | os.PathLike, beside: str | os.PathLike) -> str:
    """How an artifact names the data it came from: a named set by its name; a path where a
    named set resolves to by that name; any other path relative to ``beside`` (the folder of the
    artifact that names it, so the two can travel together), or by its file name alone where
    they share no folder but the root (a relative path would spell the machine's folders out)."""
    text = str(source)
    if is_named(text):
        return text
    return (named_set_at(text) if os.path.exists(text) else None) or relative_name(text, beside)


# the labelled data a command verifies with where none is given and the checkpoint names none
DEFAULT_DATA = "cifar10:test"


def recorded_test_data(meta) -> str | None:
    """The labelled data a checkpoint names (its test set first, then its training data), where it
    can be had here: a data set by name (``cifar10:test``), a path relative to the checkpoint
    (as ``aft-export train`` records one), or an absolute path (older checkpoints) that exists.
    ``meta``: the checkpoint's :class:`~aft_export.models.checkpoint.CheckpointMeta` (its
    ``provenance`` and ``path``)."""
    prov = getattr(meta, "provenance", None) or {}
    recorded_in = [prov.get("metrics"), prov.get("train_config")]  # a checkpoint's provenance is free-form
    candidates = [d.get("test_data") for d in recorded_in if isinstance(d, dict)] + [prov.get("data")]
    for recorded in (c for c in candidates if isinstance(c, str) and c):
        if is_named(recorded):
            return str(recorded)
        beside = Path(getattr(meta, "path", None) or ".").parent
        path = Path(recorded) if Path(recorded).is_absolute() else beside / recorded
        if path.exists():
            return str(path)
    return None


def verification_data(given: str | os.PathLike | None, meta=None) -> tuple[str, str]:
    """The one rule for which labelled data a command verifies with (export's verification,
    parity, eval, the pipeline, bench's deploy table): ``given`` where given; else the test data
    the checkpoint ``meta`` names (:func:`recorded_test_data`); else :data:`DEFAULT_DATA`.
    Returns the source and where it came from: ``given``, ``checkpoint`` or ``default``. A named
    set stays its name (artifacts record it so: :func:`data_label`)."""
    if given is not None and str(given) != "":
        return str(given), "given"
    recorded = recorded_test_data(meta) if meta is not None else None
    return (recorded, "checkpoint") if recorded else (DEFAULT_DATA, "default")


def _tried(split: str, download: str) -> list[str]:
    env = os.environ.get("AFT_CIFAR10_DIR")
    tried = [] if env else ["$AFT_CIFAR10_DIR is unset"]
    tried += [f"no {split}.tar in {folder}" for folder in local_dirs()]
    if not checkouts():
        tried.append("no aft-export checkout here to have ../shared/data/cifar10 beside it")
    return tried + [download]


class DownloadFailed(AFTExportError):
    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


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
            reason = f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
            raise DownloadFailed(f"cannot download {url} ({exc}); put the archive at {dest} or set "
                                 f"AFT_CIFAR10_DIR", reason) from None
        got = file_digest(tmp, "md5")
        if got != md5:
            raise DownloadFailed(f"download of {url} is corrupt: md5 {got}, expected {md5}; try again",
                                 reason=f"md5 {got}, expected {md5}")  # fmt: skip
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)


def read_cifar10_binary(archive: Path, split: str) -> LabelledImages:
    """Decode the binary release: records of 1 label byte + 3072 bytes (R, G, B planes)."""
    if file_digest(archive, "md5") != CIFAR10_MD5:
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


def load_labelled(source: str | os.PathLike, size: int, limit: int | None = None, resize=None) -> LabelledImages:
    """Decode an ImageFolder directory or tar (``<class>/<image>`` inside) to memory.

    Classes are the folder names in sorted order, as torchvision's ImageFolder does.
    ``limit`` keeps a fixed pseudo-random subset of that many images (quick tests).
    ``cifar10:train`` / ``cifar10:test`` name the data set (see :mod:`aft_export.data.datasets`).
    ``resize``: how each decoded image becomes ``size x size`` (default: aft-export's preprocessing,
    :func:`~aft_export.data.images.square_crop`; :func:`~aft_export.data.images.stretched`: nvinfer's).
    """
    if limit is not None and limit < 1:
        raise AFTExportError(f"an image limit must be >= 1, got {limit}; leave it out to use every image")
    name = str(source) if is_named(source) else None  # what the decoded set is called: a named set by its name
    if name is not None:
        resolved = resolve(name)
        if isinstance(resolved, LabelledImages):
            return dataclasses.replace(_subset_resized(resolved, size, limit, resize), source=name)
        source = resolved
    path = Path(source)
    if not path.exists():
        raise AFTExportError(f"data source {path} does not exist; {SOURCES}")
    if path.is_dir():
        items = list(iter_folder(path))
        classes_all = None
        if limit is not None and limit < len(items):
            classes_all = sorted({cls for cls, _, _ in items})
            items = [items[i] for i in subset_indices(len(items), limit)]
    elif _is_tar(path):
        items, classes_all = tar_images(path, limit)  # only the subset's images are read
    else:
        raise AFTExportError(f"{path} is neither an ImageFolder directory nor a tar file; {SOURCES}")
    images, names = [], []
    for cls, label, blob in items:
        images.append(load_image(blob, size, name=label, resize=resize))
        names.append(cls)
    if not images:
        raise AFTExportError(
            f"no images found in {path}; expected <class>/<image> with one of {IMAGE_EXTENSIONS}"
        )
    classes = classes_all or sorted(set(names))
    index = {c: i for i, c in enumerate(classes)}
    labels = np.array([index[c] for c in names], dtype=np.int64)
    return LabelledImages(np.stack(images), labels, classes, name or str(path))


SOURCES = "give an ImageFolder directory (<class>/<image>), a tar of one, or cifar10:train / cifar10:test"


def _is_tar(path: Path) -> bool:
    try:
        return path.is_file() and tarfile.is_tarfile(path)
    except OSError:
        return False


def _subset_resized(data: LabelledImages, size: int, limit: int | None, resize=None) -> LabelledImages:
    data = data.subset(limit)
    images, labels = data.images, data.labels
    if images.shape[1:3] != (size, size) or resize is not None:
        from PIL import Image

        images = np.stack([(resize or square_crop)(Image.fromarray(im), size) for im in images])
    return LabelledImages(images, labels, data.classes, data.source)
