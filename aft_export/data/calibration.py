"""Calibration data: real images, preprocessed exactly as in evaluation, sampled with a seed.

Sources: an ImageFolder directory or a directory of images without labels (any
image files below it), a tar of images, ``cifar10:train``/``cifar10:test``, or
tensors in ``.npy``/``.npz`` (uint8 ``(N, H, W, 3)`` images, preprocessed here, or
float32 ``(N, 3, H, W)`` tensors taken as already preprocessed).

Preprocessing is :func:`aft_export.data.images.load_image` (decode, RGB, resize the short
side, centre crop) then :func:`aft_export.data.images.normalize`: the evaluation transform
of training, with size, mean and std read from the ONNX file's metadata.

The set used for a run is identified by its count, seed and the sha256 of the
preprocessed tensors; that hash keys the calibration cache.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aft_export.data import datasets
from aft_export.data.formats import FORMATS
from aft_export.data.images import (IMAGE_EXTENSIONS, MAX_IMAGE_BYTES, TAR_ERRORS, Preprocessing,
                                    decode_pixels, model_input, read_image_file, square_crop, tar_error,
                                    tar_files)  # fmt: skip
from aft_export.errors import AFTExportError, Named, said



@dataclass
class CalibrationSet:
    tensors: np.ndarray  # what the model takes: (N, 3, H, W) float32 preprocessed, or a pixel file's pixels
    source: str
    requested: int
    seed: int
    preprocess: Preprocessing

    def __len__(self) -> int:
        return len(self.tensors)

    @functools.cached_property
    def sha256(self) -> str:  # once: the tensors are hashed in place, never copied
        h = hashlib.sha256(str(self.tensors.shape).encode())
        h.update(np.ascontiguousarray(self.tensors, dtype=np.float32).data)
        return h.hexdigest()

    def record(self) -> dict:
        return {"source": self.source, "count": len(self), "requested": self.requested, "seed": self.seed,
                "sha256": self.sha256, "preprocess": self.preprocess.record()}  # fmt: skip


class CalibrationReader:
    """A rewindable reader speaking ``dict[str, np.ndarray]`` (ONNX Runtime's
    ``CalibrationDataReader`` protocol: ``get_next`` returns None when done). The
    quantiser's calibration passes read the images through it
    (:func:`aft_export.quantization.runs.stream`, which sets ``batch_size`` between calls)."""

    def __init__(self, tensors: np.ndarray, input_name: str = "image", batch_size: int = 32) -> None:
        if batch_size < 1:
            raise AFTExportError(f"calibration batch size must be >= 1, got {batch_size}")
        self.tensors, self.input_name, self.batch_size = tensors, input_name, batch_size
        self._pos = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self._pos >= len(self.tensors):
            return None
        batch = self.tensors[self._pos : self._pos + self.batch_size]
        self._pos += self.batch_size
        return {self.input_name: batch}

    def rewind(self) -> None:
        self._pos = 0

    def __iter__(self):
        self.rewind()
        while (item := self.get_next()) is not None:
            yield item

    def __len__(self) -> int:
        return -(-len(self.tensors) // self.batch_size)

    def set_range(self, start_index: int, end_index: int) -> None:  # ORT's strided calibration
        self.tensors = self.tensors[start_index:end_index]
        self.rewind()


def _sample(n: int, count: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded sample of ``count`` out of ``n`` (all if fewer)."""
    if count >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).permutation(n)[:count])


def _check_count(have: int, count: int, source: str, allow_fewer: bool) -> int:
    if have == 0:
        raise AFTExportError(f"calibration source {source} holds no images (looked for {', '.join(IMAGE_EXTENSIONS)}); "
                             f"give a folder or tar of images, or .npy/.npz arrays")  # fmt: skip
    if have < count and not allow_fewer:
        raise AFTExportError(said("calibration source {source} has {have} images but {count} were asked for; give "
                                  "{fewer} or {allow_fewer} to use what there is", "quantize", source=source,
                                  have=have, count=count, fewer=Named("images", have)))  # fmt: skip
    return min(have, count)


def _decode(items, prep: Preprocessing, progress: bool) -> np.ndarray:
    """items: (label, loader) pairs; loader() -> bytes or path. Returns what the model takes: float32
    NCHW normalised, or a pixel file's pixels (``prep.input_format``)."""
    from tqdm import tqdm

    shown = tqdm(items, desc="calibration images", disable=not progress, file=sys.stderr, mininterval=1.0)
    pixels = decode_pixels(((label, loader()) for label, loader in shown), prep.size)
    return model_input(pixels, prep.mean, prep.std, prep.input_format)


def _from_array(arr: np.ndarray, path: str, prep: Preprocessing) -> np.ndarray:
    if 0 in arr.shape:  # no image in it, or images of no pixels
        raise AFTExportError(f"{path}: the array of shape {tuple(arr.shape)} holds no pixels (a dimension is 0); give "
                             f"uint8 (N, H, W, 3) images or normalised float (N, 3, H, W) ones, N > 0")  # fmt: skip
    if arr.dtype == np.uint8 and arr.ndim == 4 and arr.shape[-1] == 3:
        if arr.shape[1:3] != (prep.size, prep.size):
            from PIL import Image

            arr = np.stack([square_crop(Image.fromarray(a), prep.size) for a in arr])
        return model_input(arr, prep.mean, prep.std, prep.input_format)
    if arr.dtype in (np.float32, np.float64) and arr.ndim == 4 and arr.shape[1] == 3:
        if FORMATS[prep.input_format].pixels:  # a float array is taken as normalised: not what this file takes
            raise AFTExportError(f"{path}: float arrays are taken as normalised images (x / 255 - mean) / std, but "
                                 f"the model takes raw {prep.input_format} pixels; give images, or uint8 (N, H, W, 3) "
                                 f"pixel arrays")  # fmt: skip
        if arr.shape[2:] != (prep.size, prep.size):
            raise AFTExportError(
                f"{path}: preprocessed tensors are {arr.shape[2]}x{arr.shape[3]}, the model takes "
                f"{prep.size}x{prep.size}"
            )
        if not np.isfinite(arr).all():
            raise AFTExportError(f"{path}: tensors contain NaN or Inf; calibrate on finite, preprocessed images")
        return arr.astype(np.float32)
    raise AFTExportError(
        f"{path}: array of {arr.dtype} {arr.shape} is neither uint8 images (N, H, W, 3) nor "
        f"preprocessed float32 tensors (N, 3, H, W); save one of those"
    )


def load_calibration(source: str | os.PathLike, prep: Preprocessing, count: int = 512, seed: int = 0,
                     allow_fewer: bool = False, progress: bool = True) -> CalibrationSet:  # fmt: skip
    """Sample ``count`` images from ``source`` with ``seed`` and preprocess them."""
    if count < 1:
        raise AFTExportError(said("calibration image count must be >= 1, got {count}; e.g. {eg}", "quantize",
                                  count=count, eg=Named("images", 512)))  # fmt: skip
    label = str(source)
    if datasets.is_named(label):
        resolved = datasets.resolve(label)
        if not isinstance(resolved, (str, os.PathLike)):  # decoded arrays (binary release)
            n = _check_count(len(resolved.images), count, label, allow_fewer)
            idx = _sample(len(resolved.images), n, seed)
            tensors = _from_array(resolved.images[idx], label, prep)
            return CalibrationSet(tensors, label, count, seed, prep)
        source = resolved
    path = Path(source)
    if not path.exists():
        raise AFTExportError(f"calibration source {path} does not exist; give a folder or tar of images, "
                             f".npy/.npz arrays, cifar10:train or a recipe (calibration/cifar10.json)")  # fmt: skip
    if path.suffix.lower() in (".npy", ".npz"):
        try:
            if path.stat().st_size == 0:
                raise ValueError("the file is empty")
            loaded = np.load(path, allow_pickle=False)
            if isinstance(loaded, np.lib.npyio.NpzFile):
                keys = list(loaded.keys())
                key = "images" if "images" in keys else (keys[0] if len(keys) == 1 else None)
                if key is None:
                    raise AFTExportError(f"{path} holds arrays {keys}; name the calibration one 'images'")
                loaded = loaded[key]
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise AFTExportError(f"cannot read {path} ({exc}); save it with numpy.save or numpy.savez") from None
        if not isinstance(loaded, np.ndarray) or loaded.ndim == 0:
            raise AFTExportError(f"{path} holds no array of images; save uint8 (N, H, W, 3) images with numpy.save")
        n = _check_count(len(loaded), count, label, allow_fewer)
        return CalibrationSet(_from_array(loaded[_sample(len(loaded), n, seed)], label, prep), label,
                              count, seed, prep)  # fmt: skip
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
        n = _check_count(len(files), count, label, allow_fewer)
        items = [(str(files[i]), (lambda f=files[i]: read_image_file(f))) for i in _sample(len(files), n, seed)]
        return CalibrationSet(_decode(items, prep, progress), label, count, seed, prep)
    if path.is_file() and _is_tar(path):
        try:
            with tarfile.open(path) as tar:
                members = [m for m in tar_files(tar, path) if Path(m.name).suffix.lower() in IMAGE_EXTENSIONS]
                n = _check_count(len(members), count, label, allow_fewer)
                chosen = [members[i] for i in _sample(len(members), n, seed)]
                items = [(f"{path}:{m.name}", (lambda m=m: _member(tar, m, path))) for m in chosen]
                tensors = _decode(items, prep, progress)
        except TAR_ERRORS as exc:
            raise tar_error(path, exc) from None
        return CalibrationSet(tensors, label, count, seed, prep)
    raise AFTExportError(
        f"calibration source {path} is not a directory of images, a tar, .npy/.npz or cifar10:SPLIT; give one of those"
    )


def _is_tar(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def _member(tar, member, path) -> bytes:
    if member.size > MAX_IMAGE_BYTES:
        raise AFTExportError(f"{path}:{member.name} is {member.size / 2**20:.0f} MB, more than aft-export reads "
                             f"({MAX_IMAGE_BYTES // 2**20} MB); resize it first")  # fmt: skip
    return tar.extractfile(member).read()
