"""Labelled image sets: an ImageFolder directory or a tar of one, decoded to memory.

CIFAR-sized sets fit in memory as uint8 (50,000 x 32 x 32 x 3 is 150 MB), so we
decode once and do augmentation on batched tensors; no per-image Python work in
the training loop. The evaluation transform (:func:`load_image`) is the single
definition of preprocessing: training, evaluation and calibration all use it.
"""

from __future__ import annotations

import io
import math
import os
import tarfile
import threading
import warnings
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aft_export import readers
from aft_export.data.formats import (FLOAT_NCHW, FORMATS, INPUT_FORMATS, LOGITS, NORMALIZED,  # noqa: F401
                                     OUTPUT_FORMATS, PIXEL_FORMATS, PROBABILITIES, UINT8_NHWC, normalize_array,
                                     takes_pixels)
from aft_export.errors import AFTExportError, Named, said

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".tif", ".tiff")
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
IMAGENET = "0.485,0.456,0.406 and 0.229,0.224,0.225"  # mean and std, for messages
# The cost of an image is bounded before it is decoded: its header says its size, and an
# image of more pixels than this is refused (64 Mpx, 192 MB decoded: a 50-megapixel camera
# photo passes; a 69-byte PNG claiming 20000 x 20000 does not), or of more than 1024 times
# the model's input where that is larger (inputs above 256 x 256). A file larger than
# MAX_IMAGE_BYTES is refused before it is read. Resizing never builds more than
# MAX_RESIZE_FACTOR times the model's input (see square_crop).
MAX_IMAGE_PIXELS = 64 * 2**20
INPUT_PIXEL_FACTOR = 1024
MAX_RESIZE_FACTOR = 64
MAX_IMAGE_BYTES = 256 * 2**20
# what a damaged or truncated tar raises while it is read
TAR_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error)
# What a model file takes and gives (its ``input_format`` and ``output_format``): the table of
# aft_export.data.formats


@dataclass(frozen=True)
class Preprocessing:
    """How an image becomes a model input, the one preprocessing type: RGB, square
    ``input_size``, ``(x / 255 - mean) / std``; and, where known, the class names. A model
    trained elsewhere, or an ONNX file another tool wrote, says it with options or a file
    (:mod:`aft_export.data.preprocess`), a checkpoint carries it (``ModelMeta.preprocessing``), an
    ONNX file's metadata holds it (:meth:`from_metadata`); calibration decodes with it."""

    input_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    classes: tuple[str, ...] | None = None  # None: numbered by output index once the width is known
    # what the model is fed (INPUT_FORMATS): images normalised by the above, or a pixel file's raw pixels
    input_format: str = NORMALIZED
    # what a user's description of another tool's file says it takes (None: unsaid); the graph decides
    # input_format, and a stated one it contradicts is an error (aft_export.artifacts.ends)
    stated_format: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.input_size, int) or isinstance(self.input_size, bool) or not (
                1 <= self.input_size <= readers.MAX_SIDE):  # fmt: skip
            raise AFTExportError(said("{input_size} must be a whole number of pixels from 1 to {MAX_SIDE}, got "
                                      "{input_size_got!r}", None, MAX_SIDE=readers.MAX_SIDE,
                                      input_size_got=self.input_size))  # fmt: skip
        for option in ("mean", "std"):
            value = getattr(self, option)
            if len(value) != 3 or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in value):
                raise AFTExportError(said("{option} takes three numbers (R, G, B of x / 255, finite), got "
                                          "{value!r}; e.g. {value2}", None, option=Named(option),
                                          value=list(value),
                                          value2=IMAGENET.split(' and ')[0 if option == 'mean' else 1]))  # fmt: skip
        if any(s <= 0 for s in self.std):
            raise AFTExportError(said("{std} must be positive, got {value}; give three numbers > 0", None,
                                      value=list(self.std)))
        if self.classes is not None:
            if not self.classes or not all(isinstance(c, str) and c for c in self.classes):
                raise AFTExportError("class names must be non-empty strings")
            dup = sorted({c for c in self.classes if self.classes.count(c) > 1})
            if dup:
                raise AFTExportError(f"class names repeat: {dup[:5]}")

    def class_names(self, num_classes: int, origin: str = "") -> list[str]:
        """The names by output index, checked against the model's output width; ``origin``:
        where the names came from (a preprocessing file), for the message."""
        if self.classes is None:
            return [str(i) for i in range(num_classes)]
        if len(self.classes) != num_classes:
            fix = (f"give one name per output in {origin}" if origin else
                   said("give one name per output ({classes}: a file, one name per line)", None))  # fmt: skip
            raise AFTExportError(f"{len(self.classes)} class names for a model with {num_classes} outputs; " + fix)
        return list(self.classes)

    @property
    def size(self) -> int:
        return self.input_size

    @classmethod
    def from_metadata(cls, meta: dict[str, str], size: int | None = None, mean=None, std=None,
                      path: str = "the model") -> Preprocessing:  # fmt: skip
        """From aft-export ONNX metadata; explicit values override it and stand in for a
        model exported by another tool. Each metadata value is read by :mod:`aft_export.readers`
        (bounded, typed) and a malformed one is named by its key."""
        where, fix = f"{path}'s metadata", "export it again with `aft-export export`"
        if size is None and "input_size" in meta:
            dims = readers.wholes(readers.parse_json(meta["input_size"], where, "input_size", fix), where,
                                  "input_size", 1, readers.MAX_SIDE, fix=fix)  # fmt: skip
            size = dims[-1]
        if mean is None and "mean" in meta:
            mean = readers.numbers(readers.parse_json(meta["mean"], where, "mean", fix), where, "mean", 3, fix=fix)
        if std is None and "std" in meta:
            std = readers.numbers(readers.parse_json(meta["std"], where, "std", fix), where, "std", 3, True, fix)
        missing = [said("{option}", None, option=Named(option)) for option, v in (("input_size", size), ("mean", mean), ("std", std)) if v is None]
        if missing:
            raise AFTExportError(
                f"{path} does not say how to preprocess images (no aft-export metadata); "
                f"give {', '.join(missing)}"
            )
        try:
            mean, std = tuple(float(v) for v in mean), tuple(float(v) for v in std)
        except (TypeError, ValueError):
            raise AFTExportError(said("{path} has malformed preprocessing metadata (mean {mean_got!r}, std "
                                      "{std_got!r}); give {mean} and {std}", None, path=path, mean_got=mean,
                                      std_got=std)) from None  # fmt: skip
        finite = all(math.isfinite(v) for v in mean + std)
        if (len(mean) != 3 or len(std) != 3 or not finite or min(std) <= 0 or not isinstance(size, int)
                or not 1 <= size <= readers.MAX_SIDE):  # fmt: skip
            raise AFTExportError(said("bad preprocessing for {path}: input size {size}, mean {mean_got}, std "
                                      "{std_got}; give {input_size} from 1 to {MAX_SIDE} and three finite numbers "
                                      "each for {mean} and {std} (std > 0)", None, path=path, size=size,
                                      mean_got=mean, std_got=std, MAX_SIDE=readers.MAX_SIDE))  # fmt: skip
        return cls(int(size), mean, std)  # what the file takes is its graph's (aft_export.artifacts.ends)

    def record(self) -> dict:
        pixels = {"input_format": self.input_format} if takes_pixels(self.input_format) else {}
        return {"size": self.size, "mean": list(self.mean), "std": list(self.std), **pixels}


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
        same choice :func:`aft_export.data.datasets.load_labelled` makes with ``limit``)."""
        if limit is None or limit >= len(self):
            return self
        keep = subset_indices(len(self), limit)
        return LabelledImages(self.images[keep], self.labels[keep], self.classes, self.source)


def subset_indices(n: int, limit: int) -> np.ndarray:
    return np.sort(np.random.default_rng(0).permutation(n)[:limit])


def max_image_pixels(size: int) -> int:
    """The most pixels an image may have to be decoded for a model of ``size x size`` input."""
    return max(MAX_IMAGE_PIXELS, INPUT_PIXEL_FACTOR * size * size)


def load_image(data: bytes | str | os.PathLike, size: int, name: str = "", resize=None) -> np.ndarray:
    """Decode one image to RGB uint8 (size, size, 3).

    Resize so the shorter side is ``size`` (bicubic), then centre-crop (:func:`square_crop`, or ``resize``:
    another way to make the decoded PIL image ``size x size``, :func:`stretched`); images that
    are already ``size x size`` are untouched. Grayscale, palette, RGBA and CMYK are
    converted to RGB; 16-bit and float images are refused, and so is an image whose
    pixel count is absurd for the model (:func:`max_image_pixels`), from its header,
    before it is decoded.
    """
    from PIL import Image, UnidentifiedImageError

    label = name or str(data)
    if not isinstance(data, bytes):
        data = read_image_file(Path(data))
    try:
        with warnings.catch_warnings():  # PIL's own bomb warning: the limit below comes first
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
        w, h = img.size
        if w * h > max_image_pixels(size):
            raise AFTExportError(
                f"image {label} is {w}x{h} ({w * h / 1e6:.0f} Mpx), more pixels than aft-export decodes for a "
                f"{size}x{size} model ({max_image_pixels(size) / 2**20:.0f} Mpx); resize it first"
            )
        img.load()
    except Image.DecompressionBombError:
        raise AFTExportError(f"image {label} claims more pixels than aft-export decodes for a {size}x{size} "
                             f"model ({max_image_pixels(size) / 2**20:.0f} Mpx); resize it first") from None  # fmt: skip
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        why = str(exc).replace("<_io.BytesIO object", "<data").split(" at 0x")[0]
        raise AFTExportError(f"cannot read image {label} ({why}); replace or remove it") from None
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
    return (resize or square_crop)(img, size)


def square_crop(img, size: int) -> np.ndarray:
    """Resize an RGB PIL image so the shorter side is ``size`` (bicubic), centre-crop it.

    An image whose resized whole would hold more than MAX_RESIZE_FACTOR times the crop
    (an aspect ratio above 64: a 1 x 100000 strip would be 32 x 3,200,000) has its crop
    resampled straight from the source pixels instead (PIL's ``box``: the same filter at
    the same positions, without the whole; PIL may then run its two passes in the other
    order, so a pixel can differ by a few levels of rounding)."""
    from PIL import Image

    if img.size != (size, size):
        w, h = img.size
        scale = size / min(w, h)
        nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
        left, top = (nw - size) // 2, (nh - size) // 2
        if nw * nh <= MAX_RESIZE_FACTOR * size * size:
            img = img.resize((nw, nh), Image.BICUBIC).crop((left, top, left + size, top + size))
        else:
            sx, sy = w / nw, h / nh  # source pixels per resized pixel
            box = (left * sx, top * sy, (left + size) * sx, (top + size) * sy)
            img = img.resize((size, size), Image.BICUBIC, box=box)
    return np.asarray(img, dtype=np.uint8)


def stretched(filter_name: str, first: int | None = None):
    """A ``resize`` for :func:`load_image` that does what DeepStream's nvinfer does to a frame or an object: the
    whole image stretched to ``size x size`` (no crop, the aspect ratio not kept) with PIL's ``filter_name``
    (NEAREST, BILINEAR, BICUBIC, BOX, LANCZOS); ``first``: the image resized to that square first (bicubic), as a
    camera sees an object larger than the network's input."""
    from PIL import Image

    resample = getattr(Image.Resampling, filter_name)

    def stretch(img, size: int) -> np.ndarray:
        if first is not None:
            img = img.resize((first, first), Image.Resampling.BICUBIC)
        return np.asarray(img.resize((size, size), resample), dtype=np.uint8)

    return stretch


def cropped(first: int | None = None):
    """:func:`square_crop` as a ``resize`` for :func:`load_image`, the image first resized to ``first x first``
    (bicubic) where given, as :func:`stretched` does."""
    from PIL import Image

    def crop(img, size: int) -> np.ndarray:
        return square_crop(img.resize((first, first), Image.Resampling.BICUBIC) if first is not None else img, size)

    return crop


def read_image_file(path: Path) -> bytes:
    """An image file's bytes, refused before reading when it is larger than MAX_IMAGE_BYTES."""
    try:
        if path.stat().st_size > MAX_IMAGE_BYTES:
            raise AFTExportError(f"image {path} is {path.stat().st_size / 2**20:.0f} MB, more than aft-export reads "
                                 f"({MAX_IMAGE_BYTES // 2**20} MB); resize it first")  # fmt: skip
        return path.read_bytes()
    except OSError as exc:
        raise AFTExportError(f"cannot read image {path} ({exc.strerror or exc}); check it exists and is a "
                             f"readable file") from None  # fmt: skip


def tar_error(path, exc: BaseException) -> AFTExportError:
    return AFTExportError(f"cannot read tar {path} ({str(exc) or type(exc).__name__}): it is damaged or truncated; "
                          f"re-download or re-create it")  # fmt: skip


def iter_folder(root: Path) -> Iterator[tuple[str, str, bytes]]:
    for cls_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(cls_dir.iterdir()):
            if f.suffix.lower() in IMAGE_EXTENSIONS and f.is_file():
                yield cls_dir.name, str(f), read_image_file(f)


# A tar's index (its members' headers) is read in pure Python: ~0.7 s for CIFAR-10's 50,000-image
# train.tar, paid by every calibration and every decode of it. The index of a tar as it is on disk
# (device, inode, size, modification time) is kept for the process, for a few tars of at most
# TAR_INDEX_MAX_MEMBERS members (~20 MB for CIFAR-10's two): a Python user's or the pipeline's
# second read of the same tar skips it. A tar changed on disk has another key and is read again.
TAR_INDEX_KEEP = 4
TAR_INDEX_MAX_MEMBERS = 200_000
_tar_index: OrderedDict[tuple, list[tarfile.TarInfo]] = OrderedDict()
_tar_index_lock = threading.Lock()


def tar_files(tar: tarfile.TarFile, path: Path) -> list[tarfile.TarInfo]:
    """The regular files of ``tar`` (opened from ``path``), in name order, each usable with
    ``tar.extractfile``; from the process's index where it holds this tar as it is on disk."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _tar_index_lock:
        files = _tar_index.get(key)
        if files is not None:
            _tar_index.move_to_end(key)
            return files
    members = tar.getmembers()
    files = sorted((m for m in members if m.isfile()), key=lambda m: m.name)
    if len(members) <= TAR_INDEX_MAX_MEMBERS:
        with _tar_index_lock:
            _tar_index[key] = files
            while len(_tar_index) > TAR_INDEX_KEEP:
                _tar_index.popitem(last=False)
    return files


def iter_tar(path: Path) -> Iterator[tuple[str, str, bytes]]:
    """``(class, label, bytes)`` of every image of the tar at ``path`` (``<class>/<image>``), in name
    order, read as they are taken."""
    with _open_tar(path) as tar:
        for m in _tar_images(tar, path):
            blob = _read_member(tar, m, path)
            if blob is not None:
                yield Path(m.name).parts[-2], f"{path}:{m.name}", blob


def tar_images(path: Path, limit: int | None = None) -> tuple[list[tuple[str, str, bytes]], list[str]]:
    """:func:`iter_tar`'s images as a list, all of them or the fixed subset of ``limit``
    (:func:`subset_indices`, as :func:`~aft_export.data.datasets.load_labelled` takes it), and the
    sorted class names of every image in the tar. Only the images taken are read: every member's
    header is checked as :func:`iter_tar` checks it, and the index is the process's
    (:func:`tar_files`), so a subset of CIFAR-10's test set reads its images, not 10,000."""
    with _open_tar(path) as tar:
        members = _tar_images(tar, path)
        classes = sorted({Path(m.name).parts[-2] for m in members})
        if limit is not None and limit < len(members):
            members = [members[i] for i in subset_indices(len(members), limit)]
        items = [(Path(m.name).parts[-2], f"{path}:{m.name}", _read_member(tar, m, path)) for m in members]
    return [item for item in items if item[2] is not None], classes


def _open_tar(path: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(path)
    except TAR_ERRORS as exc:
        raise tar_error(path, exc) from None


def _tar_images(tar: tarfile.TarFile, path: Path) -> list[tarfile.TarInfo]:
    """The image members of ``tar``, each checked: inside a class folder, at most MAX_IMAGE_BYTES."""
    try:
        members = [m for m in tar_files(tar, path) if Path(m.name).suffix.lower() in IMAGE_EXTENSIONS]
    except TAR_ERRORS as exc:
        raise tar_error(path, exc) from None
    for m in members:
        if len(Path(m.name).parts) < 2:
            raise AFTExportError(f"{path}: {m.name} is not inside a class folder; expected <class>/<image>")
        if m.size > MAX_IMAGE_BYTES:
            raise AFTExportError(f"{path}:{m.name} is {m.size / 2**20:.0f} MB, more than aft-export reads "
                                 f"({MAX_IMAGE_BYTES // 2**20} MB); resize it first")  # fmt: skip
    return members


def _read_member(tar: tarfile.TarFile, m: tarfile.TarInfo, path: Path) -> bytes | None:
    try:
        fh = tar.extractfile(m)
        return fh.read() if fh is not None else None
    except TAR_ERRORS as exc:
        raise tar_error(path, exc) from None


def normalize(images, mean, std):
    """uint8 (N, H, W, 3) array or tensor -> float32 NCHW tensor, ``(x / 255 - mean) / std``."""
    import torch

    x = torch.as_tensor(images).permute(0, 3, 1, 2).contiguous().float().div_(255.0)  # NCHW in memory too
    m = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)
    return x.sub_(m).div_(s)  # in place: one float copy of the images, not three


def decode_pixels(items, size: int) -> np.ndarray:
    """The uint8 (N, size, size, 3) RGB pixels of encoded images, each decoded as every command
    decodes one (:func:`load_image`): what calibration, predict and the Triton model feed a model
    through :func:`model_input`. ``items``: ``(name, image)`` pairs, ``image`` bytes or a path,
    ``name`` what an error calls it ("" for the path itself)."""
    return np.stack([load_image(data, size, name=name) for name, data in items])


def model_input(pixels: np.ndarray, mean, std, input_format: str = NORMALIZED) -> np.ndarray:
    """What a model of ``input_format`` is fed for decoded images (uint8 (N, H, W, 3) RGB pixels,
    as :func:`load_image` makes them): its entry's :meth:`~aft_export.data.formats.InputFormat.feed`."""
    if input_format not in FORMATS:
        raise AFTExportError(f"unknown input format {input_format!r}; one of {', '.join(INPUT_FORMATS)}")
    return FORMATS[input_format].feed(pixels, mean, std)
