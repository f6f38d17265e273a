"""Labelled image sets: an ImageFolder directory or a tar of one, decoded to memory.

CIFAR-sized sets fit in memory as uint8 (50,000 x 32 x 32 x 3 is 150 MB), so we
decode once and do augmentation on batched tensors; no per-image Python work in
the training loop. The evaluation transform (:func:`load_image`) is the single
definition of preprocessing: training, evaluation and calibration all use it.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aft_export.errors import AFTExportError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".tif", ".tiff")
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


@dataclass
class LabelledImages:
    """Decoded images (N, H, W, 3) uint8, labels (N,) int64, class names by index."""

    images: np.ndarray
    labels: np.ndarray
    classes: list[str]
    source: str

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, limit: int | None) -> LabelledImages:
        """A fixed pseudo-random subset of ``limit`` images, in their original order (the
        same choice :func:`aft_export.datasets.load_labelled` makes with ``limit``)."""
        if limit is None or limit >= len(self):
            return self
        keep = subset_indices(len(self), limit)
        return LabelledImages(self.images[keep], self.labels[keep], self.classes, self.source)


def subset_indices(n: int, limit: int) -> np.ndarray:
    return np.sort(np.random.default_rng(0).permutation(n)[:limit])


def load_image(data: bytes | str | os.PathLike, size: int, name: str = "") -> np.ndarray:
    """Decode one image to RGB uint8 (size, size, 3).

    Resize so the shorter side is ``size`` (bicubic), then centre-crop; images that
    are already ``size x size`` are untouched. Grayscale, palette, RGBA and CMYK are
    converted to RGB; 16-bit and float images are refused.
    """
    from PIL import Image, UnidentifiedImageError

    label = name or str(data)
    try:
        img = Image.open(io.BytesIO(data) if isinstance(data, bytes) else data)
        img.load()
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise AFTExportError(f"cannot read image {label}: {exc}") from None
    if img.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        raise AFTExportError(
            f"image {label} has {img.mode} pixels (16-bit or float); convert it to 8-bit RGB"
        )
    if img.mode != "RGB":
        if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
            bg = Image.new("RGB", img.size, (0, 0, 0))
            bg.paste(img.convert("RGBA"), mask=img.convert("RGBA").getchannel("A"))
            img = bg
        else:
            img = img.convert("RGB")
    return square_crop(img, size)


def square_crop(img, size: int) -> np.ndarray:
    """Resize an RGB PIL image so the shorter side is ``size`` (bicubic), centre-crop it."""
    from PIL import Image

    if img.size != (size, size):
        w, h = img.size
        scale = size / min(w, h)
        nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
        img = img.resize((nw, nh), Image.BICUBIC)
        left, top = (nw - size) // 2, (nh - size) // 2
        img = img.crop((left, top, left + size, top + size))
    return np.asarray(img, dtype=np.uint8)


def iter_folder(root: Path) -> Iterator[tuple[str, str, bytes]]:
    for cls_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(cls_dir.iterdir()):
            if f.suffix.lower() in IMAGE_EXTENSIONS:
                yield cls_dir.name, str(f), f.read_bytes()


def iter_tar(path: Path) -> Iterator[tuple[str, str, bytes]]:
    try:
        tar = tarfile.open(path)
    except (tarfile.TarError, OSError) as exc:
        raise AFTExportError(f"cannot open tar {path}: {exc}") from None
    with tar:
        members = [
            m for m in tar.getmembers()
            if m.isfile() and Path(m.name).suffix.lower() in IMAGE_EXTENSIONS
        ]  # fmt: skip
        for m in sorted(members, key=lambda m: m.name):
            parts = Path(m.name).parts
            if len(parts) < 2:
                raise AFTExportError(
                    f"{path}: {m.name} is not inside a class folder (expected <class>/<image>)"
                )
            fh = tar.extractfile(m)
            if fh is None:
                continue
            yield parts[-2], f"{path}:{m.name}", fh.read()


def normalize(images, mean, std):
    """uint8 (N, H, W, 3) array or tensor -> float32 NCHW tensor, ``(x / 255 - mean) / std``."""
    import torch

    x = torch.as_tensor(images).permute(0, 3, 1, 2).float().div_(255.0)
    m = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)
    return (x - m) / s
